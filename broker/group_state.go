package broker

// Conversions between the group coordinator's persisted state
// (group.State) and its form in the Raft state (cluster.GroupMembership).

import (
	"slices"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/group"
)

// membershipOf is a group's state as the Raft state stores it; nil for
// none.
func membershipOf(s *group.State) *cluster.GroupMembership {
	if s == nil {
		return nil
	}
	m := &cluster.GroupMembership{Assignor: s.Assignor, Epoch: s.Epoch, Counts: s.Counts}
	for _, ms := range s.Members {
		cm := cluster.GroupMember{
			ID: ms.ID, ClientID: ms.ClientID, Host: ms.Host, Topics: ms.Topics,
			SessionTimeoutMs: ms.SessionTimeout.Milliseconds(), RebalanceTimeoutMs: ms.RebalanceTimeout.Milliseconds(),
			Epoch: ms.Epoch, Target: partitionSet(ms.Target), Sent: partitionSet(ms.Sent),
		}
		if c := ms.Classic; c != nil {
			cm.Classic = &cluster.GroupClassicMember{Protocols: slices.Clone(c.Protocols), Protocol: c.Protocol, Version: c.Version}
		}
		if len(ms.Granted) > 0 {
			cm.Granted = map[string][][2]int32{}
			for tp, e := range ms.Granted {
				cm.Granted[tp.Topic] = append(cm.Granted[tp.Topic], [2]int32{tp.Partition, e})
			}
			for _, pairs := range cm.Granted {
				slices.SortFunc(pairs, func(a, b [2]int32) int { return int(a[0]) - int(b[0]) })
			}
		}
		m.Members = append(m.Members, cm)
	}
	return m
}

func partitionSet(tps []group.TopicPartition) cluster.PartitionSet {
	if len(tps) == 0 {
		return nil
	}
	s := cluster.PartitionSet{}
	for _, tp := range tps {
		s[tp.Topic] = append(s[tp.Topic], tp.Partition)
	}
	for _, ps := range s {
		slices.Sort(ps)
	}
	return s
}

func partitionsOf(s cluster.PartitionSet) []group.TopicPartition {
	var out []group.TopicPartition
	for topic, ps := range s {
		for _, p := range ps {
			out = append(out, group.TopicPartition{Topic: topic, Partition: p})
		}
	}
	group.SortPartitions(out)
	return out
}

// groupStates is every group's state to resume from.
func groupStates(ms map[string]*cluster.GroupMembership) map[string]group.State {
	out := make(map[string]group.State, len(ms))
	for name, m := range ms {
		s := group.State{Assignor: m.Assignor, Epoch: m.Epoch, Counts: m.Counts}
		for _, cm := range m.Members {
			ms := group.MemberState{
				ID: cm.ID, ClientID: cm.ClientID, Host: cm.Host, Topics: slices.Clone(cm.Topics),
				SessionTimeout:   time.Duration(cm.SessionTimeoutMs) * time.Millisecond,
				RebalanceTimeout: time.Duration(cm.RebalanceTimeoutMs) * time.Millisecond,
				Epoch:            cm.Epoch, Target: partitionsOf(cm.Target), Sent: partitionsOf(cm.Sent),
				Granted: map[group.TopicPartition]int32{},
			}
			if c := cm.Classic; c != nil {
				ms.Classic = &group.Classic{Protocols: slices.Clone(c.Protocols), Protocol: c.Protocol, Version: c.Version}
			}
			for topic, pairs := range cm.Granted {
				for _, pe := range pairs {
					ms.Granted[group.TopicPartition{Topic: topic, Partition: pe[0]}] = pe[1]
				}
			}
			s.Members = append(s.Members, ms)
		}
		out[name] = s
	}
	return out
}
