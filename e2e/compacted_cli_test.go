package e2e

import (
	"slices"
	"testing"
)

// TestCLICompactedTopic: strata topic create takes cleanup.policy with its
// comma and the other compaction settings, describe shows them, alter
// changes them live; a compacted topic with remote storage on is created
// (the cold tier compacts too); strata produce without keys to a compacted topic
// fails with Kafka's message, with keys it succeeds.
func TestCLICompactedTopic(t *testing.T) {
	b := newBroker(t, 1)
	b.start()
	mustStrata(t, b, "", "topic", "create", "users", "--config",
		"cleanup.policy=compact,delete,remote.storage.enable=false,min.cleanable.dirty.ratio=0.2,delete.retention.ms=2h")
	rows := rowsOf(mustStrata(t, b, "", "topic", "describe", "users"))
	for _, want := range []string{
		"cleanup.policy compact,delete *override",
		"min.cleanable.dirty.ratio 0.2 *override",
		"delete.retention.ms 7200000 (2h) *override",
		"max.compaction.lag.ms -1",
	} {
		if !slices.Contains(rows, want) {
			t.Errorf("describe lacks %q:\n%v", want, rows)
		}
	}
	rows = rowsOf(mustStrata(t, b, "", "topic", "alter", "users", "--set", "cleanup.policy=compact,min.compaction.lag.ms=1m"))
	for _, want := range []string{"cleanup.policy compact *override", "min.compaction.lag.ms 60000 (1m) *override"} {
		if !slices.Contains(rows, want) {
			t.Errorf("alter output lacks %q:\n%v", want, rows)
		}
	}
	mustStrata(t, b, "", "topic", "create", "tiered", "--config", "cleanup.policy=compact")
	wantFailure(t, strata(t, b, "no key\n", "produce", "users"),
		"Compacted topic cannot accept message without key", "INVALID_RECORD")
	mustStrata(t, b, "alice=1\nbob=2\n", "produce", "users", "--key-separator", "=")
	out := mustStrata(t, b, "", "consume", "users", "--from", "earliest", "--max", "2")
	if out != "1\n2\n" {
		t.Errorf("consume: %q", out)
	}
}
