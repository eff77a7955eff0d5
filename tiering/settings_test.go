package tiering

import (
	"errors"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
)

var (
	settingsA = map[string]string{"retention.ms": "7776000000"}
	settingsB = map[string]string{"retention.ms": "8640000000"}
)

// SetConfig commits a head carrying the topic's settings when the head
// holds others, and nothing when it holds them already; every later commit
// (an upload, retention) carries them too.
func TestSetConfigCommitsOnlyAChange(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	c := newTestCommitter(t, store, 1)
	if err := c.Append(ctx, SegmentRef{Key: "s0", BaseOffset: 0, LastOffset: 9}, settingsA, 2); err != nil {
		t.Fatal(err)
	}
	gen := c.Head().Generation
	if err := c.SetConfig(ctx, settingsA, 2); err != nil || c.Head().Generation != gen {
		t.Fatalf("the same settings again: %v, generation %d, was %d", err, c.Head().Generation, gen)
	}
	if err := c.SetConfig(ctx, settingsB, 2); err != nil {
		t.Fatal(err)
	}
	h, _, err := LoadHead(ctx, store, testRef)
	if err != nil || h.Generation != gen+1 || h.Config["retention.ms"] != "8640000000" || h.Partitions != 2 || h.EndOffset() != 10 {
		t.Fatalf("head after SetConfig: %+v, %v", h, err)
	}
	if err := c.SetConfig(ctx, settingsB, 3); err != nil || c.Head().Partitions != 3 {
		t.Fatalf("a new partition count: %v, head records %d", err, c.Head().Partitions)
	}
	// Retention removes the segment: its commit carries the settings.
	if _, _, err := c.TrimBefore(ctx, 10); err != nil {
		t.Fatal(err)
	}
	h, _, _ = LoadHead(ctx, store, testRef)
	if !h.Empty() || h.Config["retention.ms"] != "8640000000" || h.Partitions != 3 {
		t.Fatalf("head after retention: %+v", h)
	}
}

// A deposed leader's settings commit fails like any other of its commits
// and changes nothing: the successor's settings stand.
func TestASettingsCommitIsFenced(t *testing.T) {
	store := objstore.NewMemory()
	ctx := testContext(t)
	old := newTestCommitter(t, store, 1)
	next := newTestCommitter(t, store, 2)
	if err := next.SetConfig(ctx, settingsB, 1); err != nil {
		t.Fatal(err)
	}
	before, _, _ := LoadHead(ctx, store, testRef)
	if err := old.SetConfig(ctx, settingsA, 1); !errors.Is(err, ErrFenced) {
		t.Fatalf("the deposed leader's settings commit: %v, want ErrFenced", err)
	}
	after, _, _ := LoadHead(ctx, store, testRef)
	if after.Generation != before.Generation || after.Config["retention.ms"] != "8640000000" {
		t.Fatalf("the deposed leader changed the head: %+v", after)
	}
}

// A settings commit whose answer is lost is found landed when the head is
// read back, and is not written twice.
func TestAnUnansweredSettingsCommitIsSettled(t *testing.T) {
	store := &unansweringStore{Bucket: objstore.NewMemory()}
	ctx := testContext(t)
	c := newTestCommitter(t, store, 1)
	gen := c.Head().Generation
	store.lostHeadWrites = 1
	if err := c.SetConfig(ctx, settingsA, 1); err != nil {
		t.Fatalf("a settings commit that landed unanswered: %v", err)
	}
	if c.Head().Generation != gen+1 || c.Head().Config["retention.ms"] != "7776000000" {
		t.Fatalf("committer's head after the lost answer: %+v", c.Head())
	}
	// Lost, and the head unreadable: the outcome is unknown until the next
	// call reads it back.
	store.lostHeadWrites, store.refusedReads = 1, 1
	if err := c.SetConfig(ctx, settingsB, 1); !errors.Is(err, ErrOutcomeUnknown) {
		t.Fatalf("an unanswered settings commit with the head unreadable: %v, want ErrOutcomeUnknown", err)
	}
	store.refusedReads = 0
	if err := c.SetConfig(ctx, settingsB, 1); err != nil {
		t.Fatal(err)
	}
	h, _, _ := LoadHead(ctx, store, testRef)
	if h.Generation != gen+2 || h.Config["retention.ms"] != "8640000000" {
		t.Fatalf("head after the settled commit: generation %d (want %d), settings %v", h.Generation, gen+2, h.Config)
	}
}
