package broker

import (
	"fmt"
	"strconv"
	"strings"
)

// cleanerState is what a log's cleaner side file (cleanerOffsetFile)
// remembers: the offset the log is cleaned to, and when each recent pass
// ended where, from which the tombstone horizon follows. Kafka keeps a
// tombstone readable for delete.retention.ms after the cleaner first
// passed it; a pass that ended at offset e at time t first passed every
// offset below e no later than t, so once t is delete.retention.ms old
// every tombstone below e may go.
//
// Text, one entry a line: "v1 <cleanedTo>", then "<end> <unix ms>" per
// pass, oldest first. A file that does not parse counts as none: the log
// is cleaned again and its tombstones stay longer, never shorter.
type cleanerState struct {
	cleanedTo int64
	passes    []cleanerPass
}

type cleanerPass struct{ end, atMs int64 }

// maxCleanerPasses bounds the history. Forgetting a pass attributes its
// offsets to the next one, which is later: tombstones stay longer.
const maxCleanerPasses = 256

func parseCleanerState(data []byte) (cleanerState, error) {
	var s cleanerState
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	head, ok := strings.CutPrefix(lines[0], "v1 ")
	if !ok {
		return cleanerState{}, fmt.Errorf("cleaner state: unknown header %q", lines[0])
	}
	var err error
	if s.cleanedTo, err = strconv.ParseInt(head, 10, 64); err != nil || s.cleanedTo < 0 {
		return cleanerState{}, fmt.Errorf("cleaner state: bad offset %q", head)
	}
	for _, line := range lines[1:] {
		end, at, ok := strings.Cut(line, " ")
		p := cleanerPass{}
		var e1, e2 error
		p.end, e1 = strconv.ParseInt(end, 10, 64)
		p.atMs, e2 = strconv.ParseInt(at, 10, 64)
		if !ok || e1 != nil || e2 != nil || p.end < 0 {
			return cleanerState{}, fmt.Errorf("cleaner state: bad pass %q", line)
		}
		s.passes = append(s.passes, p)
	}
	return s, nil
}

func (s cleanerState) encode() []byte {
	var sb strings.Builder
	fmt.Fprintf(&sb, "v1 %d\n", s.cleanedTo)
	for _, p := range s.passes {
		fmt.Fprintf(&sb, "%d %d\n", p.end, p.atMs)
	}
	return []byte(sb.String())
}

// horizon is the offset below which tombstones may be removed now:
// the furthest end of a pass at least retentionMs old. A negative
// retention (unbounded) keeps every tombstone.
func (s cleanerState) horizon(nowMs, retentionMs int64) int64 {
	var h int64
	if retentionMs < 0 {
		return 0
	}
	for _, p := range s.passes {
		if p.atMs <= nowMs-retentionMs {
			h = max(h, p.end)
		}
	}
	return h
}

// record notes a pass that cleaned to end at nowMs, and forgets the
// passes no horizon needs: those older than the newest expired one.
func (s *cleanerState) record(end, nowMs, retentionMs int64) {
	s.cleanedTo = end
	s.passes = append(s.passes, cleanerPass{end: end, atMs: nowMs})
	if retentionMs >= 0 {
		newestExpired := -1
		for i, p := range s.passes {
			if p.atMs <= nowMs-retentionMs {
				newestExpired = i
			}
		}
		if newestExpired > 0 {
			s.passes = s.passes[newestExpired:]
		}
	}
	if n := len(s.passes); n > maxCleanerPasses {
		// Keep the first (it may hold the horizon) and the newest.
		s.passes = append(s.passes[:1], s.passes[n-maxCleanerPasses+1:]...)
	}
}
