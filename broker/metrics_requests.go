package broker

// Request metrics: produce and fetch requests per topic (count, bytes,
// errors by reason, a latency histogram) and denied requests per principal.
// Package rpc records them, since only it sees requests whole (a fetch is a
// stream of answers); the broker keeps them so that WriteMetrics reports
// them with everything else.
//
// Label values are bounded: a topic the metadata does not know (a typo, a
// deleted topic, a caller spraying names) is counted under unknownTopic,
// the topics of deleted topics are dropped at the next scrape, reasons are
// the API's error reasons or gRPC code names, and principals beyond
// maxDeniedPrincipals share otherPrincipal.

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// unknownTopic stands for every topic name the metadata does not hold.
	// Topic names cannot contain parentheses, so it names no real topic.
	unknownTopic = "(unknown)"
	// otherPrincipal counts the denials of principals past the first
	// maxDeniedPrincipals.
	otherPrincipal      = "(other)"
	maxDeniedPrincipals = 1000
)

// latencyBuckets are the upper bounds, in seconds, of the latency
// histograms: from a fast acks=leader produce on a local disk to a fetch
// waiting on a slow object store, so that histogram_quantile has a bucket
// boundary near any p99 worth reading.
var latencyBuckets = [...]float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// RequestMetrics counts the requests of the broker's API. It is safe for
// concurrent use; get it from Broker.RequestMetrics.
type RequestMetrics struct {
	// known reports whether the metadata holds a topic; nil knows all.
	known func(topic string) bool

	mu struct {
		sync.RWMutex
		produce map[string]*RequestStats
		fetch   map[string]*RequestStats
		denials map[string]int64
	}
}

// RequestStats are the counters of one kind of request on one topic.
type RequestStats struct {
	requests  atomic.Int64
	responses atomic.Int64
	bytes     atomic.Int64
	latency   histogram

	mu     sync.Mutex
	errors map[string]int64 // by reason
}

// Request counts one request.
func (s *RequestStats) Request() { s.requests.Add(1) }

// Sent counts one answer that carried n bytes of records: an accepted
// produce, or one message of a fetch stream.
func (s *RequestStats) Sent(n int64) {
	s.responses.Add(1)
	s.bytes.Add(n)
}

// Latency records how long a request took to be answered.
func (s *RequestStats) Latency(d time.Duration) { s.latency.observe(d) }

// Failed counts a request that ended with an error, by its reason.
func (s *RequestStats) Failed(reason string) {
	s.mu.Lock()
	if s.errors == nil {
		s.errors = map[string]int64{}
	}
	s.errors[reason]++
	s.mu.Unlock()
}

func (s *RequestStats) errorCounts() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.errors))
	for r, n := range s.errors {
		out[r] = n
	}
	return out
}

// histogram is a Prometheus histogram over latencyBuckets. counts[i] is the
// observations in bucket i alone (the last is above every bound); the
// cumulative counts are summed when written.
type histogram struct {
	counts   [len(latencyBuckets) + 1]atomic.Int64
	sumNanos atomic.Int64
}

func (h *histogram) observe(d time.Duration) {
	s := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets[:], s) // the first bound >= s
	h.counts[i].Add(1)
	h.sumNanos.Add(int64(d))
}

// snapshot returns the cumulative bucket counts (the last is +Inf, the
// total count) and the sum in seconds. Buckets are read one by one while
// requests go on, so a scrape may see a count that is a few requests ahead
// of the sum; Prometheus tolerates that, and nothing here needs exactness.
func (h *histogram) snapshot() (cumulative [len(latencyBuckets) + 1]int64, sum float64) {
	var run int64
	for i := range h.counts {
		run += h.counts[i].Load()
		cumulative[i] = run
	}
	return cumulative, float64(h.sumNanos.Load()) / float64(time.Second)
}

// Produce returns the counters of produce requests to topic.
func (m *RequestMetrics) Produce(topic string) *RequestStats {
	return m.stats(&m.mu.produce, topic)
}

// Fetch returns the counters of fetch requests (streams) on topic.
func (m *RequestMetrics) Fetch(topic string) *RequestStats {
	return m.stats(&m.mu.fetch, topic)
}

func (m *RequestMetrics) stats(byTopic *map[string]*RequestStats, topic string) *RequestStats {
	if m.known != nil && !m.known(topic) {
		topic = unknownTopic
	}
	m.mu.RLock()
	s := (*byTopic)[topic]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if *byTopic == nil {
		*byTopic = map[string]*RequestStats{}
	}
	if s = (*byTopic)[topic]; s == nil {
		s = &RequestStats{}
		(*byTopic)[topic] = s
	}
	return s
}

// Denied counts a request refused to principal (Auth.OnDenied, through
// which every front end's refusals come).
func (m *RequestMetrics) Denied(principal string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.denials == nil {
		m.mu.denials = map[string]int64{}
	}
	if _, ok := m.mu.denials[principal]; !ok && len(m.mu.denials) >= maxDeniedPrincipals {
		principal = otherPrincipal
	}
	m.mu.denials[principal]++
}

// forget drops the counters of topics the metadata no longer holds, so a
// deleted topic's series end rather than linger for the broker's life.
func (m *RequestMetrics) forget() {
	if m.known == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, byTopic := range []map[string]*RequestStats{m.mu.produce, m.mu.fetch} {
		for topic := range byTopic {
			if topic != unknownTopic && !m.known(topic) {
				delete(byTopic, topic)
			}
		}
	}
}

// topicStats is one topic's counters, for writing.
type topicStats struct {
	topic string
	stats *RequestStats
}

func sortedStats(byTopic map[string]*RequestStats) []topicStats {
	out := make([]topicStats, 0, len(byTopic))
	for t, s := range byTopic {
		out = append(out, topicStats{t, s})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].topic < out[j].topic })
	return out
}

// write writes the request metrics. Every family is declared even before
// its first request, so dashboards and alerts find the names on a broker
// that has served nothing yet.
func (m *RequestMetrics) write(w *metricsWriter) {
	m.forget()
	m.mu.RLock()
	produce, fetch := sortedStats(m.mu.produce), sortedStats(m.mu.fetch)
	denials := make([]string, 0, len(m.mu.denials))
	counts := make(map[string]int64, len(m.mu.denials))
	for p, n := range m.mu.denials {
		denials = append(denials, p)
		counts[p] = n
	}
	m.mu.RUnlock()
	sort.Strings(denials)

	writeRequests(w, "produce", produce, "Produce requests, accepted or not.",
		"Bytes of record batches accepted by produce requests.",
		"Produce requests that failed, by reason (the API's error reason, or the gRPC code).",
		"Time from a produce request's arrival to its answer (acks=all includes replication).")
	writeRequests(w, "fetch", fetch, "Fetch streams opened, answered or not.",
		"Bytes of record batches (or decoded records) sent on fetch streams.",
		"Fetch streams that ended with an error, by reason (the API's error reason, or the gRPC code).",
		"Time from a fetch stream's request to its first answer (a long poll at the tail waits for records or max_wait_ms).")
	w.family("strata_fetch_responses_total", "counter", "Messages sent on fetch streams, heartbeats included.")
	for _, t := range fetch {
		w.sample("strata_fetch_responses_total", labels("topic", t.topic), float64(t.stats.responses.Load()))
	}

	w.family("strata_auth_denials_total", "counter", "Requests refused by authorization, by principal.")
	for _, p := range denials {
		w.sample("strata_auth_denials_total", labels("principal", p), float64(counts[p]))
	}
}

func writeRequests(w *metricsWriter, kind string, stats []topicStats, requestsHelp, bytesHelp, errorsHelp, latencyHelp string) {
	prefix := "strata_" + kind
	w.family(prefix+"_requests_total", "counter", requestsHelp)
	for _, t := range stats {
		w.sample(prefix+"_requests_total", labels("topic", t.topic), float64(t.stats.requests.Load()))
	}
	w.family(prefix+"_bytes_total", "counter", bytesHelp)
	for _, t := range stats {
		w.sample(prefix+"_bytes_total", labels("topic", t.topic), float64(t.stats.bytes.Load()))
	}
	w.family(prefix+"_errors_total", "counter", errorsHelp)
	for _, t := range stats {
		errs := t.stats.errorCounts()
		reasons := make([]string, 0, len(errs))
		for r := range errs {
			reasons = append(reasons, r)
		}
		sort.Strings(reasons)
		for _, r := range reasons {
			w.sample(prefix+"_errors_total", labels("topic", t.topic, "reason", r), float64(errs[r]))
		}
	}
	name := prefix + "_latency_seconds"
	w.family(name, "histogram", latencyHelp)
	for _, t := range stats {
		cum, sum := t.stats.latency.snapshot()
		for i, bound := range latencyBuckets {
			w.sample(name+"_bucket", labels("topic", t.topic, "le", formatFloat(bound)), float64(cum[i]))
		}
		w.sample(name+"_bucket", labels("topic", t.topic, "le", "+Inf"), float64(cum[len(cum)-1]))
		w.sample(name+"_sum", labels("topic", t.topic), sum)
		w.sample(name+"_count", labels("topic", t.topic), float64(cum[len(cum)-1]))
	}
}
