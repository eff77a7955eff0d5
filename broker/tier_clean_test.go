package broker

// The cold cleaner in the leader's tiering passes: a compacted tiered
// partition on a real hot log and the in-memory bucket, with the test's
// clock.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/hotlog"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering"
)

// produceKeyed appends one batch of records of the given keys, values
// naming their order, and moves the high watermark.
func (l *tieredLeader) produceKeyed(keys ...string) {
	l.t.Helper()
	bl := record.NewBuilder(record.DefaultBatchOptions())
	for _, k := range keys {
		bl.Add(record.Record{Timestamp: l.now.UnixMilli(), Key: []byte(k), Value: fmt.Appendf(nil, "%s=%d", k, l.ids)})
		l.ids++
	}
	b, err := bl.Build()
	if err != nil {
		l.t.Fatal(err)
	}
	if _, _, err := l.p.appendAsLeader(b, AcksLeader); err != nil {
		l.t.Fatal(err)
	}
	l.p.advance()
}

// coldRecords reads every record the manifest names, oldest first.
func (l *tieredLeader) coldRecords() []record.Record {
	l.t.Helper()
	ctx := context.Background()
	var out []record.Record
	err := tiering.ForEachSegment(ctx, l.store, l.head(), func(s tiering.SegmentRef) bool {
		data, _, err := l.store.Get(ctx, s.Key)
		if err != nil {
			l.t.Fatal(err)
		}
		for buf := data[:s.LogLen]; len(buf) > 0; {
			b, rest, err := record.Next(buf)
			if err != nil {
				l.t.Fatal(err)
			}
			recs, err := b.Records()
			if err != nil {
				l.t.Fatal(err)
			}
			out = append(out, recs...)
			buf = rest
		}
		return true
	})
	if err != nil {
		l.t.Fatal(err)
	}
	return out
}

// A compacted tiered partition's leader uploads, then cleans its cold tier
// once the cleaner's interval has passed: the bucket holds the last value
// of each key, the replaced objects stay through tiering.retired_grace and
// go after it, and the hot cleaner never rewrites what the cold tier lacks.
func TestTheLeaderCleansTheColdTierOfACompactedTopic(t *testing.T) {
	l := newTieredLeader(t, map[string]string{"cleanup.policy": "compact", "segment.bytes": "16KiB", "min.cleanable.dirty.ratio": "0.5"}, 1)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i := range 400 {
		l.produceKeyed(keys[i%len(keys)], keys[(i+3)%len(keys)])
	}
	if err := l.p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	l.pass() // uploads all; the cleaner's first look cleans
	h := l.head()
	if h.EndOffset() != 800 {
		t.Fatalf("cold tier ends at %d, want 800", h.EndOffset())
	}
	if h.CleanedTo != 800 || len(h.Retired) == 0 {
		t.Fatalf("the cold tier was not cleaned: cleaned to %d, %d objects retired", h.CleanedTo, len(h.Retired))
	}
	got := l.coldRecords()
	last := map[string]string{}
	for i := range 400 {
		for j, k := range []string{keys[i%len(keys)], keys[(i+3)%len(keys)]} {
			last[k] = fmt.Sprintf("%s=%d", k, 2*i+j)
		}
	}
	if len(got) != len(last) {
		t.Fatalf("%d records in the bucket, want one per key (%d)", len(got), len(last))
	}
	for _, r := range got {
		if last[string(r.Key)] != string(r.Value) {
			t.Fatalf("key %s: %s in the bucket, last written %s", r.Key, r.Value, last[string(r.Key)])
		}
	}
	retired := h.Retired[0].Key
	if _, err := l.store.Stat(context.Background(), retired); err != nil {
		t.Fatalf("a replaced object went before its grace: %v", err)
	}
	l.now = l.now.Add(time.Duration(defaultRetiredGrace()) - time.Second)
	l.pass()
	if _, err := l.store.Stat(context.Background(), retired); err != nil {
		t.Fatalf("a replaced object went before its grace: %v", err)
	}
	l.now = l.now.Add(2 * time.Second)
	l.pass()
	if _, err := l.store.Stat(context.Background(), retired); err == nil || len(l.head().Retired) != 0 {
		t.Fatalf("a replaced object outlived its grace (%v, %d retired)", err, len(l.head().Retired))
	}

	// The hot cleaner's limit is the cold tier's end: nothing past it is
	// rewritten before it is uploaded.
	l.produceKeyed("a", "b")
	if limit, ok := l.p.hotCleanLimit(&Broker{store: l.store}); !ok || limit != 800 {
		t.Fatalf("hot cleaner limit %d (%v), want the cold end 800", limit, ok)
	}
}

func defaultRetiredGrace() time.Duration { return tiering.DefaultRetiredGrace }

// The cold cleaner's passes charge the broker's throttle and map at most
// coldPassSeconds of dirty bytes at its rate each: a cold tier dirtier
// than that is cleaned over several rounds, each going on from where the
// last stopped, to the same end.
func TestTheColdCleanerIsBoundedPerRound(t *testing.T) {
	l := newTieredLeader(t, map[string]string{"cleanup.policy": "compact", "segment.bytes": "16KiB", "min.cleanable.dirty.ratio": "0.01"}, 1)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	for i := range 400 {
		l.produceKeyed(keys[i%len(keys)], keys[(i+3)%len(keys)])
	}
	if err := l.p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	th := tiering.NewThrottle(0) // counts, does not pace: the rate below only bounds a pass
	env := l.env()
	env.clean.throttle, env.clean.rate = th, 2<<10 // 20 KiB of dirty objects per pass: one object
	var ends []int64
	for round := 0; round < 20 && (len(ends) == 0 || ends[len(ends)-1] < 800); round++ {
		if err := l.p.tierPassErr(context.Background(), env, l.now); err != nil {
			t.Fatal(err)
		}
		if h := l.head(); len(ends) == 0 || h.CleanedTo != ends[len(ends)-1] {
			ends = append(ends, h.CleanedTo)
		}
		if l.head().CleanScan == nil {
			l.now = l.now.Add(time.Duration(config.DefaultBroker().Cleaner.Backoff))
		} // a scan under way goes on at the next round, whatever the interval
	}
	if len(ends) < 2 || ends[0] >= 800 || ends[len(ends)-1] != 800 {
		t.Fatalf("the cold tier was cleaned to %v over the rounds: want several bounded passes ending at 800", ends)
	}
	if th.Charged() == 0 {
		t.Fatal("the cold cleaner charged nothing to the broker's throttle")
	}
	seen := map[string]bool{}
	for _, r := range l.coldRecords() {
		if seen[string(r.Key)] {
			t.Fatalf("key %s twice in the cleaned cold tier", r.Key)
		}
		seen[string(r.Key)] = true
	}
}

// The hot cleaner of a tiered partition keeps a tombstone until the cold
// cleaner has compacted the cold tier past it: a consumer reads the cold
// tier below the local log start, and a key's older record there would
// come back were the tombstone gone from the local log (a simulation seed
// with a slow cold cleaner found it).
func TestHotCleanerKeepsTombstonesTheColdTierHasNotCleaned(t *testing.T) {
	l := newTieredLeader(t, map[string]string{"cleanup.policy": "compact", "segment.bytes": "16KiB",
		"min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0"}, 1)
	keys := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	l.produceKeyed("gone")
	for i := range 200 {
		l.produceKeyed(keys[i%len(keys)], keys[(i+3)%len(keys)])
	}
	bl := record.NewBuilder(record.DefaultBatchOptions())
	bl.Add(record.Record{Timestamp: l.now.UnixMilli(), Key: []byte("gone")}) // the tombstone
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	res, _, err := l.p.appendAsLeader(b, AcksLeader)
	if err != nil {
		t.Fatal(err)
	}
	tombstone := res.BaseOffset
	for i := range 200 {
		l.produceKeyed(keys[i%len(keys)], keys[(i+5)%len(keys)])
	}
	if err := l.p.log.Roll(); err != nil {
		t.Fatal(err)
	}
	// Uploads with the cold cleaner not due (its interval not passed): the
	// cold tier holds the tombstone and the key's older record, uncleaned.
	l.p.work.lastClean = l.now
	l.pass()
	if h := l.head(); h.EndOffset() <= tombstone || h.CleanedTo > tombstone {
		t.Fatalf("cold tier ends at %d, cleaned to %d: want the tombstone at %d uploaded and not yet cleaned", h.EndOffset(), h.CleanedTo, tombstone)
	}
	hot := &Broker{store: l.store, cfg: config.Broker{Cleaner: config.Cleaner{DedupeBufferSize: 1 << 20}}}
	hotCleanings := 0
	// round writes new dirty segments, uploads them and cleans the hot tier.
	round := func() {
		t.Helper()
		for i := range 200 {
			l.produceKeyed(keys[i%len(keys)])
		}
		if err := l.p.log.Roll(); err != nil {
			t.Fatal(err)
		}
		l.pass()
		c := hot.cleanableAt(l.p, l.now.UnixMilli())
		if !c.eligible {
			t.Fatalf("the hot log is not due a cleaning: %+v", c)
		}
		if err := hot.cleanLog(l.p, c, newIOThrottle(0, nil), l.now.UnixMilli()); err != nil {
			t.Fatal(err)
		}
		hotCleanings++
		l.now = l.now.Add(time.Second)
	}
	holdsTombstone := func() bool {
		if start := l.p.log.LogStartOffset(); start > tombstone {
			t.Fatalf("the local log starts at %d, past the tombstone at %d", start, tombstone)
		}
		for _, r := range localRecordsOf(t, l.p) {
			if string(r.Key) == "gone" && r.Value == nil {
				return true
			}
		}
		return false
	}
	for range 3 { // the first covers the tombstone; the later ones could remove it
		round()
	}
	if !holdsTombstone() {
		t.Fatalf("the hot cleaner removed the tombstone at %d while the cold tier, cleaned to %d, holds the key's older record", tombstone, l.head().CleanedTo)
	}
	// The cold cleaner runs; then the hot one may remove the tombstone.
	l.now = l.now.Add(time.Duration(config.DefaultBroker().Cleaner.Backoff))
	for n := 0; n < 20 && l.head().CleanedTo <= tombstone; n++ {
		l.pass()
		l.now = l.now.Add(time.Duration(config.DefaultBroker().Cleaner.Backoff))
	}
	if to := l.head().CleanedTo; to <= tombstone {
		t.Fatalf("the cold tier was cleaned to %d only", to)
	}
	for range 2 {
		round()
	}
	if holdsTombstone() {
		t.Fatalf("the hot cleaner kept the tombstone at %d after the cold tier was cleaned to %d", tombstone, l.head().CleanedTo)
	}
}

// localRecordsOf reads every record of p's local log.
func localRecordsOf(t *testing.T, p *partition) []record.Record {
	t.Helper()
	var out []record.Record
	for _, b := range localBatches(t, p.log) {
		recs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, recs...)
	}
	return out
}

// localBatches reads every batch of a local log, active segment included.
func localBatches(t *testing.T, l *hotlog.Log) []record.Batch {
	t.Helper()
	var out []record.Batch
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		res, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		for data := res.Data; len(data) > 0; {
			b, rest, err := record.Next(data)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b)
			data = rest
		}
		off = res.NextOffset
	}
	return out
}
