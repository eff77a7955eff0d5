package broker

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/gossip"
)

func member(name string, id int32, grpc string) gossip.Member {
	return gossip.Member{Name: name, Addr: name + ":7946", State: gossip.StateAlive,
		Meta: gossip.Meta{BrokerID: id, GRPCAddr: grpc, RaftAddr: grpc + "-raft"}}
}

// prove records a check's outcome for m, as the controller loop does.
func prove(c *controllerState, m gossip.Member, err error, now time.Time) {
	c.proofDone(identityOf(m), err, now)
}

func TestConfirmComparesEveryField(t *testing.T) {
	real := identityOf(member("broker-2", 2, "10.0.0.2:7410"))
	if err := real.Confirm(real); err != nil {
		t.Fatalf("a broker's own view of its claim: %v", err)
	}
	for name, mutate := range map[string]func(*BrokerIdentity){
		"id":             func(k *BrokerIdentity) { k.ID = 3 },
		"gossip node":    func(k *BrokerIdentity) { k.Node = "rogue" },
		"gossip address": func(k *BrokerIdentity) { k.GossipAddr = "10.0.0.9:7946" },
		"gRPC address":   func(k *BrokerIdentity) { k.GRPCAddr = "10.0.0.9:7410" }, // a relay
		"Raft address":   func(k *BrokerIdentity) { k.RaftAddr = "10.0.0.9:7411" },
	} {
		claim := real
		mutate(&claim)
		err := claim.Confirm(real)
		if err == nil {
			t.Errorf("a claim with another %s was confirmed", name)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("a claim with another %s: %v does not name it", name, err)
		}
	}
}

func TestPlaintextCountsEveryClaim(t *testing.T) {
	now := time.Now()
	c := newControllerState(now, false)
	a, b := member("broker-1", 1, "a:1"), member("other", 1, "b:1")
	if refused := c.observe([]gossip.Member{a, b}, now); len(refused) != 0 {
		t.Errorf("plaintext refused %v", refused)
	}
	if !c.alive(1) || !c.counted[identityOf(a)] || !c.counted[identityOf(b)] {
		t.Errorf("plaintext: every member counts, as before: alive %v counted %v", c.alive(1), c.counted)
	}
}

func TestUnprovenClaimDoesNotKeepABrokerAlive(t *testing.T) {
	start := time.Now().Add(-time.Minute) // past the grace of a new controller
	c := newControllerState(start, true)
	real, rogue := member("broker-2", 2, "real:1"), member("rogue", 2, "rogue:1")
	prove(c, real, nil, start)
	prove(c, rogue, errors.New("no certificate"), start)

	c.observe([]gossip.Member{real, rogue}, start)
	if !c.alive(2) || !c.counted[identityOf(real)] || c.counted[identityOf(rogue)] {
		t.Fatalf("with both: alive %v, counted %v; want the real one only", c.alive(2), c.counted)
	}
	// The real broker is killed: gossip shows only the rogue.
	c.observe([]gossip.Member{rogue}, start.Add(time.Second))
	if c.alive(2) {
		t.Error("a member that did not prove its claim keeps broker 2 alive")
	}
	if _, ok := c.proofs[identityOf(real)]; ok {
		t.Error("the proof of a member gossip no longer shows is kept")
	}
	// Nor is an unchecked claim counted.
	c.observe([]gossip.Member{member("unchecked", 2, "x:1")}, start.Add(2*time.Second))
	if c.alive(2) {
		t.Error("an unchecked claim keeps broker 2 alive")
	}
}

func TestUnprovenClaimDoesNotCountInGrace(t *testing.T) {
	now := time.Now()
	c := newControllerState(now, true)
	rogue := member("rogue", 7, "rogue:1")
	prove(c, rogue, errors.New("no certificate"), now)
	c.observe([]gossip.Member{rogue}, now)
	if _, seen := c.seen[7]; seen {
		t.Error("an unproven claim marked broker 7 as seen")
	}
}

func TestSecondProvenClaimantIsRefused(t *testing.T) {
	now := time.Now().Add(-time.Minute)
	c := newControllerState(now, true)
	first, second := member("broker-3", 3, "a:1"), member("broker-3b", 3, "b:1")
	prove(c, first, nil, now)
	c.observe([]gossip.Member{first}, now)

	prove(c, second, nil, now)
	refused := c.observe([]gossip.Member{second, first}, now)
	if len(refused) != 1 || refused[0].Name != "broker-3b" {
		t.Fatalf("refused %v, want the second claimant", refused)
	}
	if !c.counted[identityOf(first)] || c.counted[identityOf(second)] {
		t.Errorf("counted %v: want the holder only", c.counted)
	}
	if again := c.observe([]gossip.Member{first, second}, now); len(again) != 0 {
		t.Errorf("a refusal was reported again while it lasts: %v", again)
	}
	// Once the holder is gone the id is free for the next proven member.
	c.observe([]gossip.Member{second}, now)
	if !c.counted[identityOf(second)] || !c.alive(3) {
		t.Errorf("after the holder left: counted %v", c.counted)
	}
}

func TestProofRetryAndRefusalLog(t *testing.T) {
	now := time.Now()
	c := newControllerState(now, true)
	k := identityOf(member("rogue", 4, "r:1"))
	if !c.needsCheck(k, now) {
		t.Fatal("a new claim needs a check")
	}
	c.proofs[k] = proof{pending: true}
	if c.needsCheck(k, now.Add(time.Hour)) {
		t.Error("a claim under check was checked again")
	}
	if !c.proofDone(k, errors.New("refused"), now) {
		t.Error("the first refusal is not logged")
	}
	if c.needsCheck(k, now.Add(verifyRetry/2)) || !c.needsCheck(k, now.Add(verifyRetry)) {
		t.Error("a refused claim is not retried after verifyRetry, or is before")
	}
	if c.proofDone(k, errors.New("refused"), now.Add(verifyRetry)) {
		t.Error("a refusal was logged again before refusalLogEvery")
	}
	if !c.proofDone(k, errors.New("refused"), now.Add(refusalLogEvery)) {
		t.Error("a refusal was not logged again after refusalLogEvery")
	}
	c.proofDone(k, nil, now.Add(refusalLogEvery+time.Second))
	if c.needsCheck(k, now.Add(time.Hour)) || !c.proven(k) {
		t.Error("a proven claim is checked again, or does not count")
	}
}
