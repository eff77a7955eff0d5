package cluster

import (
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
