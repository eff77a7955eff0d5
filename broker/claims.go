package broker

// Gossip claims and their proofs. A gossip member says which broker it is
// and where that broker's gRPC and Raft listeners are; with TLS, the gossip
// key lets it say anything, so a claim counts (the id is alive, its
// addresses may be registered, it may join the metadata group) only once
// the broker it names has confirmed it, and only for the member that made
// it. Invariant 10: only brokers speak for brokers.
//
// The proof. The verifier opens a fresh TLS connection to the claimed gRPC
// address and accepts only broker <id>'s certificate (then the same
// handshake at the claimed Raft address); over that connection it asks the
// broker for its own view of itself: its gossip node name and address and
// its advertised gRPC and Raft addresses, as it configured them. The claim
// stands only if they equal what the gossip member says. This is sound
// against a member that holds the gossip key but no broker certificate:
//
//   - TLS is end to end, so an answer that arrives over it comes from the
//     holder of broker <id>'s key, whatever relays the bytes; a relay can
//     forward the handshake but can neither read nor change the answer.
//   - The answer names the addresses the broker advertises itself, so a
//     claim that routes them through a relay differs from it and fails,
//     even though the relay passes the handshake.
//   - The answer names the gossip member (node name and address) the
//     broker is, so a second member that copies a broker's metadata
//     exactly fails too: memberlist keeps one member per name and address,
//     and the impostor's differ. It cannot keep the id alive once the
//     broker is gone, nor hold it beside the broker while it is up.
//   - Nothing is replayed: every proof is a new TLS session, and the
//     answer binds nothing but the broker's own settings, which it also
//     advertises in gossip.
//
// A proof holds for as long as the member that earned it stays in gossip
// with the same claim; one that leaves, fails or changes its metadata
// proves itself again. Without TLS there is nothing to prove with: every
// claim counts, as before.

import (
	"fmt"
	"time"

	"github.com/strata-log/strata/gossip"
)

// BrokerIdentity is who a gossip member says it is, or, from the broker
// itself, who it says it is over its authenticated connection.
type BrokerIdentity struct {
	ID int32
	// Node and GossipAddr name the gossip member: memberlist's node name
	// and the address it advertises.
	Node       string
	GossipAddr string
	// GRPCAddr and RaftAddr are the broker's advertised addresses.
	GRPCAddr string
	RaftAddr string
}

// identityOf is what gossip member m claims.
func identityOf(m gossip.Member) BrokerIdentity {
	return BrokerIdentity{ID: m.Meta.BrokerID, Node: m.Name, GossipAddr: m.Addr, GRPCAddr: m.Meta.GRPCAddr, RaftAddr: m.Meta.RaftAddr}
}

// Identity is this broker's own view of itself, as it answers a broker
// that checks a gossip claim of its id.
func (b *Broker) Identity() (BrokerIdentity, error) {
	if b.gossip == nil {
		return BrokerIdentity{}, Unavailable("broker %d is not in gossip", b.id)
	}
	return identityOf(b.gossip.Self()), nil
}

// Confirm reports whether self, what broker claim.ID says of itself over a
// connection its certificate authenticated, confirms the claim; the error
// says what differs.
func (claim BrokerIdentity) Confirm(self BrokerIdentity) error {
	var diff []string
	check := func(what, claimed, answered string) {
		if claimed != answered {
			diff = append(diff, fmt.Sprintf("%s %q (the broker says %q)", what, claimed, answered))
		}
	}
	if self.ID != claim.ID {
		diff = append(diff, fmt.Sprintf("id %d (the broker says %d)", claim.ID, self.ID))
	}
	check("gossip node", claim.Node, self.Node)
	check("gossip address", claim.GossipAddr, self.GossipAddr)
	check("gRPC address", claim.GRPCAddr, self.GRPCAddr)
	check("Raft address", claim.RaftAddr, self.RaftAddr)
	if len(diff) > 0 {
		return fmt.Errorf("broker %d does not confirm the claim: %v", claim.ID, diff)
	}
	return nil
}

// proof is what the broker knows of one claim.
type proof struct {
	ok      bool
	pending bool      // a check is under way
	at      time.Time // when the last check ended
	logged  time.Time // when a refusal of it was last logged
}

// verifyRetry is how soon a claim that failed its proof is checked again:
// soon, because a broker whose check failed (it was still starting, say)
// counts as gone meanwhile.
const verifyRetry = 2 * time.Second

// refusalLogEvery bounds how often the refusal of one claim is logged.
const refusalLogEvery = 30 * time.Second

// proofTimeout bounds one check.
const proofTimeout = 3 * time.Second

// needsCheck reports whether claim k should be checked now.
func (c *controllerState) needsCheck(k BrokerIdentity, now time.Time) bool {
	p, ok := c.proofs[k]
	return !ok || (!p.ok && !p.pending && now.Sub(p.at) >= verifyRetry)
}

// proofDone records the outcome of a check of claim k; it reports whether
// a refusal should be logged now.
func (c *controllerState) proofDone(k BrokerIdentity, err error, now time.Time) (logRefusal bool) {
	p := c.proofs[k]
	p.ok, p.pending, p.at = err == nil, false, now
	if err != nil && now.Sub(p.logged) >= refusalLogEvery {
		p.logged, logRefusal = now, true
	}
	c.proofs[k] = p
	return logRefusal
}

// proven reports whether claim k counts: with proofs required, only once a
// check confirmed it.
func (c *controllerState) proven(k BrokerIdentity) bool {
	return !c.requireProof || c.proofs[k].ok
}
