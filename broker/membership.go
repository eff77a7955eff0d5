package broker

// Membership and the controller's reactions to it. Brokers find each other
// through gossip; the metadata group grows from it:
//
//   - At first start with gossip.bootstrap_expect N, a broker waits until
//     gossip shows N brokers; the lowest id among them bootstraps the Raft
//     group with all N as voters, unless one of them already belongs to a
//     cluster (then it waits to be added, like a late joiner).
//   - The controller (the Raft leader) registers every broker gossip sees
//     (with TLS, only members that proved the id they claim: claims.go),
//     adds it to the group (as a voter while there are fewer than three,
//     else as a non-voter, so every broker has the metadata locally) and
//     removes brokers gone longer than controller.dead_broker_timeout.
//   - When a partition's leader is gone, the controller elects the first
//     live member of its ISR (any live replica if the topic allows unclean
//     election), bumping the leader epoch, and takes dead brokers out of the
//     ISR so the survivors can commit; with nobody eligible the partition
//     has no leader until an ISR member returns.
//
// Gossip decides nothing that needs agreement: every change goes through
// the Raft log, and the controller acts on what its own gossip member sees.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/gossip"
)

// startGossip joins the cluster's gossip with this broker's addresses.
func (b *Broker) startGossip(version string) error {
	key, err := b.cfg.Gossip.SecretKeyBytes()
	if err != nil {
		return err
	}
	timing := gossip.LANTiming()
	if b.cfg.Gossip.Profile == "local" {
		timing = gossip.FastFailureDetection()
	}
	advertise, err := resolveHostPort(b.cfg.Gossip.Advertise)
	if err != nil {
		return fmt.Errorf("gossip.advertise: %w", err)
	}
	b.gossip, err = gossip.Start(gossip.Config{
		Bind:      b.cfg.Gossip.Listen,
		Advertise: advertise,
		Join:      b.cfg.Gossip.Join,
		SecretKey: key,
		Timing:    timing,
		Logger:    b.log,
		Meta: gossip.Meta{
			BrokerID:  b.id,
			GRPCAddr:  b.cfg.AdvertiseAddr(),
			RaftAddr:  b.cfg.Raft.AdvertiseAddr(),
			AdminAddr: b.cfg.Admin.Listen,
			Rack:      b.cfg.Gossip.Rack,
			Version:   version,
			KafkaAddr: b.cfg.Kafka.AdvertiseAddr(),
		},
	})
	return err
}

// resolveHostPort turns host:port with a host name (a container's service
// name, say) into ip:port, as memberlist advertises only addresses.
func resolveHostPort(addr string) (string, error) {
	if addr == "" {
		return "", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if net.ParseIP(host) != nil {
		return addr, nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return "", fmt.Errorf("resolve %s: %v", host, err)
	}
	return net.JoinHostPort(ips[0].String(), port), nil
}

// bootstrapPlan decides how this broker's Raft node starts: bootstrap a
// group (alone, or with the brokers gossip found), or wait to be added.
func (b *Broker) bootstrapPlan(ctx context.Context) (bool, []cluster.Server, error) {
	cfg := b.cfg.Gossip
	if cfg.BootstrapExpect <= 1 && len(cfg.Join) == 0 {
		return true, nil, nil // a broker on its own; a no-op once Raft state exists
	}
	if _, err := os.Stat(filepath.Join(b.cfg.DataDir, "raft", "raft.db")); err == nil {
		return false, nil, nil // it was in a group before
	}
	if cfg.BootstrapExpect <= 1 {
		return false, nil, nil // joining an existing cluster
	}
	b.log.Info("waiting for brokers before bootstrapping the metadata group", "expect", cfg.BootstrapExpect)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		// Before the group exists no broker serves its gRPC address yet, so
		// no claim can be proven here: bootstrapping trusts the members gossip
		// shows (with TLS they needed the gossip key), Raft then admits only
		// brokers with the cluster's certificates, and the controller counts
		// and registers a member only once its claim is proven (claims.go).
		members := b.gossip.Members()
		if len(members) >= cfg.BootstrapExpect {
			sort.Slice(members, func(i, j int) bool { return members[i].Meta.BrokerID < members[j].Meta.BrokerID })
			members = members[:cfg.BootstrapExpect]
			if members[0].Meta.BrokerID != b.id {
				return false, nil, nil // the lowest id bootstraps; the group adds us
			}
			if b.anyInCluster(ctx, members) {
				b.log.Info("a broker already belongs to a cluster; waiting to be added to it")
				return false, nil, nil
			}
			var servers []cluster.Server
			for _, m := range members {
				servers = append(servers, cluster.Server{ID: m.Meta.BrokerID, RaftAddr: m.Meta.RaftAddr, Voter: true})
			}
			return true, servers, nil
		}
		select {
		case <-ctx.Done():
			return false, nil, fmt.Errorf("waiting for %d brokers (seen %d): %w", cfg.BootstrapExpect, len(members), ctx.Err())
		case <-tick.C:
		}
	}
}

// anyInCluster asks each member whether it knows a controller: a broker
// that joins a running cluster must not bootstrap a second one.
func (b *Broker) anyInCluster(ctx context.Context, members []gossip.Member) bool {
	for _, m := range members {
		if m.Meta.BrokerID == b.id {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		known, err := b.peers.KnowsController(rctx, Peer{ID: m.Meta.BrokerID, Addr: m.Meta.GRPCAddr})
		cancel()
		if err == nil && known {
			return true
		}
	}
	return false
}

// controllerLoop runs the controller's duties while this broker is the
// controller: membership, leader election, ISR cleanup. Every broker runs
// it, so that each keeps its view of who is alive (and its proofs of the
// claims gossip carries, claims.go) up to date for when it becomes
// controller, and for its cluster status and metrics.
func (b *Broker) controllerLoop(life context.Context) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	c := newControllerState(time.Now(), b.raftTLS != nil)
	// Checks of claims run beside the loop, so that a member that is slow
	// to answer its check never holds up an election; they end with it.
	checks, cancel := context.WithCancel(life)
	defer cancel()
	results := make(chan proofResult, 64)
	for {
		select {
		case <-life.Done():
			return
		case <-tick.C:
		case <-b.gossip.Events():
		case r := <-results:
			b.proofDone(c, r)
		}
		for more := true; more; {
			select {
			case r := <-results:
				b.proofDone(c, r)
			default:
				more = false
			}
		}
		members := b.gossip.Members()
		b.checkClaims(checks, c, members, results)
		for _, m := range c.observe(members, time.Now()) {
			b.log.Warn("a second gossip member claims a broker id another member proved; not counting it",
				"claimed_id", m.Meta.BrokerID, "node", m.Name, "gossip_addr", m.Addr, "addr", m.Meta.GRPCAddr, "raft_addr", m.Meta.RaftAddr)
		}
		counted := c.countedMembers(members)
		b.counted.Store(&counted)
		if !b.meta.IsController() {
			c.since = time.Time{}
			continue
		}
		if c.since.IsZero() {
			c.since = time.Now()
		}
		ctx, cancel := context.WithTimeout(life, 10*time.Second)
		b.reconcileMembership(ctx, c)
		b.electLeaders(ctx, c)
		cancel()
	}
}

// proofResult is the outcome of one check of a claim.
type proofResult struct {
	claim BrokerIdentity
	err   error
}

// checkClaims starts a check of every claim among members that needs one
// (claims.go); each reports on results. This broker's own claim needs no
// network: it is proven if it is what this broker says of itself.
func (b *Broker) checkClaims(ctx context.Context, c *controllerState, members []gossip.Member, results chan<- proofResult) {
	if !c.requireProof {
		return
	}
	now := time.Now()
	for _, m := range members {
		k := identityOf(m)
		if !c.needsCheck(k, now) {
			continue
		}
		if k.ID == b.id {
			self, err := b.Identity()
			if err == nil {
				err = k.Confirm(self)
			}
			b.proofDone(c, proofResult{claim: k, err: err})
			continue
		}
		c.proofs[k] = proof{pending: true, at: c.proofs[k].at, logged: c.proofs[k].logged}
		b.goLoop(func(context.Context) { // ctx, the loop's, derives from the broker's lifetime
			vctx, cancel := context.WithTimeout(ctx, proofTimeout)
			err := b.peers.VerifyBroker(vctx, k)
			cancel()
			select {
			case results <- proofResult{claim: k, err: err}:
			case <-ctx.Done():
			}
		})
	}
}

// proofDone records a check's outcome and logs a refusal, at most every
// refusalLogEvery for one claim.
func (b *Broker) proofDone(c *controllerState, r proofResult) {
	if c.proofDone(r.claim, r.err, time.Now()) {
		b.metrics.claimsRefused.Add(1)
		b.log.Warn("a gossip member does not prove the broker id it claims; not counting it as that broker nor registering it",
			"claimed_id", r.claim.ID, "node", r.claim.Node, "gossip_addr", r.claim.GossipAddr,
			"addr", r.claim.GRPCAddr, "raft_addr", r.claim.RaftAddr, "err", r.err)
	}
}

// controllerState is what the controller loop remembers between rounds.
// Every broker keeps it up to date from its own gossip, so a broker that
// becomes controller already knows who was alive before.
type controllerState struct {
	started time.Time           // when this broker started watching gossip
	since   time.Time           // when this broker became controller
	seen    map[int32]time.Time // when gossip last showed each broker alive
	now     map[int32]bool      // the brokers gossip shows alive this round
	// requireProof is set when brokers have certificates (TLS): a gossip
	// member then counts as the broker it claims to be only once that
	// broker confirmed the claim (claims.go). Without TLS every claim
	// counts.
	requireProof bool
	// proofs holds what is known of each claim gossip shows, until its
	// member is gone or changes its claim.
	proofs map[BrokerIdentity]proof
	// holders is, with requireProof, the member that counts for each id:
	// a second proven member claiming it is refused while the holder
	// stays. refused is the set refused this round, so each refusal is
	// logged once.
	holders map[int32]BrokerIdentity
	refused map[BrokerIdentity]bool
	// counted is the claims that count this round.
	counted map[BrokerIdentity]bool
}

func newControllerState(started time.Time, requireProof bool) *controllerState {
	return &controllerState{started: started, requireProof: requireProof, seen: map[int32]time.Time{},
		proofs: map[BrokerIdentity]proof{}, holders: map[int32]BrokerIdentity{}}
}

// observe records the members gossip shows alive now. With requireProof a
// member counts as the broker it claims only once its claim is proven,
// and only one member counts per id: the one that held it the round before,
// while it is still there, else the first proven one (members come sorted
// by id, then name). It returns the proven members refused because another
// member holds their id, each once while it stays refused, for the caller
// to log. It forgets the proofs of claims gossip no longer shows.
func (c *controllerState) observe(members []gossip.Member, now time.Time) (refused []gossip.Member) {
	c.now = map[int32]bool{}
	c.counted = map[BrokerIdentity]bool{}
	present := make(map[BrokerIdentity]bool, len(members))
	for _, m := range members {
		present[identityOf(m)] = true
	}
	holders := map[int32]BrokerIdentity{}
	for id, k := range c.holders {
		if present[k] && c.proven(k) {
			holders[id] = k
		}
	}
	refusedNow := map[BrokerIdentity]bool{}
	for _, m := range members {
		k := identityOf(m)
		if !c.proven(k) {
			continue
		}
		if c.requireProof {
			if h, ok := holders[k.ID]; ok && h != k {
				refusedNow[k] = true
				if !c.refused[k] {
					refused = append(refused, m)
				}
				continue
			}
			holders[k.ID] = k
		}
		c.counted[k] = true
		c.seen[k.ID] = now
		c.now[k.ID] = true
	}
	c.holders, c.refused = holders, refusedNow
	for k := range c.proofs {
		if !present[k] {
			delete(c.proofs, k)
		}
	}
	return refused
}

// countedMembers returns the members among members that count this round.
func (c *controllerState) countedMembers(members []gossip.Member) []gossip.Member {
	out := make([]gossip.Member, 0, len(members))
	for _, m := range members {
		if c.counted[identityOf(m)] {
			out = append(out, m)
		}
	}
	return out
}

// alive reports whether a broker counts as alive this round. A broker this
// broker has never seen in gossip counts as alive during a short grace
// after it started watching, so a controller that just started does not
// depose leaders it has not heard of yet.
func (c *controllerState) alive(id int32) bool {
	if c.now[id] {
		return true
	}
	_, seen := c.seen[id]
	return !seen && time.Since(c.started) < controllerGrace
}

// controllerGrace is how long a broker that just started waits before it
// treats a broker it has never seen in gossip as gone.
const controllerGrace = 10 * time.Second

// liveMembers are the gossip members that count as brokers: every member
// without TLS; with TLS, the members whose claims are proven, as of the
// controller loop's last round (none before its first).
func (b *Broker) liveMembers() []gossip.Member {
	if b.raftTLS == nil {
		return b.gossip.Members()
	}
	if p := b.counted.Load(); p != nil {
		return *p
	}
	return nil
}

// reconcileMembership registers live brokers, grows the Raft group with
// them and removes brokers gone for longer than dead_broker_timeout.
func (b *Broker) reconcileMembership(ctx context.Context, c *controllerState) {
	now := time.Now()
	members := b.gossip.Members()
	servers, err := b.meta.Servers()
	if err != nil {
		return
	}
	voters := 0
	inGroup := map[int32]cluster.Server{}
	for _, s := range servers {
		inGroup[s.ID] = s
		if s.Voter {
			voters++
		}
	}
	md := b.meta.Metadata()
	for _, m := range members {
		id := m.Meta.BrokerID
		if !c.counted[identityOf(m)] {
			continue // not proven (claims.go), or another member holds the id
		}
		info := cluster.BrokerInfo{ID: id, Addr: m.Meta.GRPCAddr, RaftAddr: m.Meta.RaftAddr, Rack: m.Meta.Rack, KafkaAddr: m.Meta.KafkaAddr}
		if cur, ok := md.Broker(id); !ok || cur != info {
			if err := b.meta.RegisterBroker(ctx, info); err != nil {
				b.log.Warn("registering a broker failed", "broker", id, "err", err)
			}
		}
		s, ok := inGroup[id]
		switch {
		case !ok && voters < 3, ok && !s.Voter && voters < 3:
			if err := b.meta.AddVoter(ctx, id, m.Meta.RaftAddr); err != nil {
				b.log.Warn("adding a voter failed", "broker", id, "err", err)
				continue
			}
			voters++
			b.log.Info("broker joined the metadata group as a voter", "broker", id)
		case !ok:
			if err := b.meta.AddNonvoter(ctx, id, m.Meta.RaftAddr); err != nil {
				b.log.Warn("adding a non-voter failed", "broker", id, "err", err)
				continue
			}
			b.log.Info("broker joined the metadata group as a non-voter", "broker", id)
		}
	}
	timeout := time.Duration(b.cfg.Controller.DeadBrokerTimeout)
	for id := range inGroup {
		last, ok := c.seen[id]
		if !ok {
			last = c.started
		}
		if id != b.id && now.Sub(last) > timeout {
			if err := b.meta.RemoveServer(ctx, id); err != nil {
				b.log.Warn("removing a dead broker failed", "broker", id, "err", err)
				continue
			}
			b.log.Warn("removed a broker gone too long from the metadata group", "broker", id, "gone_for", now.Sub(last).Round(time.Second))
		}
	}
}

// electLeaders moves leadership off brokers that are gone and takes them
// out of the ISRs they were in.
func (b *Broker) electLeaders(ctx context.Context, c *controllerState) {
	md := b.meta.Metadata()
	for _, name := range md.TopicNames() {
		t, _ := md.Topic(name)
		unclean := false
		if cfg, err := b.defaults.With(t.Config); err == nil {
			unclean = cfg.UncleanLeaderElectionEnable
		}
		for _, info := range t.Partitions {
			b.electLeader(ctx, c, t.Name, info, unclean)
		}
	}
}

func (b *Broker) electLeader(ctx context.Context, c *controllerState, topic string, info cluster.PartitionInfo, unclean bool) {
	name := fmt.Sprintf("%s/%d", topic, info.Partition)
	// A round takes at most a leader change and the ISR cleanup after it.
	for range 3 {
		step := nextElectionStep(info, c.alive, unclean)
		var err error
		prev := info
		switch step.kind {
		case electNothing:
			return
		case electShrinkISR:
			info, err = b.meta.ChangeISR(ctx, topic, info.Partition, step.isr, info.LeaderEpoch, info.PartitionEpoch)
			if err != nil {
				b.log.Warn("removing dead brokers from an ISR failed", "partition", name, "err", err)
				return
			}
		case electUncleanISR:
			info, err = b.meta.ChangeISR(ctx, topic, info.Partition, step.isr, info.LeaderEpoch, info.PartitionEpoch)
			if err != nil {
				b.log.Warn("unclean election failed", "partition", name, "err", err)
				return
			}
		case electLeader:
			info, err = b.meta.ChangeLeader(ctx, topic, info.Partition, step.leader, info.LeaderEpoch)
			if err != nil {
				b.log.Warn("electing a leader failed", "partition", name, "err", err)
				return
			}
			if step.leader == cluster.NoLeader {
				b.log.Warn("partition has no live in-sync replica; it stays offline until one returns", "partition", name, "epoch", info.LeaderEpoch)
				return
			}
			b.metrics.leaderElections.Add(1)
			b.log.Info("elected a new leader", "partition", name, "leader", step.leader, "epoch", info.LeaderEpoch, "previous", prev.Leader)
		}
	}
}

// The controller's election rules, a pure function of a partition and who
// is alive, so that the simulation of the protocol runs the same rules.
const (
	electNothing    = iota
	electShrinkISR  // the leader is fine: dead followers leave the ISR
	electLeader     // leadership moves to leader (NoLeader: offline)
	electUncleanISR // unclean election: the chosen replica joins the ISR first
)

type electionStep struct {
	kind   int
	isr    []int32
	leader int32
}

// nextElectionStep is the controller's next step for a partition. While its
// leader is alive, dead followers leave the ISR at once, so the rest can
// commit without waiting out replica.lag.time.max. When the leader is gone,
// the first live member of the ISR leads (any live replica if the topic
// allows unclean election, after joining the ISR); with nobody eligible the
// partition goes offline, its epoch still bumped to fence the old leader,
// until an ISR member returns.
func nextElectionStep(info cluster.PartitionInfo, alive func(int32) bool, unclean bool) electionStep {
	if info.Leader != cluster.NoLeader && alive(info.Leader) {
		isr := slices.DeleteFunc(slices.Clone(info.ISR), func(id int32) bool { return id != info.Leader && !alive(id) })
		if len(isr) < len(info.ISR) {
			return electionStep{kind: electShrinkISR, isr: isr}
		}
		return electionStep{kind: electNothing}
	}
	next := cluster.NoLeader
	for _, id := range info.ISR {
		if id != info.Leader && alive(id) {
			next = id
			break
		}
	}
	if next == cluster.NoLeader && unclean {
		for _, id := range info.Replicas {
			if id != info.Leader && alive(id) {
				next = id
				break
			}
		}
	}
	switch {
	case next == info.Leader:
		return electionStep{kind: electNothing} // offline already, nobody to elect
	case next != cluster.NoLeader && !slices.Contains(info.ISR, next):
		if info.Leader == cluster.NoLeader {
			return electionStep{kind: electNothing} // an ISR change needs a leader to keep
		}
		return electionStep{kind: electUncleanISR, isr: []int32{info.Leader, next}}
	}
	return electionStep{kind: electLeader, leader: next}
}
