package gossip

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// eventChanSize is the buffer of the Events channel. The queue behind it is
// unbounded; the buffer only saves the pump a wake-up per event.
const eventChanSize = 64

// Gossip is one running member. Its methods are safe for concurrent use.
type Gossip struct {
	cfg      Config
	log      *slog.Logger
	ml       *memberlist.Memberlist
	delegate *delegate
	queue    *eventQueue
	out      chan Event

	// stopJoin ends the join and reconnect loop (on Leave or Close); done
	// ends the event pump (on Close). wg tracks both goroutines.
	stopJoin     chan struct{}
	stopJoinOnce sync.Once
	done         chan struct{}
	wg           sync.WaitGroup

	// joinAttempts, joined and reconnectAttempts describe the join and
	// reconnect loop for logs and tests.
	joinAttempts      atomic.Int64
	joined            atomic.Bool
	reconnectAttempts atomic.Int64

	// life serialises Leave, UpdateMeta and Close, because memberlist panics
	// on Leave after Shutdown and would re-announce a member that UpdateMeta
	// touches after it left. Lock order: life, then memberlist's own locks,
	// then the delegate's (memberlist takes those in its callbacks).
	life struct {
		sync.Mutex
		left   bool
		closed bool
	}
}

// Start creates the member, binds its listeners and starts gossiping. When
// cfg.Join is set it joins through those seeds in the background, retrying
// with backoff until one answers or the member leaves or closes; Start never
// waits for a seed, so brokers may start in any order. From then on, until
// Leave or Close, it keeps trying to reach members that failed (reconnect.go).
func Start(cfg Config) (*Gossip, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With("component", "gossip", "node", cfg.NodeName)
	g := &Gossip{
		cfg:      cfg,
		log:      log,
		queue:    newEventQueue(log),
		out:      make(chan Event, eventChanSize),
		stopJoin: make(chan struct{}),
		done:     make(chan struct{}),
	}
	g.delegate = newDelegate(log, g.queue)
	if err := g.delegate.setMeta(cfg.Meta); err != nil {
		return nil, fmt.Errorf("gossip: Meta: %w", err)
	}
	mlLog := logWriter{logger: cfg.Logger.With("component", "memberlist", "node", cfg.NodeName)}

	// Create binds, announces this member (the first event is its own join)
	// and starts probing; it does not contact anyone.
	ml, err := memberlist.Create(cfg.memberlistConfig(g.delegate, mlLog))
	if err != nil {
		return nil, fmt.Errorf("gossip: start memberlist on %s: %w", cfg.Bind, err)
	}
	g.ml = ml

	g.wg.Go(func() { g.queue.pump(g.out, g.done) })
	seeds := g.seeds()
	g.wg.Go(func() {
		if len(seeds) > 0 && !g.joinLoop(seeds) {
			return
		}
		g.reconnectLoop(seeds)
	})
	log.Info("gossip started", "addr", g.LocalAddr(), "broker", cfg.Meta.BrokerID, "seeds", cfg.Join)
	return g, nil
}

// seeds returns cfg.Join without this member's own address: a shared seed
// list usually names every broker, and a join that reaches only ourselves
// would count as success while joining nobody.
func (g *Gossip) seeds() []string {
	self := g.LocalAddr()
	return slices.DeleteFunc(slices.Clone(g.cfg.Join), func(s string) bool { return s == self })
}

// joinLoop joins through seeds, retrying with jittered exponential backoff
// until one answers; it reports false if it was stopped first. Once joined,
// memberlist keeps the membership while members can reach each other;
// reconnectLoop mends it after they could not.
func (g *Gossip) joinLoop(seeds []string) bool {
	delay := g.cfg.JoinRetryMin
	for {
		select {
		case <-g.stopJoin:
			return false
		default:
		}
		n, err := g.ml.Join(seeds)
		attempt := g.joinAttempts.Add(1)
		if err == nil && n > 0 {
			g.joined.Store(true)
			g.log.Info("joined cluster", "seeds_reached", n, "attempts", attempt)
			return true
		}
		// Seeds are usually just not up yet, so retries log quietly; every
		// tenth is a warning, since a wrong key or address never heals.
		level := slog.LevelDebug
		switch {
		case attempt%10 == 0:
			level = slog.LevelWarn
		case attempt == 1:
			level = slog.LevelInfo
		}
		g.log.Log(context.Background(), level, "join failed; retrying", "attempt", attempt, "retry_in", delay, "err", err)

		// Full jitter in [delay/2, delay) keeps brokers that started together
		// from retrying in lockstep.
		wait := delay/2 + rand.N(delay/2+1)
		t := time.NewTimer(wait)
		select {
		case <-g.stopJoin:
			t.Stop()
			return false
		case <-t.C:
		}
		delay = min(delay*2, g.cfg.JoinRetryMax)
	}
}

// Members returns the alive members, this one included, sorted by broker id.
// It is the source of truth; see Events.
func (g *Gossip) Members() []Member {
	return g.delegate.snapshot()
}

// Events returns the membership changes in the order memberlist saw them,
// starting with this member's own join. Nothing is dropped while the Gossip
// runs, however slowly the channel is read; Members already reflects every
// event sent or still queued. Close closes the channel and drops what is
// still queued.
func (g *Gossip) Events() <-chan Event {
	return g.out
}

// UpdateMeta replaces this member's metadata and re-broadcasts it. It waits
// up to Config.BroadcastTimeout for the update to reach another member; on
// ErrTimeout the new metadata is in effect anyway and spreads with the next
// push/pull sync.
func (g *Gossip) UpdateMeta(m Meta) error {
	g.life.Lock()
	defer g.life.Unlock()
	if g.life.closed {
		return ErrClosed
	}
	if g.life.left {
		return ErrLeft
	}
	if err := g.delegate.setMeta(m); err != nil {
		return fmt.Errorf("gossip: update meta: %w", err)
	}
	if err := g.ml.UpdateNode(g.cfg.BroadcastTimeout); err != nil {
		return fmt.Errorf("%w: update meta: %v", ErrTimeout, err)
	}
	return nil
}

// Self returns this member as the others see it: its node name, gossip
// address and the Meta it advertises now. A broker tells it to a broker
// that checks a gossip claim of its id (see broker.BrokerIdentity).
func (g *Gossip) Self() Member {
	g.delegate.meta.Lock()
	meta := g.delegate.meta.current.Meta
	g.delegate.meta.Unlock()
	return Member{Name: g.cfg.NodeName, Addr: g.LocalAddr(), Meta: meta, State: StateAlive}
}

// LocalAddr returns the host:port other members reach this one at: the
// advertised IP with the port actually bound (useful after port 0). It is the
// address to hand to others as a seed; with a wildcard Bind it is the private
// IP memberlist chose, not 0.0.0.0.
func (g *Gossip) LocalAddr() string {
	return g.ml.LocalNode().Address()
}

// Leave announces that this member is leaving, waiting up to timeout (0: no
// limit) for the announcement to go out, and stops joining and reconnecting.
// The member keeps its listeners until Close. Calling it again does nothing.
//
// The others see an EventLeave rather than an EventFail because Leave first
// spreads a leaving mark in this member's metadata and waits until memberlist
// has finished retransmitting it, and only then broadcasts the leave itself.
// A member that misses the mark (partitioned, or timeout too short) sees an
// EventFail instead.
func (g *Gossip) Leave(timeout time.Duration) error {
	g.life.Lock()
	defer g.life.Unlock()
	if g.life.closed {
		return ErrClosed
	}
	return g.leaveLocked(timeout)
}

func (g *Gossip) leaveLocked(timeout time.Duration) error {
	if g.life.left {
		return nil
	}
	g.life.left = true
	g.stopJoinOnce.Do(func() { close(g.stopJoin) })

	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	// remaining is what is left of timeout; memberlist reads 0 as no limit,
	// so a spent timeout becomes the shortest positive one.
	remaining := func() time.Duration {
		if deadline.IsZero() {
			return 0
		}
		return max(time.Until(deadline), time.Nanosecond)
	}

	var errs []error
	if err := g.delegate.setLeaving(); err != nil {
		// Validate checked that the marked Meta encodes.
		errs = append(errs, fmt.Errorf("gossip: leave: %w", err))
	} else if err := g.ml.UpdateNode(remaining()); err != nil {
		errs = append(errs, fmt.Errorf("%w: leaving mark: %v", ErrTimeout, err))
	}
	// Leave anyway: a member that missed the mark sees a failure, which is
	// still the truth about this member being gone.
	if err := g.ml.Leave(remaining()); err != nil {
		errs = append(errs, fmt.Errorf("%w: leave: %v", ErrTimeout, err))
	}
	g.log.Info("left cluster")
	return errors.Join(errs...)
}

// Close leaves the cluster (waiting at most Config.LeaveTimeout), shuts
// memberlist down and returns once every goroutine this package started has
// ended. The Events channel is closed. Close is idempotent.
//
// A leave that times out is logged, not returned: the member is shut down
// either way and the others declare it failed instead.
func (g *Gossip) Close() error {
	return g.shutdown(true)
}

// shutdown stops the member, announcing the leave first if leave is set. The
// tests crash a member by shutting memberlist down directly and then call
// shutdown(false) to stop the rest, because memberlist panics on Leave after
// Shutdown.
func (g *Gossip) shutdown(leave bool) error {
	g.life.Lock()
	defer g.life.Unlock()
	if g.life.closed {
		return nil
	}
	g.life.closed = true
	g.stopJoinOnce.Do(func() { close(g.stopJoin) })

	if leave {
		if err := g.leaveLocked(g.cfg.LeaveTimeout); err != nil {
			g.log.Warn("leave before close did not complete; others will see a failure", "err", err)
		}
	}
	var errs []error
	if err := g.ml.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("gossip: shutdown memberlist: %w", err))
	}
	close(g.done)
	// The join or reconnect loop may be inside one Join, which memberlist
	// bounds by TCPTimeout per address; the pump ends at once.
	g.wg.Wait()
	g.queue.close()
	g.log.Info("gossip closed")
	return errors.Join(errs...)
}
