package cluster

import (
	"strconv"
	"strings"
	"testing"
)

func TestValidateTopicName(t *testing.T) {
	for _, ok := range []string{"a", "orders", "Orders.v2", "a_b", "a.b", "a-b", "..a", "...", strings.Repeat("x", 249), "0"} {
		if err := ValidateTopicName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, msg := range map[string]string{
		"":                       `cluster: invalid topic name "": must not be empty`,
		".":                      `cluster: invalid topic name ".": "." and ".." are not allowed`,
		"..":                     `cluster: invalid topic name "..": "." and ".." are not allowed`,
		"a b":                    `cluster: invalid topic name "a b": only letters, digits, '.', '_' and '-' are allowed`,
		"a/b":                    `cluster: invalid topic name "a/b": only letters, digits, '.', '_' and '-' are allowed`,
		"é":                      `cluster: invalid topic name "é": only letters, digits, '.', '_' and '-' are allowed`,
		strings.Repeat("x", 250): `: longer than 249 characters`,
	} {
		err := ValidateTopicName(name)
		mustIs(t, err, ErrInvalidTopicName)
		if !strings.HasSuffix(err.Error(), msg) {
			t.Errorf("%q: error %q, want it to end with %q", name, err, msg)
		}
	}
}

func TestValidateConfigChange(t *testing.T) {
	if err := validateConfigChange(map[string]string{"a": ""}, []string{"b"}); err != nil {
		t.Fatal(err)
	}
	mustIs(t, validateConfigChange(map[string]string{"a": "1"}, []string{"a"}), ErrInvalidConfig)
}

func TestValidatePartitionCount(t *testing.T) {
	for _, n := range []int{1, MaxPartitions} {
		if err := validatePartitionCount(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []int{0, -1, MaxPartitions + 1} {
		mustIs(t, validatePartitionCount(n), ErrInvalidPartitions)
	}
}

func TestValidateGroupName(t *testing.T) {
	for _, ok := range []string{"g", "orders-consumers", "Team A / billing", "écoute", strings.Repeat("g", MaxGroupNameLen)} {
		if err := ValidateGroupName(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for name, msg := range map[string]string{
		"":                                     "empty group name",
		strings.Repeat("g", 10_000):            "group name of 10000 bytes",
		strings.Repeat("g", MaxGroupNameLen+1): "at most 249 allowed",
		"a\nb":                                 "control characters are not allowed",
		"a\x00b":                               "control characters are not allowed",
		"a\u0085b":                             "control characters are not allowed",
		"bad\xffutf8":                          "not valid UTF-8",
	} {
		err := ValidateGroupName(name)
		mustIs(t, err, ErrInvalidOffsetCommit)
		if !strings.Contains(err.Error(), msg) {
			t.Errorf("%.30q: error %q, want it to say %q", name, err, msg)
		}
		if len(err.Error()) > 400 {
			t.Errorf("%.30q: the error echoes the whole name (%d bytes)", name, len(err.Error()))
		}
	}
}

// TestReplicaCounts: the counts after a topic are exactly what creating it
// then makes them, whatever the rotation the earlier topics left.
func TestReplicaCounts(t *testing.T) {
	h := threeBrokers(t)
	count := func(m *Metadata) map[int32]int {
		out := map[int32]int{1: 0, 2: 0, 3: 0}
		for _, top := range m.Topics {
			for _, p := range top.Partitions {
				for _, id := range p.Replicas {
					out[id]++
				}
			}
		}
		return out
	}
	for i, tc := range []struct {
		partitions int32
		rf         int
	}{{1, 1}, {2, 2}, {5, 1}, {4, 3}, {7, 2}, {1, 3}} {
		m := h.f.meta.Load()
		now, after := ReplicaCounts(m, tc.partitions, tc.rf)
		mustEqual(t, "now", now, count(m))
		h.ok(createCmd(m, "t"+strconv.Itoa(i), tc.partitions, tc.rf, nil))
		mustEqual(t, "after", after, count(h.f.meta.Load()))
	}
	m := h.f.meta.Load()
	for _, bad := range []struct {
		partitions int32
		rf         int
	}{{1, 4}, {1, 0}, {0, 1}, {MaxPartitions + 1, 1}} {
		if now, after := ReplicaCounts(m, bad.partitions, bad.rf); after != nil || len(now) != 3 {
			t.Errorf("%+v: now %v after %v; want the counts now and no placement", bad, now, after)
		}
	}
}
