package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
)

// replayBase is the time of the first record produceReplayHistory writes.
var replayBase = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// produceReplayHistory creates topic with 3 partitions and writes 10
// records to each: record i of partition p has value "p<p>-<i>" and the
// timestamp replayBase + i minutes.
func produceReplayHistory(t *testing.T, addr, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, topic, 3, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer()
	defer p.Close()
	var recs []*client.Record
	for part := int32(0); part < 3; part++ {
		for i := range 10 {
			recs = append(recs, &client.Record{
				Topic: topic, Partition: part,
				Value:     []byte(fmt.Sprintf("p%d-%d", part, i)),
				Timestamp: replayBase.Add(time.Duration(i) * time.Minute),
			})
		}
	}
	if err := p.ProduceSync(ctx, recs...); err != nil {
		t.Fatal(err)
	}
}

// replayedJSON parses replay --format json output into values by
// partition, checking each partition's offsets grow.
func replayedJSON(t *testing.T, out string) map[int32][]string {
	t.Helper()
	got := map[int32][]string{}
	last := map[int32]int64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		var r struct {
			Partition int32  `json:"partition"`
			Offset    int64  `json:"offset"`
			Value     string `json:"value"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if prev, ok := last[r.Partition]; ok && r.Offset <= prev {
			t.Errorf("partition %d: offset %d after %d", r.Partition, r.Offset, prev)
		}
		last[r.Partition] = r.Offset
		got[r.Partition] = append(got[r.Partition], r.Value)
	}
	return got
}

// wantReplayed is the values of records first..last of each partition.
func wantReplayed(parts []int32, first, last int) map[int32][]string {
	want := map[int32][]string{}
	for _, p := range parts {
		for i := first; i <= last; i++ {
			want[p] = append(want[p], fmt.Sprintf("p%d-%d", p, i))
		}
	}
	return want
}

func sameReplay(a, b map[int32][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for p, v := range a {
		if !slices.Equal(v, b[p]) {
			return false
		}
	}
	return true
}

func TestReplayTimeRange(t *testing.T) {
	addr := startACLBroker(t)
	produceReplayHistory(t, addr, "hist")
	from := replayBase.Add(2 * time.Minute).Format(time.RFC3339)
	to := replayBase.Add(5 * time.Minute).Format(time.RFC3339)

	out, errOut, err := runWithInput(t, "", "replay", "hist", "--broker", addr, "--from", from, "--to", to, "--format", "json")
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	if got, want := replayedJSON(t, out), wantReplayed([]int32{0, 1, 2}, 2, 5); !sameReplay(got, want) {
		t.Errorf("replay %s..%s wrote %v, want %v", from, to, got, want)
	}
	// Not a terminal: no bar, one summary line.
	if !strings.HasPrefix(errOut, "replayed 12 records,") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("stderr %q, want one summary line of 12 records", errOut)
	}

	// --to as epoch milliseconds, inclusive, and a subset of partitions.
	out, errOut, err = runWithInput(t, "", "replay", "hist", "--broker", addr, "--from", from,
		"--to", fmt.Sprintf("@%d", replayBase.Add(3*time.Minute).UnixMilli()), "--partitions", "2,0", "--format", "json")
	if err != nil {
		t.Fatalf("replay --partitions: %v\n%s", err, errOut)
	}
	if got, want := replayedJSON(t, out), wantReplayed([]int32{0, 2}, 2, 3); !sameReplay(got, want) {
		t.Errorf("replay --partitions 2,0 wrote %v, want %v", got, want)
	}

	// Without --to: to the end; from an offset.
	out, errOut, err = runWithInput(t, "", "replay", "hist", "--broker", addr, "--from", "7", "--format", "json")
	if err != nil {
		t.Fatalf("replay --from 7: %v\n%s", err, errOut)
	}
	if got, want := replayedJSON(t, out), wantReplayed([]int32{0, 1, 2}, 7, 9); !sameReplay(got, want) {
		t.Errorf("replay --from 7 wrote %v, want %v", got, want)
	}

	// --output: the records go to the file, nothing to stdout.
	file := filepath.Join(t.TempDir(), "out.txt")
	out, errOut, err = runWithInput(t, "", "replay", "hist", "--broker", addr, "--from", from, "--to", to, "--partitions", "1", "--output", file)
	if err != nil {
		t.Fatalf("replay --output: %v\n%s", err, errOut)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if out != "" || string(data) != "p1-2\np1-3\np1-4\np1-5\n" {
		t.Errorf("replay --output wrote %q to the file and %q to stdout", data, out)
	}
}

func TestReplayRate(t *testing.T) {
	addr := startACLBroker(t)
	produceReplayHistory(t, addr, "hist")
	start := time.Now()
	out, errOut, err := runWithInput(t, "", "replay", "hist", "--broker", addr, "--from", "earliest", "--rate", "40")
	if err != nil {
		t.Fatalf("replay --rate: %v\n%s", err, errOut)
	}
	if n := strings.Count(out, "\n"); n != 30 {
		t.Errorf("replay --rate wrote %d records, want 30", n)
	}
	// 30 records at 40/s, four at a time: at least (30-4)/40 s. A loose
	// lower bound only; the upper one depends on the machine.
	if el := time.Since(start); el < 500*time.Millisecond {
		t.Errorf("replay --rate 40 of 30 records took %s", el)
	}
}

func TestReplayErrors(t *testing.T) {
	addr := startACLBroker(t)
	produceReplayHistory(t, addr, "hist")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "nope", "--from", "earliest"}, `topic "nope" not found`},
		{[]string{"replay", "hist", "--from", "2024-05-02", "--to", "2024-05-01"}, "--to 2024-05-01T00:00:00.000Z is before --from"},
		{[]string{"replay", "hist", "--from", "earliest", "--partitions", "0,x"}, `"x" is not a partition number`},
		{[]string{"replay", "hist", "--from", "earliest", "--partitions", "1,1"}, "listed twice"},
		{[]string{"replay", "hist", "--from", "earliest", "--partitions", "0,5"}, `topic "hist" has no partition 5: it has 3`},
		{[]string{"replay", "hist", "--from", "earliest", "--to", "soon"}, `--to "soon"`},
		{[]string{"replay", "hist", "--from", "earliest", "--rate", "-1"}, "--rate -1"},
		{[]string{"replay", "hist"}, `"from" not set`},
	} {
		_, _, err := runWithInput(t, "", append(tc.args, "--broker", addr)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("strata %s: %v, want an error with %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
}

// BenchmarkReplayProgressCost measures what the progress bar costs: replay
// of 200k records of 1 KiB from 3 partitions to /dev/null, alternately with
// the bar forced on and off, 11 pairs, medians logged:
//
//	go test ./cmd/strata/ -run '^$' -bench ReplayProgressCost -benchtime 1x -v
func BenchmarkReplayProgressCost(b *testing.B) {
	t := testing.TB(b) // one run, a figure: not b.N iterations
	addr := startACLBroker(t)
	ctx := t.Context()
	c, err := client.New(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "figure", 3, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer()
	value := []byte(strings.Repeat("x", 1024))
	const n = 200_000
	for i := range n {
		p.Produce(ctx, &client.Record{Topic: "figure", Partition: int32(i % 3), Value: value}, nil)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	run := func(bar bool) float64 {
		args := []string{"replay", "figure", "--broker", addr, "--from", "earliest", "--output", os.DevNull}
		if bar {
			args = append(args, "--progress")
		}
		start := time.Now()
		_, errOut, err := runWithInput(t, "", args...)
		el := time.Since(start)
		if err != nil {
			t.Fatalf("replay: %v\n%s", err, errOut)
		}
		if !strings.Contains(errOut, fmt.Sprintf("replayed %d records", n)) {
			t.Fatalf("stderr %q", errOut)
		}
		return float64(n) * 1024 / 1e6 / el.Seconds()
	}
	run(false) // warm the page cache
	var off, on []float64
	const runs = 11
	for range runs {
		off = append(off, run(false))
		on = append(on, run(true))
	}
	slices.Sort(off)
	slices.Sort(on)
	t.Logf("replay MB/s, medians of %d: without bar %.1f (runs %.1f), with bar %.1f (runs %.1f); ratio with/without %.3f",
		runs, off[runs/2], off, on[runs/2], on, on[runs/2]/off[runs/2])
}

// BenchmarkReplayBar is the cost of one redraw of the bar over 3
// partitions; it is drawn at most 10 times a second.
func BenchmarkReplayBar(b *testing.B) {
	ranges := make([]*replayRange, 3)
	for i := range ranges {
		ranges[i] = &replayRange{partition: int32(i), end: 100_000, localStart: 40_000}
		ranges[i].position.Store(55_000)
	}
	for b.Loop() {
		_ = replayBar(165_000, 165_000<<10, 3*time.Second, 300_000, ranges)
	}
}

// TestReplayFromTheColdTier replays a range that lies partly in the bucket
// only (gone from local disk) and partly on disk: the broker serves both,
// and the bar reports the cold share of the offsets.
func TestReplayFromTheColdTier(t *testing.T) {
	ab := startAdminBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{ab.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "cold", 1, 1, map[string]string{
		"segment.bytes": "16KiB", "local.retention.bytes": "16KiB", "retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer()
	defer p.Close()
	for i := range 200 {
		r := &client.Record{Topic: "cold", Value: []byte(fmt.Sprintf("%04d-%0500d", i, 0)), Timestamp: replayBase.Add(time.Duration(i) * time.Second)}
		if err := p.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	var localStart int64
	dl, _ := ctx.Deadline()
	testutil.Eventually(t, time.Until(dl), "history to move to the cold tier", func() error {
		d, err := c.DescribeTopic(ctx, "cold")
		if err != nil {
			t.Fatal(err)
		}
		part := d.GetPartitions()[0]
		if localStart = part.GetLocalStartOffset(); localStart > 100 && part.GetLogStartOffset() == 0 {
			return nil
		}
		return fmt.Errorf("history did not move to the cold tier: %v", part)
	})
	from, to := replayBase.Add(10*time.Second), replayBase.Add(190*time.Second)
	out, errOut, err := runWithInput(t, "", "replay", "cold", "--broker", ab.addr, "--progress",
		"--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339))
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 181 || !strings.HasPrefix(lines[0], "0010-") || !strings.HasPrefix(lines[180], "0190-") {
		t.Fatalf("replay of a range across both tiers wrote %d lines, %q .. %q", len(lines), lines[0], lines[len(lines)-1])
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("%04d-", i+10)) {
			t.Fatalf("line %d is %.10q", i, l)
		}
	}
	// The last redraw: everything read (offsets 10 to the end, 200: the
	// topic's times are its own, so the range is read to the end), and at
	// least the offsets below localStart cold (the local start may have
	// moved on since).
	i := strings.LastIndex(errOut, "cold ")
	if i < 0 || !strings.Contains(errOut, "181 records") {
		t.Fatalf("progress %q, want 181 records and a cold share", errOut)
	}
	minPct := 100 * float64(min(localStart, 200)-10) / 190
	var pct float64
	if _, err := fmt.Sscanf(errOut[i:], "cold %f%%", &pct); err != nil || pct < minPct-1 || pct > 100 {
		t.Errorf("progress %q: cold share %v (%v), want at least %.0f%%", errOut[i:], pct, err, minPct)
	}
}

// TestReplayOutOfOrderHistory replays a time range of history backfilled
// out of order: records whose times are in range sit at offsets after
// records past --to, and the replay must find them all, and nothing
// outside the range.
func TestReplayOutOfOrderHistory(t *testing.T) {
	addr := startACLBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "backfill", 1, 1, nil); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer()
	defer p.Close()
	// Minutes after replayBase of offsets 0..7; the range is [1m, 5m].
	minutes := []int{0, 10, 2, 20, 3, 30, 5, 1}
	for i, m := range minutes {
		r := &client.Record{Topic: "backfill", Value: []byte(fmt.Sprintf("o%d-m%d", i, m)), Timestamp: replayBase.Add(time.Duration(m) * time.Minute)}
		if err := p.ProduceSync(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	from, to := replayBase.Add(time.Minute), replayBase.Add(5*time.Minute)
	out, errOut, err := runWithInput(t, "", "replay", "backfill", "--broker", addr,
		"--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339))
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, errOut)
	}
	if want := "o2-m2\no4-m3\no6-m5\no7-m1\n"; out != want {
		t.Errorf("replay of [1m, 5m] over out-of-order times wrote\n%s\nwant\n%s", out, want)
	}
	// --ordered trusts the time index: it stops at offset 1 (10m), before
	// anything in range.
	out, _, err = runWithInput(t, "", "replay", "backfill", "--broker", addr, "--ordered",
		"--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339))
	if err != nil || out != "" {
		t.Errorf("replay --ordered over out-of-order times wrote %q (%v), want nothing: it stops at the first record after --to", out, err)
	}
	// From an offset.
	out, _, err = runWithInput(t, "", "replay", "backfill", "--broker", addr, "--from", "3", "--to", to.Format(time.RFC3339))
	if want := "o4-m3\no6-m5\no7-m1\n"; err != nil || out != want {
		t.Errorf("replay --from 3 --to 5m wrote %q (%v), want %q", out, err, want)
	}
}
