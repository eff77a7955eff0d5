package broker

import (
	"io"
	"log/slog"
	"testing"

	"github.com/strata-log/strata/cluster"
)

// TestIdleReplicaCostsNoAllocationPerTick: the tiering loop (four times a
// second) visits every replica a broker holds, thousands of them mostly
// idle, and the housekeeping loop visits those with work. A visit of an
// idle replica (a lone leader, a follower, each with one active segment)
// copies nothing and builds no log view: at 10,000 replicas those copies
// were most of the CPU an idle broker used.
func TestIdleReplicaCostsNoAllocationPerTick(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, info := range map[string]cluster.PartitionInfo{
		"lone leader": {Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0},
		"follower":    {Replicas: []int32{2, 1}, ISR: []int32{2, 1}, Leader: 2, LeaderEpoch: 0},
	} {
		r := newTestReplica(t, 1, info, 1)
		if _, err := r.p.log.Append(testBatch(t, 0, 3), 0); err != nil {
			t.Fatal(err)
		}
		r.p.writeProducerSnapshots(true, logger) // the first visit may record what it saw
		allocs := testing.AllocsPerRun(100, func() {
			if c, _ := r.p.tick(); c != nil {
				t.Fatalf("%s: an idle replica proposed an ISR change %v", name, c.isr)
			}
			r.p.localRetention(logger)
			r.p.writeProducerSnapshots(true, logger)
		})
		if allocs != 0 {
			t.Errorf("%s: a housekeeping and tiering visit of an idle replica allocated %.0f times; want 0", name, allocs)
		}
	}
}
