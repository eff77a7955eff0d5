package broker

// Kafka front end metrics: requests by API and version (count, errors by
// Kafka error name, a latency histogram), connections (open, accepted,
// refused by which limit) and fetch sessions (kept, evicted). Package kafka records them; the broker keeps
// them so that WriteMetrics reports them with everything else, as it does
// the gRPC requests (metrics_requests.go).
//
// Label values are bounded by the caller: api is the name of an API the
// front end serves (apis.go), version one it serves, error a Kafka error
// name (a code from Kafka's list) or CONNECTION_CLOSED for a request
// answered by closing the connection, limit "broker" or "ip".

import (
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// KafkaMetrics counts the Kafka front end's requests and connections. It
// is safe for concurrent use; get it from Broker.KafkaMetrics.
type KafkaMetrics struct {
	mu struct {
		sync.RWMutex
		apis map[kafkaAPI]*kafkaAPIStats
	}
	open     atomic.Int64
	accepted atomic.Int64
	refused  sync.Map // limit -> *atomic.Int64
	// sessions and evictions are the fetch sessions kept and evicted.
	sessions  atomic.Int64
	evictions atomic.Int64
}

type kafkaAPI struct {
	name    string
	version int16
}

type kafkaAPIStats struct {
	requests atomic.Int64
	latency  histogram
	mu       sync.Mutex
	errors   map[string]int64
}

// KafkaMetrics returns the counters package kafka records in.
func (b *Broker) KafkaMetrics() *KafkaMetrics { return &b.metrics.kafka }

// Request counts one request of api at version that took d to answer,
// with the Kafka error names its answer carried (one per partition or
// group that failed, as Kafka counts them).
func (m *KafkaMetrics) Request(api string, version int16, d time.Duration, errs []string) {
	k := kafkaAPI{api, version}
	m.mu.RLock()
	s := m.mu.apis[k]
	m.mu.RUnlock()
	if s == nil {
		m.mu.Lock()
		if m.mu.apis == nil {
			m.mu.apis = map[kafkaAPI]*kafkaAPIStats{}
		}
		if s = m.mu.apis[k]; s == nil {
			s = &kafkaAPIStats{}
			m.mu.apis[k] = s
		}
		m.mu.Unlock()
	}
	s.requests.Add(1)
	s.latency.observe(d)
	if len(errs) == 0 {
		return
	}
	s.mu.Lock()
	if s.errors == nil {
		s.errors = map[string]int64{}
	}
	for _, e := range errs {
		s.errors[e]++
	}
	s.mu.Unlock()
}

// ConnOpened counts a connection accepted; ConnClosed its end.
func (m *KafkaMetrics) ConnOpened() { m.open.Add(1); m.accepted.Add(1) }

// ConnClosed counts the end of a connection ConnOpened counted.
func (m *KafkaMetrics) ConnClosed() { m.open.Add(-1) }

// ConnRefused counts a connection closed at once for a limit ("broker":
// the broker's maximum, "ip": the client address's).
func (m *KafkaMetrics) ConnRefused(limit string) {
	n, _ := m.refused.LoadOrStore(limit, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
}

// FetchSessions adds delta to the fetch sessions kept.
func (m *KafkaMetrics) FetchSessions(delta int) { m.sessions.Add(int64(delta)) }

// FetchSessionEvicted counts a fetch session evicted from a full cache.
func (m *KafkaMetrics) FetchSessionEvicted() { m.evictions.Add(1) }

func (m *KafkaMetrics) write(w *metricsWriter) {
	m.mu.RLock()
	keys := make([]kafkaAPI, 0, len(m.mu.apis))
	for k := range m.mu.apis {
		keys = append(keys, k)
	}
	stats := make(map[kafkaAPI]*kafkaAPIStats, len(keys))
	for _, k := range keys {
		stats[k] = m.mu.apis[k]
	}
	m.mu.RUnlock()
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].name != keys[j].name {
			return keys[i].name < keys[j].name
		}
		return keys[i].version < keys[j].version
	})
	lbl := func(k kafkaAPI, more ...string) string {
		return labels(append([]string{"api", k.name, "version", strconv.Itoa(int(k.version))}, more...)...)
	}
	w.family("strata_kafka_requests_total", "counter", "Kafka protocol requests answered, by API and version.")
	for _, k := range keys {
		w.sample("strata_kafka_requests_total", lbl(k), float64(stats[k].requests.Load()))
	}
	w.family("strata_kafka_errors_total", "counter", "Kafka error codes in answers (one per failed partition or group), by API, version and Kafka error name; CONNECTION_CLOSED for a request answered by closing the connection.")
	for _, k := range keys {
		s := stats[k]
		s.mu.Lock()
		names := make([]string, 0, len(s.errors))
		counts := make(map[string]int64, len(s.errors))
		for e, n := range s.errors {
			names = append(names, e)
			counts[e] = n
		}
		s.mu.Unlock()
		sort.Strings(names)
		for _, e := range names {
			w.sample("strata_kafka_errors_total", lbl(k, "error", e), float64(counts[e]))
		}
	}
	name := "strata_kafka_latency_seconds"
	w.family(name, "histogram", "Time from a Kafka request's arrival to its answer (a fetch includes its wait), by API and version.")
	for _, k := range keys {
		cum, sum := stats[k].latency.snapshot()
		for i, bound := range latencyBuckets {
			w.sample(name+"_bucket", lbl(k, "le", formatFloat(bound)), float64(cum[i]))
		}
		w.sample(name+"_bucket", lbl(k, "le", "+Inf"), float64(cum[len(cum)-1]))
		w.sample(name+"_sum", lbl(k), sum)
		w.sample(name+"_count", lbl(k), float64(cum[len(cum)-1]))
	}
	w.gauge("strata_kafka_fetch_sessions", "Kafka fetch sessions kept (KIP-227).", m.sessions.Load())
	w.counter("strata_kafka_fetch_session_evictions_total", "Kafka fetch sessions evicted to make room for a new one.", m.evictions.Load())
	w.gauge("strata_kafka_connections", "Kafka protocol connections open.", m.open.Load())
	w.counter("strata_kafka_connections_accepted_total", "Kafka protocol connections accepted.", m.accepted.Load())
	w.family("strata_kafka_connections_refused_total", "counter", "Kafka protocol connections closed at once for a limit: broker (kafka.max_connections) or ip (kafka.max_connections_per_ip).")
	for _, limit := range []string{"broker", "ip"} {
		var n int64
		if v, ok := m.refused.Load(limit); ok {
			n = v.(*atomic.Int64).Load()
		}
		w.sample("strata_kafka_connections_refused_total", labels("limit", limit), float64(n))
	}
}
