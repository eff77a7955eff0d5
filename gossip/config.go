package gossip

import (
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"
)

// Config configures a gossip member. Start fills every zero field from
// DefaultConfig, so a literal with only Meta, Bind and Join set is complete.
type Config struct {
	// NodeName is the member's name, unique in the cluster. Default
	// "broker-<Meta.BrokerID>".
	NodeName string
	// Bind is the host:port both the TCP and the UDP listener bind. The host
	// must be an IP literal. Port 0 picks a free port (tests); LocalAddr then
	// tells which one. Default "0.0.0.0:7946".
	Bind string
	// Advertise is the host:port other members reach this one at, for NAT or
	// containers. Empty lets memberlist choose: the Bind IP, or a private IP of
	// this host when Bind is the wildcard address. With Bind port 0 the bound
	// port is advertised whatever the port here says.
	Advertise string
	// Join lists seed addresses (host:port). Start joins through them in the
	// background and keeps retrying until one answers; later they are tried
	// again, with the members that failed, whenever a member has failed or
	// this one is alone (see reconnect.go). A seed that is this member's own
	// address is skipped. Empty starts a new cluster.
	Join []string
	// SecretKey, if set, encrypts and authenticates all gossip with AES-GCM.
	// It must be 16, 24 or 32 bytes; every member needs the same key.
	SecretKey []byte
	// Meta is what this member tells the others. UpdateMeta changes it later.
	Meta Meta
	// Logger receives this package's logs and memberlist's. Default slog.Default().
	Logger *slog.Logger
	// Timing tunes failure detection and dissemination. Zero fields take the
	// values of LANTiming; tests use FastFailureDetection.
	Timing Timing
	// JoinRetryMin and JoinRetryMax bound the exponential backoff between
	// join attempts while no seed answers. Defaults 1s and 30s.
	JoinRetryMin time.Duration
	JoinRetryMax time.Duration
	// ReconnectTimeout is how long a member that failed is still tried,
	// about every Timing.ReconnectInterval, so that a partition up to that
	// long heals (see reconnect.go); then it is forgotten, and only the
	// seeds are tried, while this member is alone. A member that left
	// gracefully is never tried. Default 24h, serf's.
	ReconnectTimeout time.Duration
	// LeaveTimeout bounds how long Close waits for the leave broadcast to go
	// out. Default 5s.
	LeaveTimeout time.Duration
	// BroadcastTimeout bounds how long UpdateMeta waits for the update to be
	// handed to another member. Default 5s.
	BroadcastTimeout time.Duration

	// transport, when set, replaces memberlist's own UDP and TCP transport,
	// and Bind then only has to be valid. It is the seam the package's tests
	// use to cut in-process members apart as a firewall would
	// (harness_test.go); nothing outside the package can set it.
	transport memberlist.NodeAwareTransport
}

// Timing holds memberlist's failure-detection and gossip knobs. They trade
// detection speed against bandwidth and false suspicion; see
// memberlist.Config for each one's exact meaning.
type Timing struct {
	// ProbeInterval is the time between probes of one random member.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a probe waits for an ack; about the 99th
	// percentile round trip.
	ProbeTimeout time.Duration
	// IndirectChecks is how many members are asked to probe a member that
	// did not answer directly.
	IndirectChecks int
	// SuspicionMult scales how long a member stays suspect before it is
	// declared dead: SuspicionMult × max(1, log10(N)) × ProbeInterval.
	SuspicionMult int
	// SuspicionMaxTimeoutMult scales the upper bound of the suspicion timeout,
	// used when no other member confirms the suspicion.
	SuspicionMaxTimeoutMult int
	// GossipInterval is the time between gossip rounds, GossipNodes the number
	// of members each round reaches.
	GossipInterval time.Duration
	GossipNodes    int
	// GossipToTheDeadTime is how long a dead member still receives gossip, so
	// that it can refute its death.
	GossipToTheDeadTime time.Duration
	// PushPullInterval is the time between full state syncs over TCP; they
	// repair whatever the UDP gossip lost.
	PushPullInterval time.Duration
	// RetransmitMult scales how often a broadcast is retransmitted.
	RetransmitMult int
	// TCPTimeout bounds connecting and each read or write of a stream (join,
	// push/pull, TCP fallback ping).
	TCPTimeout time.Duration
	// ReconnectInterval is the mean time between attempts to join a member
	// that failed, or a seed, while there is one (see reconnect.go). It
	// bounds how long two sides of a healed partition stay apart; each
	// attempt is one join through one address. memberlist has no such knob.
	ReconnectInterval time.Duration
}

// LANTiming returns memberlist.DefaultLANConfig's timing: a dead member is
// declared in a few seconds on a LAN of any size, at little bandwidth. Its
// ReconnectInterval, 10 s, is a third of serf's: a healed broker that is a
// partition's only in-sync replica keeps that partition offline until it is
// reached again, and an attempt costs one connection.
func LANTiming() Timing {
	c := memberlist.DefaultLANConfig()
	return Timing{
		ProbeInterval:           c.ProbeInterval,
		ProbeTimeout:            c.ProbeTimeout,
		IndirectChecks:          c.IndirectChecks,
		SuspicionMult:           c.SuspicionMult,
		SuspicionMaxTimeoutMult: c.SuspicionMaxTimeoutMult,
		GossipInterval:          c.GossipInterval,
		GossipNodes:             c.GossipNodes,
		GossipToTheDeadTime:     c.GossipToTheDeadTime,
		PushPullInterval:        c.PushPullInterval,
		RetransmitMult:          c.RetransmitMult,
		TCPTimeout:              c.TCPTimeout,
		ReconnectInterval:       10 * time.Second,
	}
}

// FastFailureDetection returns a timing for loopback and small test
// clusters: a crashed member is declared dead in about one to three seconds.
// The probe timeout stays well above loopback round trips even under the race
// detector, so members are not suspected falsely; on a real network it would
// be too eager.
func FastFailureDetection() Timing {
	return Timing{
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		IndirectChecks:          3,
		SuspicionMult:           3,
		SuspicionMaxTimeoutMult: 3,
		GossipInterval:          50 * time.Millisecond,
		GossipNodes:             3,
		GossipToTheDeadTime:     2 * time.Second,
		PushPullInterval:        2 * time.Second,
		RetransmitMult:          4,
		TCPTimeout:              time.Second,
		ReconnectInterval:       time.Second,
	}
}

// DefaultConfig returns the production defaults. Meta and Join are left for
// the caller.
func DefaultConfig() Config {
	return Config{
		Bind:             "0.0.0.0:7946",
		Logger:           slog.Default(),
		Timing:           LANTiming(),
		JoinRetryMin:     time.Second,
		JoinRetryMax:     30 * time.Second,
		ReconnectTimeout: 24 * time.Hour,
		LeaveTimeout:     5 * time.Second,
		BroadcastTimeout: 5 * time.Second,
	}
}

// withDefaults returns c with every zero field taken from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.NodeName == "" {
		c.NodeName = "broker-" + strconv.Itoa(int(c.Meta.BrokerID))
	}
	if c.Bind == "" {
		c.Bind = d.Bind
	}
	if c.Logger == nil {
		c.Logger = d.Logger
	}
	c.Timing = c.Timing.withDefaults(d.Timing)
	if c.JoinRetryMin == 0 {
		c.JoinRetryMin = d.JoinRetryMin
	}
	if c.JoinRetryMax == 0 {
		c.JoinRetryMax = max(d.JoinRetryMax, c.JoinRetryMin)
	}
	if c.ReconnectTimeout == 0 {
		c.ReconnectTimeout = max(d.ReconnectTimeout, c.Timing.ReconnectInterval)
	}
	if c.LeaveTimeout == 0 {
		c.LeaveTimeout = d.LeaveTimeout
	}
	if c.BroadcastTimeout == 0 {
		c.BroadcastTimeout = d.BroadcastTimeout
	}
	// Copy what the caller could still mutate after Start.
	c.Join = slices.Clone(c.Join)
	c.SecretKey = slices.Clone(c.SecretKey)
	return c
}

func (t Timing) withDefaults(d Timing) Timing {
	setDur := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setInt := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setDur(&t.ProbeInterval, d.ProbeInterval)
	setDur(&t.ProbeTimeout, d.ProbeTimeout)
	setInt(&t.IndirectChecks, d.IndirectChecks)
	setInt(&t.SuspicionMult, d.SuspicionMult)
	setInt(&t.SuspicionMaxTimeoutMult, d.SuspicionMaxTimeoutMult)
	setDur(&t.GossipInterval, d.GossipInterval)
	setInt(&t.GossipNodes, d.GossipNodes)
	setDur(&t.GossipToTheDeadTime, d.GossipToTheDeadTime)
	setDur(&t.PushPullInterval, d.PushPullInterval)
	setInt(&t.RetransmitMult, d.RetransmitMult)
	setDur(&t.TCPTimeout, d.TCPTimeout)
	setDur(&t.ReconnectInterval, d.ReconnectInterval)
	return t
}

// Validate reports the first problem in c as an ErrInvalidConfig (or the
// meta's own error) naming the field, the value and what is allowed. Start
// validates after filling defaults, so Validate on a partial Config may
// complain about fields Start would have filled.
func (c Config) Validate() error {
	bad := func(field string, value any, allowed string) error {
		return fmt.Errorf("%w: %s = %v: %s", ErrInvalidConfig, field, value, allowed)
	}
	if c.NodeName == "" {
		return bad("NodeName", `""`, "must not be empty")
	}
	if _, _, err := splitIPPort(c.Bind, true); err != nil {
		return bad("Bind", strconv.Quote(c.Bind), "want IP:port with port 0-65535 ("+err.Error()+")")
	}
	if c.Advertise != "" {
		if _, _, err := splitIPPort(c.Advertise, false); err != nil {
			return bad("Advertise", strconv.Quote(c.Advertise), "want IP:port with port 1-65535 ("+err.Error()+")")
		}
	}
	for i, s := range c.Join {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return bad(fmt.Sprintf("Join[%d]", i), strconv.Quote(s), "want host:port")
		}
	}
	switch len(c.SecretKey) {
	case 0, 16, 24, 32:
	default:
		return bad("SecretKey", fmt.Sprintf("%d bytes", len(c.SecretKey)), "want 16, 24 or 32 bytes (AES-128/192/256)")
	}
	if c.Logger == nil {
		return bad("Logger", "nil", "must be set")
	}
	// Checked with the leaving mark set, the larger form, so Leave cannot
	// fail to encode later.
	if _, err := (nodeMeta{Meta: c.Meta, Leaving: true}).encode(); err != nil {
		return fmt.Errorf("gossip: Meta: %w", err)
	}
	t := c.Timing
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Timing.ProbeInterval", t.ProbeInterval},
		{"Timing.ProbeTimeout", t.ProbeTimeout},
		{"Timing.GossipInterval", t.GossipInterval},
		{"Timing.GossipToTheDeadTime", t.GossipToTheDeadTime},
		{"Timing.PushPullInterval", t.PushPullInterval},
		{"Timing.TCPTimeout", t.TCPTimeout},
		{"Timing.ReconnectInterval", t.ReconnectInterval},
		{"JoinRetryMin", c.JoinRetryMin},
		{"JoinRetryMax", c.JoinRetryMax},
		{"ReconnectTimeout", c.ReconnectTimeout},
		{"LeaveTimeout", c.LeaveTimeout},
		{"BroadcastTimeout", c.BroadcastTimeout},
	} {
		if d.v <= 0 {
			return bad(d.name, d.v, "must be positive")
		}
	}
	for _, n := range []struct {
		name string
		v    int
	}{
		{"Timing.IndirectChecks", t.IndirectChecks},
		{"Timing.SuspicionMult", t.SuspicionMult},
		{"Timing.SuspicionMaxTimeoutMult", t.SuspicionMaxTimeoutMult},
		{"Timing.GossipNodes", t.GossipNodes},
		{"Timing.RetransmitMult", t.RetransmitMult},
	} {
		if n.v <= 0 {
			return bad(n.name, n.v, "must be positive")
		}
	}
	if c.JoinRetryMax < c.JoinRetryMin {
		return bad("JoinRetryMax", c.JoinRetryMax, "must be at least JoinRetryMin "+c.JoinRetryMin.String())
	}
	// A failed member forgotten before its first retry would never be
	// retried at all.
	if c.ReconnectTimeout < t.ReconnectInterval {
		return bad("ReconnectTimeout", c.ReconnectTimeout, "must be at least Timing.ReconnectInterval "+t.ReconnectInterval.String())
	}
	return nil
}

// splitIPPort parses IP:port. memberlist binds and advertises IP literals
// only, so a host name is refused here rather than deep inside memberlist.
func splitIPPort(s string, allowZeroPort bool) (string, int, error) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		host = "0.0.0.0"
	}
	if net.ParseIP(host) == nil {
		return "", 0, fmt.Errorf("host %q is not an IP address", host)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 || (port == 0 && !allowZeroPort) {
		return "", 0, fmt.Errorf("bad port %q", portStr)
	}
	return host, port, nil
}

// memberlistConfig translates a validated c. Everything not set here keeps
// memberlist.DefaultLANConfig's value.
func (c Config) memberlistConfig(d *delegate, logOut io.Writer) *memberlist.Config {
	mc := memberlist.DefaultLANConfig()
	mc.Name = c.NodeName
	mc.BindAddr, mc.BindPort, _ = splitIPPort(c.Bind, true)
	// DefaultLANConfig advertises port 7946 whatever the bind port; advertise
	// the bound port unless told otherwise.
	mc.AdvertisePort = mc.BindPort
	if c.Advertise != "" {
		mc.AdvertiseAddr, mc.AdvertisePort, _ = splitIPPort(c.Advertise, false)
	}
	mc.SecretKey = c.SecretKey

	t := c.Timing
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.IndirectChecks = t.IndirectChecks
	mc.SuspicionMult = t.SuspicionMult
	mc.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	mc.GossipInterval = t.GossipInterval
	mc.GossipNodes = t.GossipNodes
	mc.GossipToTheDeadTime = t.GossipToTheDeadTime
	mc.PushPullInterval = t.PushPullInterval
	mc.RetransmitMult = t.RetransmitMult
	mc.TCPTimeout = t.TCPTimeout

	if c.transport != nil {
		mc.Transport = c.transport
	}
	mc.Delegate = d
	mc.Events = d
	mc.Alive = d
	mc.Logger = log.New(logOut, "", 0)
	return mc
}
