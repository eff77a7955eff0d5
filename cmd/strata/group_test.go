package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/testutil"
)

// TestGroupResetToATimeInTheColdTier: a group reset to a time whose records
// are only in the bucket starts every partition at exactly the first record
// at or after it; bad positions and unknown groups are refused and change
// nothing; a member then reads from there and describe shows no lag.
func TestGroupResetToATimeInTheColdTier(t *testing.T) {
	ab := startAdminBroker(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{ab.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const parts, n = 3, 120
	if _, err := c.CreateTopic(ctx, "hist", parts, 1, map[string]string{
		"segment.bytes": "16KiB", "local.retention.bytes": "16KiB", "retention.ms": "-1"}); err != nil {
		t.Fatal(err)
	}
	p := c.NewProducer()
	defer p.Close()
	for i := range n {
		var recs []*client.Record
		for part := range int32(parts) {
			// Partition p's record i is at base + i seconds + p ms, so each
			// partition has its own offset for a time between records.
			recs = append(recs, &client.Record{Topic: "hist", Partition: part, Value: fmt.Appendf(nil, "p%d-%03d-%0500d", part, i, 0),
				Timestamp: replayBase.Add(time.Duration(i)*time.Second + time.Duration(part)*time.Millisecond)})
		}
		if err := p.ProduceSync(ctx, recs...); err != nil {
			t.Fatal(err)
		}
	}
	// Wait until the first 60 records of every partition are in the
	// bucket only.
	for part := range int32(parts) {
		dl, _ := ctx.Deadline()
		testutil.Eventually(t, time.Until(dl), "history to move to the cold tier", func() error {
			d, err := c.DescribeTopic(ctx, "hist")
			if err != nil {
				t.Fatal(err)
			}
			pd := d.GetPartitions()[part]
			if pd.GetLocalStartOffset() > 60 && pd.GetLogStartOffset() == 0 {
				return nil
			}
			return fmt.Errorf("history did not move to the cold tier: %v", pd)
		})
	}

	run := func(args ...string) (string, error) {
		out, errOut, err := runWithInput(t, "", append(args, "--broker", ab.addr)...)
		if err != nil {
			return out + errOut, err
		}
		return out, nil
	}
	committed := func() map[int32]int64 {
		offs, err := c.FetchOffsets(ctx, "g")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		for tp, off := range offs {
			out[tp.Partition] = off
		}
		return out
	}

	// +37.001s is just after partition 0's record 37 (at +37s) and exactly
	// at partition 1's (+37.001s): the first record at or after it is 38
	// in partition 0 and 37 in the others.
	at := replayBase.Add(37*time.Second + time.Millisecond).Format(time.RFC3339Nano)
	out, err := run("group", "reset", "g", "--to", at, "--topic", "hist", "--dry-run")
	if err != nil || !strings.Contains(out, "Dry run: nothing changed.") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	if got := committed(); len(got) != 0 {
		t.Fatalf("a dry run committed %v", got)
	}
	if out, err := run("group", "reset", "g", "--to", at, "--topic", "hist"); err != nil {
		t.Fatalf("reset: %v\n%s", err, out)
	}
	want := map[int32]int64{0: 38, 1: 37, 2: 37}
	if got := committed(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reset to %s committed %v, want %v", at, got, want)
	}

	// Bad input: clear errors, nothing changed.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"group", "reset", "g", "--to", time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}, "is in the future"},
		{[]string{"group", "reset", "g", "--to", "500"}, "OFFSET_OUT_OF_RANGE"},
		{[]string{"group", "reset", "g", "--to", "soon"}, "--to"},
		{[]string{"group", "reset", "g"}, "--to is required"},
		{[]string{"group", "reset", "g", "--to", "earliest", "--topic", "missing"}, "TOPIC_NOT_FOUND"},
		{[]string{"group", "reset", "new-group", "--to", "earliest"}, "name the topics to reset with --topic"},
		{[]string{"group", "describe", "nobody"}, "GROUP_NOT_FOUND"},
		{[]string{"group", "delete", "nobody"}, "GROUP_NOT_FOUND"},
	} {
		out, err := run(tc.args...)
		if err == nil || !strings.Contains(err.Error()+out, tc.want) {
			t.Errorf("%v: %v\n%s\nwant an error saying %q", tc.args, err, out, tc.want)
		}
	}
	if got := committed(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("refused resets changed the commits to %v", got)
	}

	// A member reads from the reset positions to the end and commits.
	out, err = run("consume", "hist", "--group", "g")
	if err != nil {
		t.Fatalf("consume --group: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3*n-38-37-37 {
		t.Fatalf("the member read %d records, want %d", len(lines), 3*n-38-37-37)
	}
	first := map[string]string{}
	for _, l := range lines {
		if p := l[:2]; first[p] == "" {
			first[p] = l[:6]
		}
	}
	if fmt.Sprint(first) != "map[p0:p0-038 p1:p1-037 p2:p2-037]" {
		t.Fatalf("the member started at %v", first)
	}
	out, err = run("group", "describe", "g")
	if err != nil {
		t.Fatal(err)
	}
	for part := range parts {
		if !strings.Contains(out, fmt.Sprintf("hist   %d          -       %d        %d      0", part, n, n)) {
			t.Errorf("describe after the member read to the end:\n%s", out)
			break
		}
	}
	out, err = run("group", "list")
	if err != nil || !strings.Contains(out, "g      empty  0") {
		t.Errorf("list: %v\n%s", err, out)
	}
	if out, err := run("group", "delete", "g"); err != nil || !strings.Contains(out, "Deleted group g.") {
		t.Fatalf("delete: %v\n%s", err, out)
	}
	if got := committed(); len(got) != 0 {
		t.Fatalf("a deleted group still has %v", got)
	}
}

// Two members started together split the topic, and with --max a member
// commits exactly what it printed.
func TestConsumeGroupCommitsWhatItPrinted(t *testing.T) {
	addr := startACLBroker(t)
	produceReplayHistory(t, addr, "hist")
	out, errOut, err := runWithInput(t, "", "consume", "hist", "--group", "g", "--max", "4", "--broker", addr)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, errOut)
	}
	if strings.Count(out, "\n") != 4 || !strings.Contains(errOut, "group g: assigned hist/0 hist/1 hist/2") {
		t.Fatalf("consume --max 4 printed %q, stderr %q", out, errOut)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := client.New(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	offs, err := c.FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, off := range offs {
		sum += off
	}
	if sum != 4 {
		t.Fatalf("committed %v after printing 4 records", offs)
	}
	// The next member prints the other 26, nothing twice.
	out2, errOut, err := runWithInput(t, "", "consume", "hist", "--group", "g", "--broker", addr)
	if err != nil {
		t.Fatalf("consume: %v\n%s", err, errOut)
	}
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out+out2), "\n") {
		if seen[l] {
			t.Fatalf("%s printed twice", l)
		}
		seen[l] = true
	}
	if len(seen) != 30 {
		t.Fatalf("%d distinct records, want 30", len(seen))
	}
	if _, _, err := runWithInput(t, "", "consume", "hist", "--group", "g", "--partition", "1", "--broker", addr); err == nil ||
		!strings.Contains(err.Error(), "--partition cannot be used with --group") {
		t.Fatalf("consume --group --partition: %v", err)
	}
}

// replay --group resets the group to the start of the range, commits the
// end, and is refused while the group has members.
func TestReplayWithGroup(t *testing.T) {
	addr := startACLBroker(t)
	produceReplayHistory(t, addr, "hist")
	from := replayBase.Add(2 * time.Minute).Format(time.RFC3339)
	to := replayBase.Add(5 * time.Minute).Format(time.RFC3339)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// An earlier position the reset must replace.
	if err := c.CommitOffsets(ctx, "rg", map[client.TopicPartition]int64{{Topic: "hist", Partition: 0}: 9}); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runWithInput(t, "", "replay", "hist", "--broker", addr, "--from", from, "--to", to, "--group", "rg")
	if err != nil || strings.Count(out, "\n") != 12 {
		t.Fatalf("replay --group: %v, %d lines\n%s", err, strings.Count(out, "\n"), errOut)
	}
	offs, err := c.FetchOffsets(ctx, "rg")
	if err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if got := offs[client.TopicPartition{Topic: "hist", Partition: p}]; got != 6 {
			t.Errorf("after the replay, partition %d committed at %d, want 6 (after the range)", p, got)
		}
	}
	// The group resumes after the range.
	out, errOut, err = runWithInput(t, "", "consume", "hist", "--broker", addr, "--group", "rg")
	if err != nil || strings.Count(out, "\n") != 12 || !strings.Contains(out, "p0-6\n") || strings.Contains(out, "p0-5\n") {
		t.Fatalf("consume after replay --group: %v\n%s%s", err, out, errOut)
	}

	// With a member in the group, replay --group is refused before it
	// writes anything.
	g, err := c.NewGroupConsumer("rg", []string{"hist"})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close(ctx)
	dl, _ := ctx.Deadline()
	testutil.Eventually(t, time.Until(dl), "the member to join", func() error {
		d, err := c.DescribeGroup(ctx, "rg")
		if err != nil {
			return fmt.Errorf("the member did not join: %v", err)
		}
		if n := len(d.GetMembers()); n != 1 {
			return fmt.Errorf("the member did not join: %d members", n)
		}
		return nil
	})
	out, errOut, err = runWithInput(t, "", "replay", "hist", "--broker", addr, "--from", from, "--group", "rg")
	if err == nil || !strings.Contains(err.Error(), "GROUP_NOT_EMPTY") || out != "" {
		t.Fatalf("replay --group with a member: %v, wrote %q\n%s", err, out, errOut)
	}
	// So is a reset, unless forced: then the member is removed first.
	if _, _, err := runWithInput(t, "", "group", "reset", "rg", "--to", "earliest", "--broker", addr); err == nil || !strings.Contains(err.Error(), "GROUP_NOT_EMPTY") {
		t.Fatalf("reset with a member: %v", err)
	}
	if offs, err := c.FetchOffsets(ctx, "rg"); err != nil || offs[client.TopicPartition{Topic: "hist", Partition: 0}] == 0 {
		t.Fatalf("a refused reset moved the offsets: %v %v", offs, err)
	}
	out, errOut, err = runWithInput(t, "", "group", "reset", "rg", "--to", "earliest", "--force", "--broker", addr)
	if err != nil || !strings.Contains(out, "Removed 1 members") {
		t.Fatalf("forced reset: %v\n%s%s", err, out, errOut)
	}
	offs, err = c.FetchOffsets(ctx, "rg")
	if err != nil || offs[client.TopicPartition{Topic: "hist", Partition: 0}] != 0 {
		t.Fatalf("after the forced reset: %v %v", offs, err)
	}
}
