package rpc

import (
	"sync"
	"testing"

	"github.com/strata-log/strata/broker"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestMetadataChangeUpdatesOnlyTheReplicasItTouches: every metadata change
// (a topic created, a setting altered, an ISR change) starts a reconcile
// round. A broker of thousands of replicas that applied each change to all
// of them took minutes to apply a burst of ISR changes; a round now applies
// metadata only to the replicas whose metadata or settings changed.
func TestMetadataChangeUpdatesOnlyTheReplicasItTouches(t *testing.T) {
	var mu sync.Mutex
	updates := map[string]int{}
	count := func(topic string, _ int32) {
		mu.Lock()
		defer mu.Unlock()
		updates[topic]++
	}
	seen := func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range updates {
			out[k] = v
		}
		clear(updates)
		return out
	}
	b1 := startBroker(t, brokerConfig(t, 1, t.TempDir()), broker.WithBeforeUpdate(count))
	b1.createTopic(t, "many", 16, nil)
	b1.createTopic(t, "other", 2, nil)
	if err := b1.Ready(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := seen()["many"]; got != 0 {
		t.Fatalf("creating another topic updated %d replicas of an unchanged one", got)
	}

	// A change of settings reaches the replicas of its topic, and only them.
	if _, err := b1.admin.AlterTopicConfig(testCtx(t), &stratav1.AlterTopicConfigRequest{Name: "other", Set: map[string]string{"retention.ms": "2592000000"}}); err != nil {
		t.Fatal(err)
	}
	if err := b1.Ready(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	got := seen()
	if got["other"] != 2 || got["many"] != 0 {
		t.Fatalf("altering one topic's settings updated %v replicas; want other: 2, many: 0", got)
	}
	serveOneRecordEach(t, b1, "many", 16)
	serveOneRecordEach(t, b1, "other", 2)
}
