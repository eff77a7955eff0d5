package tiering

// Leader-epoch lineage of the cold tier. Each segment in a manifest records
// which leader epochs wrote the offsets it holds (EpochStart entries). A new
// leader compares them with its own log's epoch history before it takes
// over the manifest: where both name the same epoch for every offset, the
// cold tier and the local log hold the same records (a leader writes an
// offset once per epoch, and followers copy it unchanged). Where they
// differ, the two diverged, and only the cold tier holds committed records:
// it takes only offsets below a leader's high watermark.

import (
	"context"

	"github.com/strata-log/strata/hotlog"
)

// EpochStart says that leader epoch Epoch wrote the offsets from Start on,
// up to the next entry's start (or the segment's end).
type EpochStart struct {
	Epoch int32 `json:"e"`
	Start int64 `json:"s"`
}

func fromEntries(entries []hotlog.EpochEntry) []EpochStart {
	out := make([]EpochStart, len(entries))
	for i, e := range entries {
		out[i] = EpochStart{Epoch: e.Epoch, Start: e.StartOffset}
	}
	return out
}

// EpochsIn cuts a log's epoch history down to the offsets first..last: the
// epoch in force at first (starting there), then every epoch that starts
// after it up to last.
func EpochsIn(history []EpochStart, first, last int64) []EpochStart {
	var out []EpochStart
	for i, e := range history {
		end := int64(-1) // where this epoch ends, -1 for the newest
		if i+1 < len(history) {
			end = history[i+1].Start
		}
		if e.Start > last || (end >= 0 && end <= first) {
			continue
		}
		out = append(out, EpochStart{Epoch: e.Epoch, Start: max(e.Start, first)})
	}
	return out
}

// epochAt is the epoch that wrote offset by a history, or -1 when it says
// nothing about it.
func epochAt(history []EpochStart, offset int64) int32 {
	epoch := int32(-1)
	for _, e := range history {
		if e.Start > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}

// FirstDivergence compares the lineage of the cold tier in h with a local
// log's epoch history over the offsets both hold, from localStart up to
// localEnd and the cold tier's end. It returns the first offset where they
// name different epochs, or -1 when they agree. Segments uploaded before
// lineage was recorded carry none and are taken on trust.
func (c *Committer) FirstDivergence(ctx context.Context, local []hotlog.EpochEntry, localStart, localEnd int64) (int64, error) {
	h := c.Head()
	if h.Empty() {
		return -1, nil
	}
	history := fromEntries(local)
	end := min(localEnd, h.EndOffset())
	diverged := int64(-1)
	err := c.segmentsFrom(ctx, localStart, func(s SegmentRef) bool {
		if s.BaseOffset >= end {
			return false
		}
		if len(s.Epochs) == 0 {
			return true
		}
		lo, hi := max(s.BaseOffset, localStart), min(s.LastOffset, end-1)
		// Epochs are steps: two histories agree on lo..hi when they agree at
		// lo and at every step of either inside it.
		points := []int64{lo}
		for _, e := range s.Epochs {
			if e.Start > lo && e.Start <= hi {
				points = append(points, e.Start)
			}
		}
		for _, e := range history {
			if e.Start > lo && e.Start <= hi {
				points = append(points, e.Start)
			}
		}
		for _, off := range points {
			if epochAt(s.Epochs, off) != epochAt(history, off) && (diverged < 0 || off < diverged) {
				diverged = off
			}
		}
		return diverged < 0
	})
	return diverged, err
}

// segmentsFrom calls fn for every live segment that ends at or after from,
// oldest first, until it returns false; closed parts wholly below from are
// not read.
func (c *Committer) segmentsFrom(ctx context.Context, from int64, fn func(SegmentRef) bool) error {
	h := c.Head()
	for _, ref := range h.Parts {
		if ref.LastOffset < from {
			continue
		}
		p, err := c.part(ctx, ref.Key)
		if err != nil {
			return err
		}
		for _, s := range p.Segments[ref.Skip:] {
			if s.LastOffset >= from && !fn(s) {
				return nil
			}
		}
	}
	for _, s := range h.Tail {
		if s.LastOffset >= from && !fn(s) {
			return nil
		}
	}
	return nil
}
