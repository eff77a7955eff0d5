package broker

import (
	"context"
	"testing"

	"github.com/strata-log/strata/security"
)

func TestProducerIDsBelongToThePrincipalThatInitialisedThem(t *testing.T) {
	b := &Broker{producerIDKey: ProducerIDKey([]byte("the cluster's gossip key"))}
	alice := security.WithPrincipal(context.Background(), security.UserPrincipal("alice"))
	bob := security.WithPrincipal(context.Background(), security.UserPrincipal("bob"))
	broker2 := security.WithPrincipal(context.Background(), security.BrokerPrincipal(2))

	seen := map[int64]bool{}
	for counter := int64(1000); counter < 1100; counter++ {
		id, err := b.bindProducerID(alice, counter)
		if err != nil {
			t.Fatal(err)
		}
		if id < 0 || id&producerCounterMask != counter || seen[id] {
			t.Fatalf("counter %d bound to id %d: want a fresh non-negative id keeping the counter", counter, id)
		}
		seen[id] = true
		if err := b.checkProducerID(alice, id); err != nil {
			t.Fatalf("alice's own id %d refused: %v", id, err)
		}
		err = b.checkProducerID(bob, id)
		if ReasonOf(err) != ReasonPermissionDenied {
			t.Fatalf("bob using alice's id %d: %v, want PERMISSION_DENIED", id, err)
		}
		// The bare counter (an id from before binding) is nobody's.
		if err := b.checkProducerID(alice, counter); ReasonOf(err) != ReasonPermissionDenied {
			t.Fatalf("an unbound id %d passed: %v", counter, err)
		}
		if err := b.checkProducerID(broker2, id); err != nil {
			t.Fatalf("a broker's batch refused: %v", err)
		}
	}
	if err := b.checkProducerID(bob, -1); err != nil {
		t.Fatalf("a batch without a producer id refused: %v", err)
	}
	// Another cluster (another key) does not accept alice's ids.
	other := &Broker{producerIDKey: ProducerIDKey([]byte("another key"))}
	id, _ := b.bindProducerID(alice, 1234)
	if err := other.checkProducerID(alice, id); ReasonOf(err) != ReasonPermissionDenied {
		t.Fatalf("an id bound under another key passed: %v", err)
	}
	// Without a key (no TLS) or without a principal, ids are the counter.
	plain := &Broker{}
	if id, _ := plain.bindProducerID(alice, 1234); id != 1234 {
		t.Fatalf("without a key the id is %d, want 1234", id)
	}
	if id, _ := b.bindProducerID(context.Background(), 1234); id != 1234 {
		t.Fatalf("without a principal the id is %d, want 1234", id)
	}
	if err := plain.checkProducerID(bob, id); err != nil {
		t.Fatalf("without a key a batch was refused: %v", err)
	}
}
