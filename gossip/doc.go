// Package gossip is broker membership for Strata: brokers find each other
// through hashicorp/memberlist, tell each other their addresses and rack in
// node metadata, and learn who joined, changed, left or failed.
//
// Failure detection is memberlist's (SWIM probes with suspicion); nothing
// else pings. Gossip is eventually consistent and decides nothing that needs
// agreement: the controller (package cluster) reacts to what it reports.
//
// Membership heals: a member keeps trying to join the members it saw fail,
// and its seeds, so the two sides of a partition find each other again once
// it heals, even after memberlist itself has forgotten the dead, and each
// reports the other's members as joining (see reconnect.go).
//
// Members is the source of truth for who is alive now; Events are hints that
// it changed. Events are never dropped while the Gossip runs (an unbounded
// queue sits between memberlist and the channel), so a slow reader sees every
// change late but in order.
package gossip
