package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Membership of the Raft group. Gossip decides when to call these (add a
// broker that appeared, remove one gone for long enough); Raft makes each
// change safely, one at a time. All of them run on the controller only.

// AddVoter adds a broker as a voting member, promotes a non-voter, or
// updates a voter's address. hashicorp/raft gives the vote at once (its
// "staging" step is not implemented), so a caller that cares about quorum
// while a new broker catches up adds it with AddNonvoter first and promotes
// it later.
func (n *Node) AddVoter(ctx context.Context, id int32, raftAddr string) error {
	return n.changeMembership(ctx, id, raftAddr, false, func(timeout time.Duration) raft.IndexFuture {
		return n.raft.AddVoter(serverID(id), raft.ServerAddress(raftAddr), 0, timeout)
	})
}

// AddNonvoter adds a broker that replicates the metadata without voting: the
// brokers beyond the 3 or 5 voters.
func (n *Node) AddNonvoter(ctx context.Context, id int32, raftAddr string) error {
	return n.changeMembership(ctx, id, raftAddr, false, func(timeout time.Duration) raft.IndexFuture {
		return n.raft.AddNonvoter(serverID(id), raft.ServerAddress(raftAddr), 0, timeout)
	})
}

// RemoveServer removes a broker from the group. Removing the controller
// itself is allowed: it steps down once the change commits.
func (n *Node) RemoveServer(ctx context.Context, id int32) error {
	return n.changeMembership(ctx, id, "", true, func(timeout time.Duration) raft.IndexFuture {
		return n.raft.RemoveServer(serverID(id), 0, timeout)
	})
}

// Servers returns the current members of the group as this node knows them
// (the latest configuration in its log, committed or not).
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, n.raftError(err)
	}
	conf := f.Configuration()
	out := make([]Server, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		id, ok := parseServerID(s.ID)
		if !ok {
			return nil, fmt.Errorf("cluster: raft server id %q is not a broker id", s.ID)
		}
		out = append(out, Server{ID: id, RaftAddr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	return out, nil
}

// changeMembership checks the arguments and leadership, then runs one Raft
// configuration change bounded by ctx. removal is true when no address is
// needed.
func (n *Node) changeMembership(ctx context.Context, id int32, raftAddr string, removal bool, call func(time.Duration) raft.IndexFuture) error {
	if id < 0 {
		return fmt.Errorf("cluster: membership: id %d must be >= 0", id)
	}
	if raftAddr != "" || !removal {
		if err := validateHostPort(raftAddr); err != nil {
			return fmt.Errorf("cluster: membership: server %d: raft addr %q: %v", id, raftAddr, err)
		}
	}
	if n.raft.State() != raft.Leader {
		return n.notController()
	}
	timeout, err := applyTimeout(ctx)
	if err != nil {
		return err
	}
	return n.await(ctx, call(timeout))
}
