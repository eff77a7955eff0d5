package group

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
)

// topicParts lists the given partitions of topic.
func topicParts(topic string, parts ...int32) []TopicPartition {
	out := []TopicPartition{}
	for _, p := range parts {
		out = append(out, TopicPartition{Topic: topic, Partition: p})
	}
	return out
}

func concatParts(lists ...[]TopicPartition) []TopicPartition {
	out := []TopicPartition{}
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

type assignCase struct {
	name       string
	members    []MemberSubscription
	partitions map[string]int32
	want       map[string][]TopicPartition
}

func runAssignCases(t *testing.T, assignor string, cases []assignCase) {
	t.Helper()
	a, ok := AssignorByName(assignor)
	if !ok {
		t.Fatalf("AssignorByName(%q) not found", assignor)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := a.Assign(tc.members, tc.partitions)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Assign:\n got  %v\n want %v", got, tc.want)
			}
			checkAssignment(t, a, tc.members, tc.partitions, got)
		})
	}
}

func TestAssignorRegistry(t *testing.T) {
	names := AssignorNames()
	if want := []string{"sticky", "range", "roundrobin"}; !slices.Equal(names, want) {
		t.Fatalf("AssignorNames() = %v, want %v", names, want)
	}
	for _, name := range names {
		a, ok := AssignorByName(name)
		if !ok || a.Name() != name {
			t.Errorf("AssignorByName(%q) = %v, %v; want assignor named %q", name, a, ok, name)
		}
	}
	if _, ok := AssignorByName(DefaultAssignor); !ok {
		t.Errorf("DefaultAssignor %q is not registered", DefaultAssignor)
	}
	if a, ok := AssignorByName("nope"); ok || a != nil {
		t.Errorf("AssignorByName(unknown) = %v, %v; want nil, false", a, ok)
	}
}

func TestSortPartitions(t *testing.T) {
	got := []TopicPartition{{Topic: "b", Partition: 0}, {Topic: "a", Partition: 10}, {Topic: "a", Partition: 2}, {Topic: "b", Partition: -1}}
	SortPartitions(got)
	want := []TopicPartition{{Topic: "a", Partition: 2}, {Topic: "a", Partition: 10}, {Topic: "b", Partition: -1}, {Topic: "b", Partition: 0}}
	if !slices.Equal(got, want) {
		t.Errorf("SortPartitions = %v, want %v", got, want)
	}
}

func TestRangeAssignor(t *testing.T) {
	runAssignCases(t, "range", []assignCase{
		{
			name: "kafka doc example",
			members: []MemberSubscription{
				{ID: "c1", Topics: []string{"t1", "t0"}},
				{ID: "c0", Topics: []string{"t0", "t1"}},
			},
			partitions: map[string]int32{"t0": 3, "t1": 3},
			want: map[string][]TopicPartition{
				"c0": concatParts(topicParts("t0", 0, 1), topicParts("t1", 0, 1)),
				"c1": concatParts(topicParts("t0", 2), topicParts("t1", 2)),
			},
		},
		{
			name: "uneven split and differing subscriptions",
			members: []MemberSubscription{
				{ID: "c", Topics: []string{"t0", "t1"}},
				{ID: "a", Topics: []string{"t0", "t0"}},
				{ID: "b", Topics: []string{"t0", "t1"}},
			},
			partitions: map[string]int32{"t0": 7, "t1": 3},
			want: map[string][]TopicPartition{
				"a": topicParts("t0", 0, 1, 2),
				"b": concatParts(topicParts("t0", 3, 4), topicParts("t1", 0, 1)),
				"c": concatParts(topicParts("t0", 5, 6), topicParts("t1", 2)),
			},
		},
		{
			name: "more members than partitions, missing topics, Current ignored",
			members: []MemberSubscription{
				{ID: "a", Topics: []string{"t0"}, Current: topicParts("t0", 1)},
				{ID: "b", Topics: []string{"t0", "gone", "empty"}},
				{ID: "c", Topics: []string{"t0"}},
				{ID: "d", Topics: []string{"gone"}},
			},
			partitions: map[string]int32{"t0": 2, "empty": 0, "unused": 4},
			want: map[string][]TopicPartition{
				"a": topicParts("t0", 0),
				"b": topicParts("t0", 1),
				"c": {},
				"d": {},
			},
		},
		{
			name:       "no members",
			partitions: map[string]int32{"t0": 2},
			want:       map[string][]TopicPartition{},
		},
	})
}

func TestRoundRobinAssignor(t *testing.T) {
	runAssignCases(t, "roundrobin", []assignCase{
		{
			name: "kafka doc example",
			members: []MemberSubscription{
				{ID: "c1", Topics: []string{"t0", "t1"}},
				{ID: "c0", Topics: []string{"t1", "t0"}},
			},
			partitions: map[string]int32{"t0": 3, "t1": 3},
			want: map[string][]TopicPartition{
				"c0": concatParts(topicParts("t0", 0, 2), topicParts("t1", 1)),
				"c1": concatParts(topicParts("t0", 1), topicParts("t1", 0, 2)),
			},
		},
		{
			name: "kafka doc example with differing subscriptions",
			members: []MemberSubscription{
				{ID: "c2", Topics: []string{"t0", "t1", "t2"}},
				{ID: "c0", Topics: []string{"t0"}},
				{ID: "c1", Topics: []string{"t0", "t1"}},
			},
			partitions: map[string]int32{"t0": 1, "t1": 2, "t2": 3},
			want: map[string][]TopicPartition{
				"c0": topicParts("t0", 0),
				"c1": topicParts("t1", 0),
				"c2": concatParts(topicParts("t1", 1), topicParts("t2", 0, 1, 2)),
			},
		},
		{
			name: "member without existing topics, Current ignored",
			members: []MemberSubscription{
				{ID: "a", Topics: []string{"t0"}, Current: topicParts("t0", 2)},
				{ID: "b", Topics: []string{"nope"}, Current: topicParts("t0", 0)},
				{ID: "c", Topics: []string{"t0", "t0"}},
			},
			partitions: map[string]int32{"t0": 3},
			want: map[string][]TopicPartition{
				"a": topicParts("t0", 0, 2),
				"b": {},
				"c": topicParts("t0", 1),
			},
		},
	})
}

func TestStickyAssignor(t *testing.T) {
	runAssignCases(t, "sticky", []assignCase{
		{
			// Nothing is owned yet: each partition goes to the member
			// holding the fewest, ties by ID.
			name: "fresh",
			members: []MemberSubscription{
				{ID: "c", Topics: []string{"t0", "t1"}},
				{ID: "b", Topics: []string{"t1", "t0"}},
				{ID: "a", Topics: []string{"t0", "t1"}},
			},
			partitions: map[string]int32{"t0": 4, "t1": 2},
			want: map[string][]TopicPartition{
				"a": topicParts("t0", 0, 3),
				"b": concatParts(topicParts("t0", 1), topicParts("t1", 0)),
				"c": concatParts(topicParts("t0", 2), topicParts("t1", 1)),
			},
		},
		{
			// a is above its quota of 3 and gives up its highest partitions.
			name: "new member takes the overflow",
			members: []MemberSubscription{
				{ID: "a", Topics: []string{"t0", "t1"}, Current: concatParts(topicParts("t0", 0, 1, 2, 3), topicParts("t1", 0, 1))},
				{ID: "b", Topics: []string{"t0", "t1"}},
			},
			partitions: map[string]int32{"t0": 4, "t1": 2},
			want: map[string][]TopicPartition{
				"a": topicParts("t0", 0, 1, 2),
				"b": concatParts(topicParts("t0", 3), topicParts("t1", 0, 1)),
			},
		},
		{
			// t0/0 is claimed twice and stays with the lower ID; entries for
			// a missing topic, an out-of-range partition and an unsubscribed
			// topic are ignored.
			name: "invalid Current entries",
			members: []MemberSubscription{
				{ID: "b", Topics: []string{"t0"}, Current: concatParts(topicParts("t0", 0, 2), topicParts("t1", 0))},
				{ID: "a", Topics: []string{"t0", "t1"}, Current: concatParts(topicParts("t0", 0, 7, -1), topicParts("gone", 0), topicParts("t0", 0))},
			},
			partitions: map[string]int32{"t0": 3, "t1": 1},
			want: map[string][]TopicPartition{
				"a": concatParts(topicParts("t0", 0), topicParts("t1", 0)),
				"b": topicParts("t0", 1, 2),
			},
		},
		{
			// Only b subscribes to t1, so balance means moving t1 to b,
			// highest partition first.
			name: "differing subscriptions rebalance",
			members: []MemberSubscription{
				{ID: "a", Topics: []string{"t0", "t1"}, Current: concatParts(topicParts("t0", 0, 1), topicParts("t1", 0, 1))},
				{ID: "b", Topics: []string{"t1"}},
			},
			partitions: map[string]int32{"t0": 2, "t1": 2},
			want: map[string][]TopicPartition{
				"a": topicParts("t0", 0, 1),
				"b": topicParts("t1", 0, 1),
			},
		},
		{
			// A single-topic member cannot take t1, so the counts stay
			// uneven but no move can improve them.
			name: "unavoidable imbalance",
			members: []MemberSubscription{
				{ID: "a", Topics: []string{"t0"}},
				{ID: "b", Topics: []string{"t0", "t1"}},
			},
			partitions: map[string]int32{"t0": 1, "t1": 4},
			want: map[string][]TopicPartition{
				"a": topicParts("t0", 0),
				"b": topicParts("t1", 0, 1, 2, 3),
			},
		},
		{
			name: "member without existing topics",
			members: []MemberSubscription{
				{ID: "a", Topics: []string{"gone"}, Current: topicParts("gone", 0)},
				{ID: "b", Topics: []string{"t0"}, Current: topicParts("t0", 1)},
			},
			partitions: map[string]int32{"t0": 2, "gone": 0},
			want: map[string][]TopicPartition{
				"a": {},
				"b": topicParts("t0", 0, 1),
			},
		},
	})
}

// checkAssignment verifies the guarantees every assignor makes.
func checkAssignment(t *testing.T, a Assignor, members []MemberSubscription, partitions map[string]int32, got map[string][]TopicPartition) {
	t.Helper()
	subs := map[string]map[string]bool{}
	for _, m := range members {
		if subs[m.ID] == nil {
			subs[m.ID] = map[string]bool{}
		}
		for _, topic := range m.Topics {
			subs[m.ID][topic] = true
		}
	}
	if len(got) != len(subs) {
		t.Errorf("%s: result has %d members, want %d", a.Name(), len(got), len(subs))
	}
	owner := map[TopicPartition]string{}
	for id, list := range got {
		if subs[id] == nil {
			t.Errorf("%s: result names unknown member %q", a.Name(), id)
		}
		if list == nil {
			t.Errorf("%s: member %q has a nil slice", a.Name(), id)
		}
		if !slices.IsSortedFunc(list, compareTopicPartitions) {
			t.Errorf("%s: member %q partitions not sorted: %v", a.Name(), id, list)
		}
		for _, tp := range list {
			if tp.Partition < 0 || tp.Partition >= partitions[tp.Topic] {
				t.Errorf("%s: member %q got nonexistent partition %v", a.Name(), id, tp)
			}
			if !subs[id][tp.Topic] {
				t.Errorf("%s: member %q got %v without subscribing to it", a.Name(), id, tp)
			}
			if prev, dup := owner[tp]; dup {
				t.Errorf("%s: %v assigned to both %q and %q", a.Name(), tp, prev, id)
			}
			owner[tp] = id
		}
	}
	for topic, n := range partitions {
		subscribed := false
		for _, s := range subs {
			subscribed = subscribed || s[topic]
		}
		if !subscribed {
			continue
		}
		for p := int32(0); p < n; p++ {
			if _, ok := owner[TopicPartition{Topic: topic, Partition: p}]; !ok {
				t.Errorf("%s: subscribed partition %s/%d unassigned", a.Name(), topic, p)
			}
		}
	}
}

// checkStickyBalance verifies the sticky assignor's balance: no member holds
// two or more partitions more than another subscriber of one of its topics.
// With identical subscriptions that means max-min <= 1.
func checkStickyBalance(t *testing.T, members []MemberSubscription, got map[string][]TopicPartition) {
	t.Helper()
	subs := map[string]map[string]bool{}
	for _, m := range members {
		if subs[m.ID] == nil {
			subs[m.ID] = map[string]bool{}
		}
		for _, topic := range m.Topics {
			subs[m.ID][topic] = true
		}
	}
	for donor, list := range got {
		for _, tp := range list {
			for other := range got {
				if subs[other][tp.Topic] && len(got[other]) <= len(list)-2 {
					t.Errorf("sticky: %q holds %d incl. %v, but subscriber %q holds %d", donor, len(list), tp, other, len(got[other]))
				}
			}
		}
	}
}

// movedCount counts partitions in before that have a different owner in after.
func movedCount(before, after map[string][]TopicPartition) int {
	owner := map[TopicPartition]string{}
	for id, list := range after {
		for _, tp := range list {
			owner[tp] = id
		}
	}
	n := 0
	for id, list := range before {
		for _, tp := range list {
			if owner[tp] != id {
				n++
			}
		}
	}
	return n
}

// withCurrentAssignment returns members whose Current is their partitions in prev.
func withCurrentAssignment(members []MemberSubscription, prev map[string][]TopicPartition) []MemberSubscription {
	out := make([]MemberSubscription, len(members))
	for i, m := range members {
		m.Current = slices.Clone(prev[m.ID])
		out[i] = m
	}
	return out
}

var assignTestTopics = []string{"t0", "t1", "t2", "t3", "t4"}

// randomAssignGroup builds a group of 1-8 members with random subscriptions to
// topics of 0-12 partitions (some missing from the map) and random Current
// entries, including invalid and doubly claimed ones.
func randomAssignGroup(r *rand.Rand) ([]MemberSubscription, map[string]int32) {
	partitions := map[string]int32{}
	for _, topic := range assignTestTopics {
		if r.Intn(6) > 0 {
			partitions[topic] = int32(r.Intn(13))
		}
	}
	ids := r.Perm(12)[:1+r.Intn(8)]
	members := make([]MemberSubscription, len(ids))
	for i, id := range ids {
		m := MemberSubscription{ID: fmt.Sprintf("m%02d", id)}
		for range 1 + r.Intn(4) {
			m.Topics = append(m.Topics, assignTestTopics[r.Intn(len(assignTestTopics))])
		}
		if r.Intn(4) == 0 {
			m.Topics = append(m.Topics, "missing")
		}
		for range r.Intn(10) {
			topic := assignTestTopics[r.Intn(len(assignTestTopics))]
			if r.Intn(5) == 0 {
				topic = "missing"
			}
			m.Current = append(m.Current, TopicPartition{Topic: topic, Partition: int32(r.Intn(15) - 1)})
		}
		members[i] = m
	}
	return members, partitions
}

// shuffledMembers returns a copy of members in random order, with each member's
// Topics and Current shuffled too.
func shuffledMembers(r *rand.Rand, members []MemberSubscription) []MemberSubscription {
	out := make([]MemberSubscription, len(members))
	for i, j := range r.Perm(len(members)) {
		m := members[j]
		m.Topics = slices.Clone(m.Topics)
		m.Current = slices.Clone(m.Current)
		r.Shuffle(len(m.Topics), func(a, b int) { m.Topics[a], m.Topics[b] = m.Topics[b], m.Topics[a] })
		r.Shuffle(len(m.Current), func(a, b int) { m.Current[a], m.Current[b] = m.Current[b], m.Current[a] })
		out[i] = m
	}
	return out
}

func TestAssignorsRandomProperties(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := range 500 {
		members, partitions := randomAssignGroup(r)
		for _, name := range AssignorNames() {
			a, _ := AssignorByName(name)
			got := a.Assign(members, partitions)
			checkAssignment(t, a, members, partitions, got)
			if again := a.Assign(shuffledMembers(r, members), partitions); !reflect.DeepEqual(got, again) {
				t.Errorf("case %d %s: not deterministic under reordering:\n %v\n %v", i, name, got, again)
			}
			if name != "sticky" {
				continue
			}
			checkStickyBalance(t, members, got)
			// Reassigning the result to the same group must move nothing.
			if next := a.Assign(withCurrentAssignment(members, got), partitions); !reflect.DeepEqual(got, next) {
				t.Errorf("case %d sticky: no-op rebalance moved partitions:\n %v\n %v", i, got, next)
			}
		}
		if t.Failed() {
			t.Fatalf("case %d failed: members=%+v partitions=%v", i, members, partitions)
		}
	}
}

// randomIdenticalAssignGroup builds n members that all subscribe to the same
// topics, holding a sticky assignment, plus the partition counts.
func randomIdenticalAssignGroup(r *rand.Rand, n int) ([]MemberSubscription, map[string]int32) {
	partitions := map[string]int32{}
	var topics []string
	for _, topic := range assignTestTopics[:1+r.Intn(len(assignTestTopics))] {
		partitions[topic] = int32(r.Intn(25))
		topics = append(topics, topic)
	}
	members := make([]MemberSubscription, n)
	for i, id := range r.Perm(20)[:n] {
		members[i] = MemberSubscription{ID: fmt.Sprintf("m%02d", id), Topics: topics}
	}
	return members, partitions
}

func countAssigned(a map[string][]TopicPartition) int {
	n := 0
	for _, l := range a {
		n += len(l)
	}
	return n
}

func TestStickyIdenticalBalanceAndMovement(t *testing.T) {
	sticky, _ := AssignorByName("sticky")
	r := rand.New(rand.NewSource(2))
	for i := range 300 {
		n := 1 + r.Intn(8)
		members, partitions := randomIdenticalAssignGroup(r, n)
		// Start from an arbitrary (unbalanced, partly invalid) history so
		// the balance check does not rely on a clean slate.
		for j := range members {
			for range r.Intn(12) {
				members[j].Current = append(members[j].Current, TopicPartition{Topic: members[j].Topics[0], Partition: int32(r.Intn(30))})
			}
		}
		base := sticky.Assign(members, partitions)
		checkAssignment(t, sticky, members, partitions, base)
		lo, hi := int(^uint(0)>>1), 0
		for _, l := range base {
			lo, hi = min(lo, len(l)), max(hi, len(l))
		}
		if hi-lo > 1 {
			t.Errorf("case %d: identical subscriptions unbalanced: %v", i, base)
		}
		P := countAssigned(base)
		members = withCurrentAssignment(members, base)

		// Adding a member moves only its fair share.
		grown := append(slices.Clone(members), MemberSubscription{ID: fmt.Sprintf("new%02d", r.Intn(100)), Topics: members[0].Topics})
		if r.Intn(2) == 0 {
			grown[len(grown)-1].ID = "a" // sorts first
		}
		after := sticky.Assign(grown, partitions)
		checkAssignment(t, sticky, grown, partitions, after)
		if m, limit := movedCount(base, after), (P+n)/(n+1); m > limit {
			t.Errorf("case %d: adding a member to %d holding %d moved %d > %d", i, n, P, m, limit)
		}

		// Removing a member moves only that member's partitions.
		if n > 1 {
			gone := r.Intn(n)
			shrunk := slices.Delete(slices.Clone(members), gone, gone+1)
			after := sticky.Assign(shrunk, partitions)
			checkAssignment(t, sticky, shrunk, partitions, after)
			delete(after, members[gone].ID)
			kept := map[string][]TopicPartition{}
			for _, m := range shrunk {
				kept[m.ID] = base[m.ID]
			}
			if m := movedCount(kept, after); m != 0 {
				t.Errorf("case %d: removing %q moved %d partitions of remaining members", i, members[gone].ID, m)
			}
		}
		if t.Failed() {
			t.Fatalf("case %d failed: members=%+v partitions=%v", i, members, partitions)
		}
	}
}

// TestStickyHeterogeneousAddMember checks that with differing subscriptions
// a new member only takes partitions and no partition moves between the
// existing members.
func TestStickyHeterogeneousAddMember(t *testing.T) {
	sticky, _ := AssignorByName("sticky")
	members := []MemberSubscription{
		{ID: "a", Topics: []string{"t0", "t1"}},
		{ID: "b", Topics: []string{"t1"}},
		{ID: "c", Topics: []string{"t0"}},
	}
	partitions := map[string]int32{"t0": 6, "t1": 6}
	base := sticky.Assign(members, partitions)
	grown := append(withCurrentAssignment(members, base), MemberSubscription{ID: "d", Topics: []string{"t0", "t1"}})
	after := sticky.Assign(grown, partitions)
	checkAssignment(t, sticky, grown, partitions, after)
	checkStickyBalance(t, grown, after)
	for id, list := range base {
		for _, tp := range list {
			if !slices.Contains(after[id], tp) && !slices.Contains(after["d"], tp) {
				t.Errorf("%v moved from %q to a member other than the new one: %v -> %v", tp, id, base, after)
			}
		}
	}
	if got := len(after["d"]); got != 3 {
		t.Errorf("new member got %d partitions, want 3: %v", got, after)
	}
}
