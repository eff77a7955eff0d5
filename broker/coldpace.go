package broker

// Bounds on what cold reads take from the object store, so that a replay
// of history cannot crowd out the writers: the broker's own
// (tiering.cold_read_bytes_per_sec and tiering.cold_read_gets_per_sec, for
// all topics together) and each topic's (remote.read.bytes.per.sec and
// remote.read.gets.per.sec, which a topic alter changes at once). Every
// GET of a cold read or its read-ahead waits for all four, then for the
// yield to writers (coldyield.go); the cold reader also keeps at most
// tiering.cold_read_max_gets of them in flight.

import (
	"context"
	"sync"
	"time"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/tiering"
)

// coldReaderConfig is the cold reader's configuration, paced by
// b.coldPace.
func (b *Broker) coldReaderConfig() tiering.ReaderConfig {
	return tiering.ReaderConfig{
		ChunkBytes: int64(b.cfg.Tiering.ChunkBytes),
		CacheBytes: int64(b.cfg.Tiering.CacheBytes),
		MaxGets:    b.cfg.Tiering.ColdReadMaxGets,
		Pace:       b.coldPace.pace,
	}
}

// topicReadLimits returns a topic's cold read limits from the cluster's
// metadata.
func (b *Broker) topicReadLimits(topic, topicID string) (bytes, gets int64, ok bool) {
	if b.meta == nil {
		return 0, 0, false
	}
	t, ok := b.meta.Metadata().Topic(topic)
	if !ok || t.ID != topicID {
		return 0, 0, false
	}
	bytes, gets = b.readLimitsOf(t.Config)
	return bytes, gets, true
}

// replicaReadLimits returns a topic's cold read limits from the settings
// its manifests carry, on a read replica; none while it is still scanning
// the bucket at start.
func (b readOnly) replicaReadLimits(topic, topicID string) (bytes, gets int64, ok bool) {
	t, _, ok := b.replica.topic(topic)
	if !ok || t.id != topicID {
		return 0, 0, false
	}
	bytes, gets = b.readLimitsOf(t.config)
	return bytes, gets, true
}

// readLimitsOf returns the cold read limits of a topic with these
// overrides of the broker's topic defaults.
// It runs before every cold GET: a topic that overrides neither limit
// costs no parsing and no allocation (parsing all of a topic's overrides
// was 3% of the broker's CPU in a cold replay), and one that does has just
// those two parsed and checked.
func (b *Broker) readLimitsOf(overrides map[string]string) (bytes, gets int64) {
	var limits map[string]string
	for _, k := range readLimitKeys {
		if v, ok := overrides[k]; ok {
			if limits == nil {
				limits = make(map[string]string, len(readLimitKeys))
			}
			limits[k] = v
		}
	}
	cfg := b.defaults
	if limits != nil {
		if c, err := b.defaults.With(limits); err == nil {
			cfg = c
		}
	}
	return cfg.RemoteReadBytesPerSec, cfg.RemoteReadGetsPerSec
}

// readLimitKeys are the topic keys readLimitsOf reads.
var readLimitKeys = [...]string{"remote.read.bytes.per.sec", "remote.read.gets.per.sec"}

// rateLimit is a token bucket filling at rate tokens a second and holding
// at most a tenth of a second's worth: a limited replay then sends its GETs
// evenly, not a second's worth at once, which showed in the writers'
// latency. A request waits until the bucket holds what it asks for, or
// all the bucket can hold if it asks for more; then it takes all it asked
// for, into debt if need be: a GET larger than the bucket still goes, and
// the debt holds back the next ones. A rate of 0 is unlimited. The zero
// value is unlimited.
//
// It is not the quotas' bucket (quota.go), which lets a request through
// while the bucket holds any tokens at all and holds a second's worth:
// with a limit of a few GETs a second that admits the next GET a
// millisecond after the last, and a second's worth of chunks at once
// showed in the writers' latency. Its rate also changes while it runs.
type rateLimit struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	at     time.Time
}

// burst is the part of a second's worth the bucket holds.
const burst = 0.1

// setRate changes the rate, keeping the tokens held (at most what the
// bucket holds at the new rate).
func (l *rateLimit) setRate(rate int64, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if float64(rate) == l.rate {
		return
	}
	if l.rate == 0 {
		l.tokens, l.at = float64(rate)*burst, now // from unlimited: a full bucket
	}
	l.rate = float64(max(rate, 0))
	l.tokens = min(l.tokens, l.rate*burst)
}

// take charges n tokens if the bucket holds enough, returning 0; otherwise
// it charges nothing and returns how long until it does.
func (l *rateLimit) take(n float64, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rate == 0 {
		return 0
	}
	if elapsed := now.Sub(l.at); elapsed > 0 {
		l.tokens = min(l.rate*burst, l.tokens+elapsed.Seconds()*l.rate)
		l.at = now
	}
	if need := min(n, l.rate*burst); l.tokens < need {
		return max(time.Millisecond, time.Duration((need-l.tokens)/l.rate*float64(time.Second)))
	}
	l.tokens -= n
	return 0
}

// wait takes n tokens, waiting until the bucket holds enough; it returns
// how long it waited, or ctx's error if ctx ends first.
func (l *rateLimit) wait(ctx context.Context, n float64) (time.Duration, error) {
	start := time.Now()
	for now := start; ; now = time.Now() {
		d := l.take(n, now)
		if d == 0 {
			return now.Sub(start), nil
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return time.Since(start), ctx.Err()
		}
	}
}

// coldPacer is the cold reader's Pace: the broker's limits and a pair per
// topic, whose rates it takes from the topic's settings on each GET, so
// that an alter applies to the next one.
type coldPacer struct {
	bytes, gets rateLimit
	// limitsOf returns a topic's remote.read.bytes.per.sec and
	// remote.read.gets.per.sec (config.Unbounded: none of its own); ok
	// is false for a topic it does not know.
	limitsOf func(topic, topicID string) (bytes, gets int64, ok bool)
	// yield, if set, holds GETs back further while writers need the
	// broker (coldyield.go).
	yield *coldYield
	// waited counts the seconds GETs were held back, by "broker" and
	// "topic" limits and by the yield to "writers", for
	// strata_cold_read_throttle_seconds_total.
	waited struct {
		sync.Mutex
		broker, topic, writers time.Duration
	}
	mu struct {
		sync.Mutex
		topics map[string]*topicPace // by topic id
	}
}

type topicPace struct{ bytes, gets rateLimit }

func newColdPacer(t config.Tiering, limitsOf func(topic, topicID string) (int64, int64, bool)) *coldPacer {
	c := &coldPacer{limitsOf: limitsOf}
	if t.ColdReadYield {
		c.yield = &coldYield{}
	}
	now := time.Now()
	c.bytes.setRate(int64(t.ColdReadBytesPerSec), now)
	c.gets.setRate(int64(t.ColdReadGetsPerSec), now)
	c.mu.topics = map[string]*topicPace{}
	return c
}

// pace holds back a GET of n bytes from p's cold tier until the topic's
// and the broker's limits let it go, and then the writers.
func (c *coldPacer) pace(ctx context.Context, p tiering.PartitionRef, n int64) error {
	if tp := c.topic(p); tp != nil {
		waited, err := waitGet(ctx, &tp.gets, &tp.bytes, n)
		c.count(&c.waited.topic, waited)
		if err != nil {
			return err
		}
	}
	waited, err := waitGet(ctx, &c.gets, &c.bytes, n)
	c.count(&c.waited.broker, waited)
	if err != nil || c.yield == nil {
		return err
	}
	waited, err = c.yield.wait(ctx, n)
	c.count(&c.waited.writers, waited)
	return err
}

// waitGet takes a GET from gets and its n bytes from bytes, and returns
// how long that took.
func waitGet(ctx context.Context, gets, bytes *rateLimit, n int64) (time.Duration, error) {
	waited, err := gets.wait(ctx, 1)
	if err != nil {
		return waited, err
	}
	w, err := bytes.wait(ctx, float64(n))
	return waited + w, err
}

// topic returns p's topic's limits, with its current rates, or nil when
// it has none of its own.
func (c *coldPacer) topic(p tiering.PartitionRef) *topicPace {
	bytes, gets, ok := c.limitsOf(p.Topic, p.TopicID)
	c.mu.Lock()
	defer c.mu.Unlock()
	tp := c.mu.topics[p.TopicID]
	if !ok || (bytes == config.Unbounded && gets == config.Unbounded) {
		delete(c.mu.topics, p.TopicID) // deleted, or no limit of its own
		return nil
	}
	if tp == nil {
		tp = &topicPace{}
		c.mu.topics[p.TopicID] = tp
	}
	now := time.Now()
	tp.bytes.setRate(max(bytes, 0), now)
	tp.gets.setRate(max(gets, 0), now)
	return tp
}

// count adds d to one of c.waited's sums.
func (c *coldPacer) count(sum *time.Duration, d time.Duration) {
	if d == 0 {
		return
	}
	c.waited.Lock()
	defer c.waited.Unlock()
	*sum += d
}

// throttled returns the time GETs were held back by the broker's and by
// topics' limits, and by the yield to writers.
func (c *coldPacer) throttled() (broker, topic, writers time.Duration) {
	c.waited.Lock()
	defer c.waited.Unlock()
	return c.waited.broker, c.waited.topic, c.waited.writers
}
