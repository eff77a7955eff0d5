package group

import (
	"cmp"
	"slices"

	"github.com/strata-log/strata/cluster"
)

// TopicPartition names one partition of a topic: cluster's, under which
// the coordinator's state is stored.
type TopicPartition = cluster.TopicPartition

// MemberSubscription is what an assignor knows of one member.
type MemberSubscription struct {
	ID      string
	Topics  []string         // topics the member subscribes to (treat as a set; may be unsorted or hold duplicates)
	Current []TopicPartition // the member's target assignment before this rebalance; sticky assignors keep what they can
}

// Assignor computes a group's target assignment.
//
// Every implementation is deterministic: the result depends only on the
// content of its arguments, never on the order of members or on map
// iteration, so that any node computing an assignment for the same group
// state agrees with every other. Each partition of a topic that at least one
// member subscribes to goes to exactly one subscriber, every member ID is a
// key of the result (with an empty, non-nil slice if it gets nothing), and
// each slice is sorted by SortPartitions.
type Assignor interface {
	Name() string
	// Assign returns every member's partitions. partitions gives each topic's partition count (a topic missing or with count <= 0 has none).
	Assign(members []MemberSubscription, partitions map[string]int32) map[string][]TopicPartition
}

// DefaultAssignor is the assignor a group uses when none is requested. The
// sticky assignor is the default because it moves the fewest partitions on a
// rebalance, which keeps cooperative rebalances cheap.
const DefaultAssignor = "sticky"

// AssignorNames lists the assignors by name: "sticky", "range", "roundrobin".
func AssignorNames() []string {
	return []string{"sticky", "range", "roundrobin"}
}

// AssignorByName returns the named assignor.
func AssignorByName(name string) (Assignor, bool) {
	switch name {
	case "sticky":
		return stickyAssignor{}, true
	case "range":
		return rangeAssignor{}, true
	case "roundrobin":
		return roundRobinAssignor{}, true
	}
	return nil, false
}

// SortPartitions sorts by topic, then partition.
func SortPartitions(tps []TopicPartition) {
	slices.SortFunc(tps, compareTopicPartitions)
}

func compareTopicPartitions(a, b TopicPartition) int {
	if c := cmp.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return cmp.Compare(a.Partition, b.Partition)
}

// assignInput is the assignors' normalized view of their arguments. Building
// it once removes everything that could make an assignment depend on input
// order or on invalid data: members are sorted by ID (members sharing an ID
// are merged), subscriptions are reduced to topics that exist, and Current
// keeps only partitions that exist and that the member still subscribes to.
type assignInput struct {
	ids         []string                    // sorted, unique member IDs
	subs        map[string]map[string]bool  // member -> subscribed topics with count > 0
	counts      map[string]int32            // topic -> partition count, only topics with count > 0
	topics      []string                    // sorted topics with count > 0 and at least one subscriber
	subscribers map[string][]string         // topic -> its subscribers, sorted by ID
	current     map[string][]TopicPartition // member -> valid, deduplicated Current, sorted
}

func newAssignInput(members []MemberSubscription, partitions map[string]int32) *assignInput {
	in := &assignInput{
		subs:        make(map[string]map[string]bool),
		counts:      make(map[string]int32),
		subscribers: make(map[string][]string),
		current:     make(map[string][]TopicPartition),
	}
	for t, n := range partitions {
		if n > 0 {
			in.counts[t] = n
		}
	}
	for _, m := range members {
		s, ok := in.subs[m.ID]
		if !ok {
			s = make(map[string]bool)
			in.subs[m.ID] = s
			in.ids = append(in.ids, m.ID)
		}
		for _, t := range m.Topics {
			if in.counts[t] > 0 {
				s[t] = true
			}
		}
	}
	slices.Sort(in.ids)
	for _, id := range in.ids {
		for t := range in.subs[id] {
			in.subscribers[t] = append(in.subscribers[t], id)
		}
	}
	for t, ids := range in.subscribers {
		slices.Sort(ids)
		in.topics = append(in.topics, t)
	}
	slices.Sort(in.topics)

	// Current is validated only after all subscriptions are known, so that a
	// member listed twice keeps partitions of topics named in either entry.
	for _, m := range members {
		s := in.subs[m.ID]
		for _, tp := range m.Current {
			if s[tp.Topic] && tp.Partition >= 0 && tp.Partition < in.counts[tp.Topic] {
				in.current[m.ID] = append(in.current[m.ID], tp)
			}
		}
	}
	for id, tps := range in.current {
		SortPartitions(tps)
		in.current[id] = slices.Compact(tps)
	}
	return in
}

// newResult returns a result holding an empty, non-nil slice for every member.
func (in *assignInput) newResult() map[string][]TopicPartition {
	out := make(map[string][]TopicPartition, len(in.ids))
	for _, id := range in.ids {
		out[id] = []TopicPartition{}
	}
	return out
}

// rangeAssignor is Kafka's RangeAssignor: each topic is split on its own into
// consecutive ranges, one per subscriber in ID order, with the first N%M
// subscribers taking one extra partition. It colocates equal partition
// numbers of co-partitioned topics on one member, at the cost of balance
// across topics (low IDs get the extras of every topic) and of stickiness.
type rangeAssignor struct{}

func (rangeAssignor) Name() string { return "range" }

func (rangeAssignor) Assign(members []MemberSubscription, partitions map[string]int32) map[string][]TopicPartition {
	in := newAssignInput(members, partitions)
	out := in.newResult()
	for _, t := range in.topics {
		subs := in.subscribers[t]
		n, m := int(in.counts[t]), len(subs)
		next := 0
		for i, id := range subs {
			size := n / m
			if i < n%m {
				size++
			}
			for p := next; p < next+size; p++ {
				out[id] = append(out[id], TopicPartition{Topic: t, Partition: int32(p)})
			}
			next += size
		}
	}
	// Topics are visited in order and ranges are ascending, so each slice is
	// already sorted.
	return out
}

// roundRobinAssignor is Kafka's RoundRobinAssignor: all subscribed partitions,
// sorted by topic then partition, are dealt one at a time to members in ID
// order, skipping members that do not subscribe to the partition's topic.
// With identical subscriptions per-member counts differ by at most one; it
// makes no attempt to keep previous owners.
type roundRobinAssignor struct{}

func (roundRobinAssignor) Name() string { return "roundrobin" }

func (roundRobinAssignor) Assign(members []MemberSubscription, partitions map[string]int32) map[string][]TopicPartition {
	in := newAssignInput(members, partitions)
	out := in.newResult()
	next := 0 // index in in.ids of the member to offer the next partition to
	for _, t := range in.topics {
		for p := int32(0); p < in.counts[t]; p++ {
			// The topic has a subscriber, so this finds one within len(ids) steps.
			for !in.subs[in.ids[next]][t] {
				next = (next + 1) % len(in.ids)
			}
			id := in.ids[next]
			out[id] = append(out[id], TopicPartition{Topic: t, Partition: p})
			next = (next + 1) % len(in.ids)
		}
	}
	return out
}

// stickyAssignor is modelled on Kafka's CooperativeStickyAssignor: it
// balances the group while moving as few partitions as possible away from
// their Current owner. Moving few partitions matters for cooperative
// rebalancing, where a member revokes only the partitions it loses and keeps
// consuming the rest throughout.
//
// Balance: with identical subscriptions the per-member counts differ by at
// most one. Otherwise the result is a local optimum: no partition's owner
// holds two or more partitions more than another subscriber of its topic.
//
// The steps are:
//  1. Keep each member's valid Current entries; a partition claimed by
//     several members stays with the lowest ID.
//  2. With identical subscriptions, give each member a quota of total/n,
//     with the total%n members already holding the most allowed one more,
//     and revoke each member's highest partitions above its quota.
//  3. Hand every unowned partition to the eligible member holding the
//     fewest (ties by ID), most constrained topics first.
//  4. While some member holds c partitions and another subscriber of one of
//     its topics holds at most c-2, move one partition between them. This
//     only matters for differing subscriptions; each move lowers the sum of
//     squared counts, so the loop ends.
//
// Only revoked (step 2) and moved (step 4) partitions change owner, and both
// steps do only what balance requires: adding a member to n members that hold
// P partitions moves at most ceil(P/(n+1)) of them, removing a member moves
// only that member's partitions, and reassigning an unchanged group moves
// nothing.
type stickyAssignor struct{}

func (stickyAssignor) Name() string { return "sticky" }

func (stickyAssignor) Assign(members []MemberSubscription, partitions map[string]int32) map[string][]TopicPartition {
	in := newAssignInput(members, partitions)
	s := &stickyState{
		in:    in,
		owner: make(map[TopicPartition]string),
		held:  make(map[string]int),
		byTop: make(map[string]map[string]int),
	}
	for _, id := range in.ids {
		s.byTop[id] = make(map[string]int)
	}

	// Step 1: keep valid Current entries; members are visited in ID order,
	// so a doubly claimed partition stays with the lowest ID.
	for _, id := range in.ids {
		for _, tp := range in.current[id] {
			if _, taken := s.owner[tp]; !taken {
				s.give(tp, id)
			}
		}
	}

	// Step 2: homogeneous quotas.
	if in.identicalSubscriptions() {
		s.revokeAboveQuota()
	}

	// Step 3: hand out unowned partitions. Topics with fewer subscribers go
	// first, while their subscribers still have room, so that partitions
	// with more choice can even out the counts afterwards.
	topics := slices.Clone(in.topics)
	slices.SortStableFunc(topics, func(a, b string) int {
		return cmp.Compare(len(in.subscribers[a]), len(in.subscribers[b]))
	})
	for _, t := range topics {
		for p := int32(0); p < in.counts[t]; p++ {
			tp := TopicPartition{Topic: t, Partition: p}
			if _, taken := s.owner[tp]; !taken {
				s.give(tp, s.fewest(t))
			}
		}
	}

	// Step 4: even out differing subscriptions.
	s.rebalance()

	out := in.newResult()
	for tp, id := range s.owner {
		out[id] = append(out[id], tp)
	}
	for _, tps := range out {
		SortPartitions(tps)
	}
	return out
}

// identicalSubscriptions reports whether every member subscribes to the same
// existing topics, in which case every partition may go to every member and
// exact quotas are achievable.
func (in *assignInput) identicalSubscriptions() bool {
	for _, id := range in.ids {
		if len(in.subs[id]) != len(in.topics) {
			return false
		}
	}
	return true
}

// stickyState is the sticky assignor's assignment in progress.
type stickyState struct {
	in    *assignInput
	owner map[TopicPartition]string
	held  map[string]int            // member -> partitions held
	byTop map[string]map[string]int // member -> topic -> partitions held
}

func (s *stickyState) give(tp TopicPartition, id string) {
	s.owner[tp] = id
	s.held[id]++
	s.byTop[id][tp.Topic]++
}

func (s *stickyState) take(tp TopicPartition) {
	id := s.owner[tp]
	delete(s.owner, tp)
	s.held[id]--
	s.byTop[id][tp.Topic]--
}

// fewest returns the subscriber of topic holding the fewest partitions,
// ties broken by lowest ID. The topic must have a subscriber.
func (s *stickyState) fewest(topic string) string {
	subs := s.in.subscribers[topic]
	best := subs[0]
	for _, id := range subs[1:] {
		if s.held[id] < s.held[best] {
			best = id
		}
	}
	return best
}

// revokeAboveQuota trims members to their homogeneous quota. The total%n
// larger quotas go to the members holding the most (ties by ID), because
// every other choice would revoke more partitions. Each member gives up its
// highest partitions first so that the choice is deterministic.
func (s *stickyState) revokeAboveQuota() {
	n := len(s.in.ids)
	if n == 0 {
		return
	}
	total := 0
	for _, t := range s.in.topics {
		total += int(s.in.counts[t])
	}
	base, extra := total/n, total%n
	ids := slices.Clone(s.in.ids)
	slices.SortStableFunc(ids, func(a, b string) int {
		return cmp.Compare(s.held[b], s.held[a])
	})
	byMember := make(map[string][]TopicPartition, n)
	for tp, id := range s.owner {
		byMember[id] = append(byMember[id], tp)
	}
	for i, id := range ids {
		quota := base
		if i < extra {
			quota++
		}
		if s.held[id] <= quota {
			continue
		}
		tps := byMember[id]
		SortPartitions(tps)
		for _, tp := range tps[quota:] {
			s.take(tp)
		}
	}
}

// rebalance repeatedly moves one partition from the fullest member that can
// give one to the emptiest subscriber of that partition's topic, as long as
// the receiver holds at least two fewer. Every move lowers the sum of squared
// counts by at least two, so the loop ends; the explicit bound is a guard.
func (s *stickyState) rebalance() {
	total := len(s.owner)
	for range total*total/2 + 1 {
		if !s.moveOne() {
			return
		}
	}
}

// moveOne makes one balancing move and reports whether it found one. Donors
// are tried from most to fewest held (ties by ID), their topics in name
// order; the donor gives up its highest partition of the topic.
func (s *stickyState) moveOne() bool {
	donors := slices.Clone(s.in.ids)
	slices.SortStableFunc(donors, func(a, b string) int {
		return cmp.Compare(s.held[b], s.held[a])
	})
	for _, donor := range donors {
		c := s.held[donor]
		if c < 2 {
			return false // later donors hold no more, so none can give
		}
		for _, t := range s.in.topics {
			if s.byTop[donor][t] == 0 {
				continue
			}
			recv := s.fewest(t)
			if s.held[recv] > c-2 {
				continue
			}
			for p := s.in.counts[t] - 1; p >= 0; p-- {
				tp := TopicPartition{Topic: t, Partition: p}
				if s.owner[tp] == donor {
					s.take(tp)
					s.give(tp, recv)
					return true
				}
			}
		}
	}
	return false
}
