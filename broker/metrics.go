package broker

// Metrics in the Prometheus text format, written by hand: the format is a
// few lines of text and the broker keeps no metrics library. Everything
// that can be read at scrape time is read then (partitions, ISRs, lags,
// Raft); only events are counted as they happen (metrics_counters.go,
// metrics_requests.go).
//
// Labels are only topic, partition, follower, reason, principal, state,
// the object store's op, a throttling limit, the Kafka front end's api,
// version, error and limit (metrics_kafka.go), and group, so the number of
// series grows with the partitions a broker holds, the principals it
// refused and the groups (bounded by limits.max_groups), never with what
// callers send.

import (
	"fmt"
	"io"
	"math"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-log/strata/tiering"
)

// WriteMetrics writes the broker's metrics in the Prometheus text format,
// for the admin endpoint: partitions and their logs, the health of the
// cluster as this broker may report it (metrics_cluster.go), requests,
// the cold tier's backlog, object store calls and the cold reader's cache.
func (b *Broker) WriteMetrics(w io.Writer) {
	b.role.writeMetrics(w)
}

func (b clusterMember) writeMetrics(w io.Writer) {
	// Count the ISR changes up to now, so that a scrape right after one
	// sees it rather than racing isrWatchLoop.
	b.observeISR()
	mw := &metricsWriter{w: w}
	parts := b.partitions()
	sort.Slice(parts, func(i, j int) bool { return parts[i].name() < parts[j].name() })
	var leaders int
	var localBytes int64
	for _, p := range parts {
		if p.isLeader() {
			leaders++
		}
		localBytes += p.log.Size()
	}
	mw.gauge("strata_partitions", "Partition replicas this broker holds.", int64(len(parts)))
	mw.gauge("strata_partitions_led", "Partitions this broker leads.", int64(leaders))
	mw.gauge("strata_local_bytes", "Bytes of segments on local disk.", localBytes)
	b.writeClusterMetrics(mw, parts)
	b.RequestMetrics().write(mw)
	b.metrics.kafka.write(mw)
	b.writeThrottleMetrics(mw)
	b.writeTierMetrics(mw, parts)
	b.metrics.cleaner.write(mw)
	b.metrics.coldCleaner.write(mw)
	b.limits.writeSyncMetrics(mw)
	writeRuntimeMetrics(mw)
}

// writeSyncMetrics writes what the segment files' fsyncs cost: the
// file-system syncs they shared (storage.shared_sync_after).
func (l *limits) writeSyncMetrics(mw *metricsWriter) {
	if l == nil || l.syncs == nil {
		return
	}
	st := l.syncs.Stats()
	mw.counter("strata_log_shared_syncs_total", "File-system syncs (syncfs) of the data dir that answered partitions' fsyncs at once (storage.shared_sync_after).", st.Rounds)
	mw.counter("strata_log_shared_sync_waits_total", "Partition fsyncs answered by a shared file-system sync instead of their own.", st.Shared)
	off := int64(0)
	if st.Off {
		off = 1
	}
	mw.gauge("strata_log_shared_sync_off", "1 once a shared file-system sync failed: every fsync is per file from then on.", off)
}

// writeRuntimeMetrics writes the process's heap allocation counter, under
// the name Prometheus's Go collector gives it, so that what a workload
// costs the allocator (and so the GC) can be read as the difference of two
// scrapes.
func writeRuntimeMetrics(mw *metricsWriter) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() == metrics.KindUint64 {
		mw.counter("go_memstats_alloc_bytes_total", "Bytes allocated on the heap since the process started.", int64(s[0].Value.Uint64()))
	}
}

func (b clusterMember) knows(topic string) bool {
	_, ok := b.meta.Metadata().Topic(topic)
	return ok
}

// RequestMetrics returns the counters package rpc records requests in.
func (b *Broker) RequestMetrics() *RequestMetrics {
	b.metrics.once.Do(func() {
		b.metrics.requests.known = func(topic string) bool { return b.role.knows(topic) }
	})
	return &b.metrics.requests
}

// writeThrottleMetrics writes the refusals of the broker's limits, every
// limit even when unset (0), so that a dashboard finds the series before
// the first refusal.
func (b *Broker) writeThrottleMetrics(mw *metricsWriter) {
	mw.family("strata_throttled_requests_total", "counter", "Produce and fetch requests refused with THROTTLED, by limit: produce_quota (quotas.produce_bytes_per_sec), fetch_quota (quotas.fetch_bytes_per_sec), upload_backlog (tiering.max_unuploaded_bytes).")
	for i, limit := range throttleLimits {
		mw.sample("strata_throttled_requests_total", labels("limit", limit), float64(b.metrics.throttled[i].Load()))
	}
	mw.family("strata_fetch_quota_held_seconds_total", "counter", "Time fetches over their principal's quota were held before being served (quotas.fetch_bytes_per_sec).")
	mw.sample("strata_fetch_quota_held_seconds_total", "", float64(b.metrics.quotaHeldNanos.Load())/1e9)
}

// writeTierMetrics writes the cold tier's: nothing without an object
// store.
func (b *Broker) writeTierMetrics(mw *metricsWriter, parts []*partition) {
	if b.store == nil {
		return
	}
	mw.gauge("strata_upload_backlog_bytes", "Sealed bytes awaiting upload to the object store.", b.unuploaded.Load())
	mw.family("strata_upload_lag_bytes", "gauge", "Sealed bytes awaiting upload, by partition this broker leads.")
	type lag struct {
		p        *partition
		bytes    int64
		segments int
	}
	var lags []lag
	for _, p := range parts {
		// Until a leader has read the partition's manifest head its lag
		// is not known: no series rather than a wrong one.
		if !p.isLeader() || !p.uploads(b) || !p.tier.Load().loaded {
			continue
		}
		bytes, segs := p.uploadLag()
		lags = append(lags, lag{p: p, bytes: bytes, segments: segs})
		mw.sample("strata_upload_lag_bytes", partitionLabels(p.topic, p.id), float64(bytes))
	}
	mw.family("strata_upload_lag_segments", "gauge", "Sealed segments awaiting upload, by partition this broker leads.")
	for _, l := range lags {
		mw.sample("strata_upload_lag_segments", partitionLabels(l.p.topic, l.p.id), float64(l.segments))
	}
	mw.family("strata_upload_lag_seconds", "gauge", "How long the oldest acknowledged record not yet in the object store has waited for it (0: none waits), by partition this broker leads; remote.max.lag.ms bounds it while the store is reachable.")
	for _, l := range lags {
		if age, ok := l.p.uploadLagAge(l.p.now()); ok {
			mw.sample("strata_upload_lag_seconds", partitionLabels(l.p.topic, l.p.id), age.Seconds())
		}
	}
	b.writeStoreMetrics(mw, b.cold)
}

// writeStoreMetrics writes the object store's calls and the cold reader's
// cache: a writing broker's and a read replica's alike.
func (b *Broker) writeStoreMetrics(mw *metricsWriter, cold *tiering.ColdReader) {
	mw.family("strata_objstore_calls_total", "counter", "Object store calls by operation.")
	snap := b.storeMetrics.Snapshot()
	ops := make([]string, 0, len(snap))
	byName := map[string][4]int64{}
	for op, s := range snap {
		ops = append(ops, op.String())
		byName[op.String()] = [4]int64{s.Calls, s.Errors, s.BytesRead, s.BytesWritten}
	}
	sort.Strings(ops)
	for _, op := range ops {
		mw.sample("strata_objstore_calls_total", labels("op", op), float64(byName[op][0]))
	}
	mw.family("strata_objstore_errors_total", "counter", "Object store calls that failed, by operation.")
	for _, op := range ops {
		mw.sample("strata_objstore_errors_total", labels("op", op), float64(byName[op][1]))
	}
	var read, written int64
	for _, v := range byName {
		read += v[2]
		written += v[3]
	}
	mw.counter("strata_objstore_read_bytes_total", "Bytes read from the object store.", read)
	mw.counter("strata_objstore_written_bytes_total", "Bytes written to the object store.", written)
	if cold == nil {
		return
	}
	s := cold.Stats()
	mw.counter("strata_cold_chunk_hits_total", "Cold reads served from the chunk cache.", int64(s.ChunkHits))
	mw.counter("strata_cold_chunk_misses_total", "Cold reads that waited for a GET.", int64(s.ChunkMisses))
	mw.counter("strata_cold_gets_total", "Requests for object bytes sent by the cold reader.", int64(s.Gets))
	mw.counter("strata_cold_chunk_gets_total", "Ranged GETs of chunks, read-ahead included.", int64(s.ChunkGets))
	mw.counter("strata_cold_readahead_chunks_total", "Chunk GETs issued by read-ahead.", int64(s.ReadAheadChunks))
	mw.counter("strata_cold_fetched_bytes_total", "Chunk bytes fetched from the object store.", int64(s.BytesFetched))
	mw.gauge("strata_cold_cache_bytes", "Bytes held by the chunk cache.", s.CachedBytes)
	mw.counter("strata_cold_arena_reused_buffers_total", "Chunk buffers the cold reader recycled rather than allocated.", int64(s.ArenaReused))
	mw.counter("strata_cold_arena_heap_buffers_total", "Chunk buffers the cold reader allocated outside its arena, which was all in use.", int64(s.ArenaHeapBuffers))
	mw.gauge("strata_cold_arena_bytes", "Bytes of chunk buffers the cold reader's arena holds, in use and free.", s.ArenaBytes)
	if b.coldPace != nil {
		broker, topic, writers := b.coldPace.throttled()
		mw.family("strata_cold_read_throttle_seconds_total", "counter", "Time cold reads' GETs were held back by the broker's (tiering.cold_read_*_per_sec) and by topics' (remote.read.*.per.sec) limits, and by the yield to writers (tiering.cold_read_yield).")
		mw.sample("strata_cold_read_throttle_seconds_total", labels("limit", "broker"), broker.Seconds())
		mw.sample("strata_cold_read_throttle_seconds_total", labels("limit", "topic"), topic.Seconds())
		mw.sample("strata_cold_read_throttle_seconds_total", labels("limit", "writers"), writers.Seconds())
		if y := b.coldPace.yield; y != nil {
			st := y.state()
			mw.gauge("strata_cold_read_yield_bytes_per_second", "Bytes a second cold reads may fetch while they yield to writers; 0 when they do not.", int64(st.rate))
			mw.family("strata_cold_read_yield_produce_latency_seconds", "gauge", "Produce latency (over a tenth of a second, median and 99th percentile) the writers see without cold reads, as the yield to writers learned it; 0 before it has.")
			mw.sample("strata_cold_read_yield_produce_latency_seconds", labels("quantile", "0.5"), st.own[0].Seconds())
			mw.sample("strata_cold_read_yield_produce_latency_seconds", labels("quantile", "0.99"), st.own[1].Seconds())
		}
	}
}

// metricsWriter writes the text format: a family's HELP and TYPE lines,
// then its samples.
type metricsWriter struct {
	w io.Writer
}

func (m *metricsWriter) family(name, typ, help string) {
	fmt.Fprintf(m.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

// sample writes one sample; labels is "" or what labels returns.
func (m *metricsWriter) sample(name, labels string, v float64) {
	fmt.Fprintf(m.w, "%s%s %s\n", name, labels, formatFloat(v))
}

func (m *metricsWriter) gauge(name, help string, v int64) {
	m.family(name, "gauge", help)
	m.sample(name, "", float64(v))
}

func (m *metricsWriter) counter(name, help string, v int64) {
	m.family(name, "counter", help)
	m.sample(name, "", float64(v))
}

// labels renders name/value pairs as {a="x",b="y"}, values escaped as the
// format wants (backslash, double quote, line feed).
func labels(pairs ...string) string {
	var sb strings.Builder
	sb.WriteByte('{')
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(pairs[i])
		sb.WriteString(`="`)
		sb.WriteString(labelEscaper.Replace(pairs[i+1]))
		sb.WriteByte('"')
	}
	sb.WriteByte('}')
	return sb.String()
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func partitionLabels(topic string, partition int32) string {
	return labels("topic", topic, "partition", strconv.Itoa(int(partition)))
}

// formatFloat writes a value the shortest way that reads back exactly;
// whole numbers (most samples are counts) without an exponent.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	case v == math.Trunc(v) && math.Abs(v) < 1<<53:
		return strconv.FormatInt(int64(v), 10)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
