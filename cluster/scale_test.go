package cluster

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"
)

// The controller's metadata at the size of a large cluster: 100,000
// partitions (RF 3 over 3 brokers: 300,000 replicas) in topics of 1,000.
const (
	scaleTopics             = 100
	scalePartitionsPerTopic = 1000
)

// scaleFSM applies the creates of scaleTopics topics of scalePartitions
// partitions each to a fresh state machine of three brokers.
func scaleFSM(t testing.TB) *fsmHarness {
	t.Helper()
	h := &fsmHarness{t: t, f: newFSM(testLogger())}
	for id := int32(1); id <= 3; id++ {
		h.ok(&registerBrokerCmd{Broker: broker(id)})
	}
	for i := range scaleTopics {
		h.ok(createCmd(h.f.meta.Load(), fmt.Sprintf("t%03d", i), scalePartitionsPerTopic, 3, nil))
	}
	return h
}

// TestFSMAtScale: at 100,000 partitions the state machine takes topic
// creates, leader and ISR changes, round-trips through a snapshot, and
// every lookup finds what was applied; how long each step took is logged
// (BenchmarkFSMAtScale measures it).
func TestFSMAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 partitions")
	}
	start := time.Now()
	h := scaleFSM(t)
	m := h.f.meta.Load()
	t.Logf("%d topic creates to %d partitions in %v", scaleTopics, scaleTopics*scalePartitionsPerTopic, time.Since(start))

	now, _ := ReplicaCounts(m, 1, 1)
	for id := int32(1); id <= 3; id++ {
		if now[id] != scaleTopics*scalePartitionsPerTopic {
			t.Fatalf("broker %d holds %d replicas, want %d", id, now[id], scaleTopics*scalePartitionsPerTopic)
		}
	}

	// Every 10th partition of every topic gets a new leader (the second
	// ISR member), every 10th from the 5th a smaller ISR: 20,000 changes.
	start = time.Now()
	for ti := range scaleTopics {
		name := fmt.Sprintf("t%03d", ti)
		for p := int32(0); p < scalePartitionsPerTopic; p += 10 {
			cur, _ := h.f.meta.Load().Partition(name, p)
			h.ok(&changeLeaderCmd{Topic: name, Partition: p, NewLeader: cur.ISR[1], ExpectedEpoch: cur.LeaderEpoch})
			cur, _ = h.f.meta.Load().Partition(name, p+5)
			h.ok(&changeISRCmd{Topic: name, Partition: p + 5, ISR: []int32{cur.Leader}, LeaderEpoch: cur.LeaderEpoch, PartitionEpoch: cur.PartitionEpoch})
		}
	}
	t.Logf("%d leader and ISR changes in %v", 2*scaleTopics*scalePartitionsPerTopic/10, time.Since(start))

	check := func(what string, m *Metadata) {
		t.Helper()
		if len(m.Topics) != scaleTopics {
			t.Fatalf("%s: %d topics, want %d", what, len(m.Topics), scaleTopics)
		}
		for ti := range scaleTopics {
			name := fmt.Sprintf("t%03d", ti)
			for p := range int32(scalePartitionsPerTopic) {
				got, ok := m.Partition(name, p)
				if !ok || got.Partition != p || len(got.Replicas) != 3 {
					t.Fatalf("%s: %s/%d = %+v, %v", what, name, p, got, ok)
				}
				wantLeader, wantEpoch, wantISR := got.Replicas[0], int32(0), got.Replicas
				switch p % 10 {
				case 0:
					wantLeader, wantEpoch, wantISR = got.Replicas[1], 1, got.Replicas
				case 5:
					wantISR = got.Replicas[:1]
				}
				wantPartitionEpoch := int32(0)
				if p%5 == 0 {
					wantPartitionEpoch = 1 // one leader or ISR change
				}
				if got.Leader != wantLeader || got.LeaderEpoch != wantEpoch || !slices.Equal(got.ISR, wantISR) || got.PartitionEpoch != wantPartitionEpoch {
					t.Fatalf("%s: %s/%d = %+v; want leader %d in epoch %d, ISR %v", what, name, p, got, wantLeader, wantEpoch, wantISR)
				}
			}
		}
	}
	check("applied", h.f.meta.Load())

	start = time.Now()
	snap := snapshotBytes(t, h.f)
	took := time.Since(start)
	restored := newFSM(testLogger())
	start = time.Now()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	t.Logf("snapshot of %d partitions: %d bytes (%.0f per partition), written in %v, restored in %v",
		scaleTopics*scalePartitionsPerTopic, len(snap), float64(len(snap))/(scaleTopics*scalePartitionsPerTopic), took, time.Since(start))
	check("restored", restored.meta.Load())
	if got := (&fsmHarness{t: t, f: restored}).stateJSON(); !bytes.Equal(got, h.stateJSON()) {
		t.Fatal("the restored state differs from the snapshotted one")
	}
	if restored.meta.Load().Version != h.f.meta.Load().Version {
		t.Fatalf("restored version %d, want %d", restored.meta.Load().Version, h.f.meta.Load().Version)
	}
}

// BenchmarkFSMAtScale: the cost of each metadata operation on a state of
// 100,000 partitions.
func BenchmarkFSMAtScale(b *testing.B) {
	h := scaleFSM(b)
	b.Run("create-topic-1000", func(b *testing.B) {
		for i := range b.N {
			h.ok(createCmd(h.f.meta.Load(), fmt.Sprintf("extra%d", i), scalePartitionsPerTopic, 3, nil))
			b.StopTimer()
			h.ok(&deleteTopicCmd{Name: fmt.Sprintf("extra%d", i)})
			b.StartTimer()
		}
	})
	b.Run("change-leader", func(b *testing.B) {
		for i := range b.N {
			name, p := fmt.Sprintf("t%03d", i%scaleTopics), int32(i/scaleTopics)%scalePartitionsPerTopic
			cur, _ := h.f.meta.Load().Partition(name, p)
			h.ok(&changeLeaderCmd{Topic: name, Partition: p, NewLeader: cur.ISR[(slices.Index(cur.ISR, cur.Leader)+1)%len(cur.ISR)], ExpectedEpoch: cur.LeaderEpoch})
		}
	})
	b.Run("change-isr", func(b *testing.B) {
		for i := range b.N {
			name, p := fmt.Sprintf("t%03d", i%scaleTopics), int32(i/scaleTopics)%scalePartitionsPerTopic
			cur, _ := h.f.meta.Load().Partition(name, p)
			isr := cur.Replicas
			if len(cur.ISR) == len(cur.Replicas) {
				isr = []int32{cur.Leader}
			}
			h.ok(&changeISRCmd{Topic: name, Partition: p, ISR: isr, LeaderEpoch: cur.LeaderEpoch, PartitionEpoch: cur.PartitionEpoch})
		}
	})
	b.Run("lookup", func(b *testing.B) {
		m := h.f.meta.Load()
		for i := range b.N {
			if _, ok := m.Partition(fmt.Sprintf("t%03d", i%scaleTopics), int32(i)%scalePartitionsPerTopic); !ok {
				b.Fatal("not found")
			}
		}
	})
	var snap []byte
	b.Run("snapshot", func(b *testing.B) {
		for range b.N {
			snap = snapshotBytes(b, h.f)
		}
		b.ReportMetric(float64(len(snap)), "bytes")
	})
	b.Run("restore", func(b *testing.B) {
		for range b.N {
			if err := newFSM(testLogger()).Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
				b.Fatal(err)
			}
		}
	})
}
