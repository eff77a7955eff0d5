package gossip

// Reconnecting after failures and partitions.
//
// memberlist probes, gossips and syncs state only with members it believes
// alive. A member it declared dead still receives gossip for
// GossipToTheDeadTime, so that it can refute its death, and is then
// forgotten. A partition that outlasts that leaves each side with no record
// of the other, and nothing ever crosses the healed link again: the sides
// stay apart until a member restarts and joins through its seeds. For
// Strata that means a broker the controller saw fail is never seen alive
// again, and a partition it alone can lead stays offline.
//
// So, as serf does, every member remembers the members it saw fail (not
// those that left) for Config.ReconnectTimeout and, about every
// Timing.ReconnectInterval, joins one of them or one of its seeds, picked at
// random. A join that reaches the other side is a push/pull of the whole
// member table in both directions: each side learns the other's members are
// alive (memberlist's refutation sorts out who was declared dead by whom)
// and reports them with EventJoin, which is what the controller acts on.

import (
	"math/rand/v2"
	"time"
)

// reconnectLoop runs after the first join (or at once without seeds) until
// Leave or Close, making at most one join attempt, through one address, per
// round. The rounds are jittered so members that lost each other at the same
// moment do not retry in lockstep.
func (g *Gossip) reconnectLoop(seeds []string) {
	interval := g.cfg.Timing.ReconnectInterval
	for {
		// Uniform in [interval/2, 3·interval/2): the mean stays interval.
		t := time.NewTimer(interval/2 + rand.N(interval))
		select {
		case <-g.stopJoin:
			t.Stop()
			return
		case <-t.C:
		}
		g.reconnect(seeds)
	}
}

// reconnect makes one round's attempt, if there is anything to mend.
func (g *Gossip) reconnect(seeds []string) {
	failed, expired := g.delegate.failedSince(time.Now().Add(-g.cfg.ReconnectTimeout))
	for _, m := range expired {
		g.log.Info("no longer trying to reach a failed member", "member", m.Name, "addr", m.Addr, "broker", m.Meta.BrokerID, "after", g.cfg.ReconnectTimeout)
	}
	targets := reconnectTargets(failed, seeds, g.Members())
	if len(targets) == 0 {
		return
	}
	addr := targets[rand.N(len(targets))]
	attempt := g.reconnectAttempts.Add(1)
	n, err := g.ml.Join([]string{addr})
	if err != nil || n == 0 {
		// A member that is really gone fails here every round until
		// ReconnectTimeout; that is expected and not worth more than debug.
		g.log.Debug("reconnect attempt failed", "addr", addr, "attempt", attempt, "failed_members", len(failed), "err", err)
		return
	}
	// Reaching an address does not yet mean the member there is back: the
	// join events that follow say who is.
	g.log.Info("reached a member after a failure; merging membership", "addr", addr, "failed_members", len(failed))
}

// reconnectTargets returns the addresses worth a join attempt: those of the
// failed members and the seeds, without any address an alive member has.
// It returns none while no member has failed and this one is not alone
// (alive always holds this member): then nothing is split that a join could
// mend, and memberlist's own push/pull keeps the alive members in step.
func reconnectTargets(failed []Member, seeds []string, alive []Member) []string {
	if len(failed) == 0 && len(alive) > 1 {
		return nil
	}
	skip := map[string]bool{}
	for _, m := range alive {
		skip[m.Addr] = true
	}
	var out []string
	add := func(addr string) {
		if !skip[addr] {
			skip[addr] = true
			out = append(out, addr)
		}
	}
	for _, m := range failed {
		add(m.Addr)
	}
	for _, s := range seeds {
		add(s)
	}
	return out
}
