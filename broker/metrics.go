package broker

import (
	"fmt"
	"io"
	"sort"
)

// WriteMetrics writes the broker's counters in the Prometheus text format,
// for the admin endpoint: partitions and their logs, the cold tier's
// backlog, object store calls, and the cold reader's cache.
func (b *Broker) WriteMetrics(w io.Writer) {
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
	gauge(w, "strata_partitions", "Partition replicas this broker holds.", int64(len(parts)))
	gauge(w, "strata_partitions_led", "Partitions this broker leads.", int64(leaders))
	gauge(w, "strata_local_bytes", "Bytes of segments on local disk.", localBytes)
	if b.store == nil {
		return
	}
	gauge(w, "strata_upload_backlog_bytes", "Sealed bytes awaiting upload to the object store.", b.unuploaded.Load())
	fmt.Fprintln(w, "# HELP strata_objstore_calls_total Object store calls by operation.")
	fmt.Fprintln(w, "# TYPE strata_objstore_calls_total counter")
	snap := b.storeMetrics.Snapshot()
	ops := make([]string, 0, len(snap))
	byName := map[string][4]int64{}
	for op, s := range snap {
		ops = append(ops, op.String())
		byName[op.String()] = [4]int64{s.Calls, s.Errors, s.BytesRead, s.BytesWritten}
	}
	sort.Strings(ops)
	for _, op := range ops {
		fmt.Fprintf(w, "strata_objstore_calls_total{op=%q} %d\n", op, byName[op][0])
	}
	fmt.Fprintln(w, "# HELP strata_objstore_errors_total Object store calls that failed, by operation.")
	fmt.Fprintln(w, "# TYPE strata_objstore_errors_total counter")
	for _, op := range ops {
		fmt.Fprintf(w, "strata_objstore_errors_total{op=%q} %d\n", op, byName[op][1])
	}
	var read, written int64
	for _, v := range byName {
		read += v[2]
		written += v[3]
	}
	counter(w, "strata_objstore_read_bytes_total", "Bytes read from the object store.", read)
	counter(w, "strata_objstore_written_bytes_total", "Bytes written to the object store.", written)
	if b.cold == nil {
		return
	}
	s := b.cold.Stats()
	counter(w, "strata_cold_chunk_hits_total", "Cold reads served from the chunk cache.", int64(s.ChunkHits))
	counter(w, "strata_cold_chunk_misses_total", "Cold reads that waited for a GET.", int64(s.ChunkMisses))
	counter(w, "strata_cold_gets_total", "Requests for object bytes sent by the cold reader.", int64(s.Gets))
	counter(w, "strata_cold_chunk_gets_total", "Ranged GETs of chunks, read-ahead included.", int64(s.ChunkGets))
	counter(w, "strata_cold_readahead_chunks_total", "Chunk GETs issued by read-ahead.", int64(s.ReadAheadChunks))
	counter(w, "strata_cold_fetched_bytes_total", "Chunk bytes fetched from the object store.", int64(s.BytesFetched))
	gauge(w, "strata_cold_cache_bytes", "Bytes held by the chunk cache.", s.CachedBytes)
}

func gauge(w io.Writer, name, help string, v int64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s gauge\n%s %d\n", name, help, name, name, v)
}

func counter(w io.Writer, name, help string, v int64) {
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
}
