package broker

import (
	"testing"

	"github.com/strata-log/strata/cluster"
)

// Every path that answers NOT_LEADER names the leader a client should go
// to, by id and address: a request at a broker the metadata says does not
// lead (produce, fetch and the rest through leaderPartition, a follower's
// epoch query and positions through ledForReplication), a produce that
// finds the replica no longer leading when it appends, and an acks=all
// produce whose wait ends because leadership moved. While no broker
// leads, a request is LEADER_NOT_AVAILABLE and a wait's NOT_LEADER names
// nobody.
func TestNotLeaderNamesTheLeaderOnEveryPath(t *testing.T) {
	wantLeader := func(t *testing.T, err error, id, addr string) {
		t.Helper()
		e, ok := err.(*Error)
		if !ok || e.Reason != ReasonNotLeader {
			t.Fatalf("got %v, want NOT_LEADER", err)
		}
		if e.Meta["leader_id"] != id || e.Meta["leader_address"] != addr {
			t.Fatalf("NOT_LEADER names leader %q at %q, want %q at %q (%v)", e.Meta["leader_id"], e.Meta["leader_address"], id, addr, err)
		}
	}

	t.Run("a request at another broker", func(t *testing.T) {
		b := &Broker{id: 1}
		m := &cluster.Metadata{Brokers: map[int32]cluster.BrokerInfo{2: {ID: 2, Addr: "127.0.0.1:7402"}}}
		wantLeader(t, b.notLeading(m, "t", 0, 2), "2", "127.0.0.1:7402")
		if err := b.notLeading(m, "t", 0, cluster.NoLeader); ReasonOf(err) != ReasonLeaderNotAvailable {
			t.Fatalf("no leader: %v, want LEADER_NOT_AVAILABLE", err)
		}
	})

	deposed := cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2, LeaderEpoch: 1}
	t.Run("an append after the lead moved", func(t *testing.T) {
		r := newTestReplica(t, 1, cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}, 1)
		r.apply(deposed)
		_, _, err := r.p.appendAsLeader(testBatch(t, 1, 1), AcksAll)
		wantLeader(t, err, "2", testBrokerAddr(2))
	})

	t.Run("a commit wait ended by a new leader", func(t *testing.T) {
		r := newTestReplica(t, 1, cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}, 1)
		res, w := r.produce(1, 1)
		r.apply(deposed)
		err, done := ended(w)
		if !done {
			t.Fatal("the wait did not end when the lead moved")
		}
		wantLeader(t, r.p.commitOutcome(res, err), "2", testBrokerAddr(2))
	})

	t.Run("a commit wait ended by an election", func(t *testing.T) {
		r := newTestReplica(t, 1, cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1}, 1)
		res, w := r.produce(1, 1)
		r.apply(cluster.PartitionInfo{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: cluster.NoLeader, LeaderEpoch: 1})
		err, done := ended(w)
		if !done {
			t.Fatal("the wait did not end when the lead moved")
		}
		wantLeader(t, r.p.commitOutcome(res, err), "", "")
	})
}
