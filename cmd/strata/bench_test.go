package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/kafka"
	"github.com/strata-log/strata/record"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestBenchLatenciesError records known samples and checks that every
// percentile the histogram reports is within its bound (3 significant
// figures: 0.1%, plus the 1 µs floor) of the exact one.
func TestBenchLatenciesError(t *testing.T) {
	l := newLatencies()
	// 1 µs .. 100 ms in a spread of magnitudes: sample i is i*i µs.
	const n = 10_000
	var exact []time.Duration
	for i := 1; i <= n; i++ {
		d := time.Duration(i*i) * time.Microsecond
		exact = append(exact, d)
		l.record(d)
	}
	s := l.summary()
	if s.Count != n {
		t.Fatalf("count %d, want %d", s.Count, n)
	}
	check := func(name string, p, got float64) {
		t.Helper()
		want := float64(exact[int(p/100*n+0.5)-1]) / float64(time.Millisecond)
		if rel := (got - want) / want; rel < -0.001 || rel > 0.001 {
			t.Errorf("%s: %.6f ms, exact %.6f ms: relative error %.5f over 0.1%%", name, got, want, rel)
		}
	}
	check("p50", 50, s.P50)
	check("p99", 99, s.P99)
	check("p99.9", 99.9, s.P999)
	if want := float64(exact[n-1]) / float64(time.Millisecond); s.Max != want {
		t.Errorf("max %v ms, want exactly %v", s.Max, want)
	}
	var sum float64
	for _, d := range exact {
		sum += float64(d)
	}
	if mean := sum / n / float64(time.Millisecond); (s.Mean-mean)/mean > 0.001 || (mean-s.Mean)/mean > 0.001 {
		t.Errorf("mean %v ms, exact %v", s.Mean, mean)
	}
}

// benchJSON runs a bench command and decodes its JSON summary.
func benchJSON(t *testing.T, args ...string) benchSummary {
	t.Helper()
	out := mustStrataCmd(t, append(args, "--json")...)
	var s benchSummary
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		t.Fatalf("decode %q: %v", out, err)
	}
	return s
}

// checkOpenLoop checks what an open-loop run reports: every record, paced
// at the rate, percentiles ordered and positive.
func checkOpenLoop(t *testing.T, s benchSummary, bench, latencyOf string, records int64, rate float64) {
	t.Helper()
	if s.Bench != bench || s.LatencyOf != latencyOf || s.Rate != rate || s.Late == nil {
		t.Errorf("bench %q latency_of %q rate %v late %v, want %q %q %v and a late count", s.Bench, s.LatencyOf, s.Rate, s.Late, bench, latencyOf, rate)
	}
	if s.Records != records || s.Latency.Count != records || s.Errors != 0 {
		t.Errorf("records %d, latency count %d, errors %d (%s): want %d, %d, 0", s.Records, s.Latency.Count, s.Errors, s.FirstError, records, records)
	}
	// The last record is due at (records-1)/rate: a run cannot end sooner.
	if minSec := float64(records-1)/rate - 0.005; s.ElapsedSec < minSec {
		t.Errorf("elapsed %.3f s, want at least %.3f s: the schedule was not kept", s.ElapsedSec, minSec)
	}
	l := s.Latency
	if !(l.P50 > 0 && l.P50 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max && l.Mean > 0 && l.Mean <= l.Max) {
		t.Errorf("latency percentiles not ordered and positive: %+v", l)
	}
	if s.RecordsPerS <= 0 || s.MBPerS <= 0 {
		t.Errorf("records/s %v, MB/s %v", s.RecordsPerS, s.MBPerS)
	}
	t.Logf("%s: %+v late %d", bench, l, *s.Late)
}

func TestBenchProduceRate(t *testing.T) {
	addr := startACLBroker(t)
	s := benchJSON(t, "bench", "produce", "--broker", addr, "--topic", "paced", "--create",
		"--rate", "2000", "--records", "2000", "--record-size", "100")
	checkOpenLoop(t, s, "produce", "scheduled send to acknowledgement", 2000, 2000)

	// --warmup: every record is produced, the latency of those scheduled
	// in the first half second is left out.
	s = benchJSON(t, "bench", "produce", "--broker", addr, "--topic", "paced",
		"--rate", "2000", "--records", "2000", "--record-size", "100", "--warmup", "500ms")
	if s.Records != 2000 || s.Latency.Count != 1000 || s.Errors != 0 {
		t.Errorf("with --warmup 500ms: records %d, latency count %d, errors %d; want 2000, the 1000 due from 0.5 s on, 0", s.Records, s.Latency.Count, s.Errors)
	}
	if s.LatencyOf != "scheduled send to acknowledgement, after a 500ms warm-up" || s.Settings["warmup"] != "500ms" {
		t.Errorf("with --warmup 500ms: latency_of %q, settings %v", s.LatencyOf, s.Settings)
	}

	// Flood mode is unchanged: no rate, no late count.
	s = benchJSON(t, "bench", "produce", "--broker", addr, "--topic", "paced", "--records", "100")
	if s.Rate != 0 || s.Late != nil || s.Records != 100 || s.LatencyOf != "per record, Produce call to acknowledgement" {
		t.Errorf("flood: %+v", s)
	}
}

// TestBenchProduceSync: --sync sends every record alone and waits for its
// acknowledgement; a linger of an hour does not hold a record back, so the
// run ends in the time of its round trips.
func TestBenchProduceSync(t *testing.T) {
	addr := startACLBroker(t)
	start := time.Now()
	s := benchJSON(t, "bench", "produce", "--broker", addr, "--topic", "sync", "--create",
		"--sync", "--linger", "1h", "--records", "200", "--record-size", "100")
	if took := time.Since(start); took > time.Minute {
		t.Errorf("200 records took %s: --sync waited for the linger", took)
	}
	if s.Records != 200 || s.Latency.Count != 200 || s.Errors != 0 || s.Bytes != 200*100 {
		t.Errorf("records %d, latency count %d, errors %d (%s), bytes %d: want 200, 200, 0, 20000",
			s.Records, s.Latency.Count, s.Errors, s.FirstError, s.Bytes)
	}
	if s.LatencyOf != "per record, sent alone: Produce call to acknowledgement" || s.Settings["sync"] != true {
		t.Errorf("latency_of %q, settings %v: want a sync run", s.LatencyOf, s.Settings)
	}
	// One record at a time: the records' latencies do not overlap, so
	// they sum to no more than the run (5% for the histogram's rounding).
	// Records queued behind a batch in flight would each count its wait.
	if sum := s.Latency.Mean * float64(s.Latency.Count); sum > s.ElapsedSec*1000*1.05+1 {
		t.Errorf("latencies sum to %.1f ms in a run of %.3f s: records overlapped", sum, s.ElapsedSec)
	}
}

func TestBenchE2E(t *testing.T) {
	addr := startACLBroker(t)
	s := benchJSON(t, "bench", "e2e", "--broker", addr, "--topic", "e2e", "--create", "--partitions", "2",
		"--rate", "1000", "--records", "1000")
	checkOpenLoop(t, s, "e2e", "scheduled send to consumption", 1000, 1000)
	if s.Settings["acks"] != "all" || s.Settings["record_size"] != float64(1024) {
		t.Errorf("settings %v: want acks all and 1 KiB records by default", s.Settings)
	}
	if s.Bytes != 1000*1024 {
		t.Errorf("bytes %d, want %d", s.Bytes, 1000*1024)
	}
	// --duration instead of --records, --size for --record-size; the
	// records of the first run, already in the topic, are not counted.
	s = benchJSON(t, "bench", "e2e", "--broker", addr, "--topic", "e2e",
		"--rate", "500", "--duration", "200ms", "--size", "10")
	checkOpenLoop(t, s, "e2e", "scheduled send to consumption", 100, 500)

	// --warmup: the records due in the first 250 ms are consumed but not
	// measured.
	s = benchJSON(t, "bench", "e2e", "--broker", addr, "--topic", "e2e",
		"--rate", "1000", "--records", "1000", "--size", "10", "--warmup", "250ms")
	if s.Records != 1000 || s.Latency.Count != 750 || s.LatencyOf != "scheduled send to consumption, after a 250ms warm-up" {
		t.Errorf("with --warmup 250ms: records %d, latency count %d, latency_of %q; want 1000, 750 and the warm-up named", s.Records, s.Latency.Count, s.LatencyOf)
	}
}

// TestBenchBadFlags: flag mistakes are explained before any broker is
// contacted.
func TestBenchBadFlags(t *testing.T) {
	nowhere := "127.0.0.1:1"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"produce", "--topic", "t", "--rate", "-1"}, "--rate -1: want records per second"},
		{[]string{"produce", "--topic", "t", "--rate", "100", "--sync"}, "--sync and --rate: give one"},
		{[]string{"produce", "--topic", "t", "--warmup", "1s"}, "--warmup needs --rate"},
		{[]string{"produce", "--topic", "t", "--rate", "100", "--warmup", "-1s"}, "cannot be negative"},
		{[]string{"produce", "--topic", "t", "--rate", "100", "--records", "10", "--warmup", "1s"}, "no latency would be left"},
		{[]string{"e2e", "--topic", "t", "--rate", "100", "--duration", "2s", "--warmup", "3s"}, "no latency would be left"},
		{[]string{"produce", "--topic", "t", "--kafka", "127.0.0.1:1", "--in-flight", "3"}, "--in-flight 3 with --kafka needs --acks leader or none"},
		// Without --rate (or with 0) e2e runs 50 MiB/s of --size records.
		{[]string{"e2e", "--topic", "t", "--rate", "-1", "--records", "10"}, "--rate -1: want records per second above 0"},
		{[]string{"e2e", "--topic", "t", "--rate", "100"}, "give --records N or --duration D"},
		{[]string{"e2e", "--topic", "t", "--rate", "100", "--records", "-5"}, "--records -5: want at least 1"},
		{[]string{"e2e", "--topic", "t", "--rate", "100", "--records", "5", "--acks", "some"}, "acks"},
		{[]string{"e2e", "--topic", "t", "--rate", "100", "--records", "5", "--size", "-1"}, "--record-size -1"},
	} {
		out, err := strataCmd(t, append(append([]string{"bench"}, tc.args...), "--broker", nowhere)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("bench %s: error %v, want one saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
		if out != "" {
			t.Errorf("bench %s printed %q", strings.Join(tc.args, " "), out)
		}
	}
}

// TestBenchKafka: with --kafka, bench produce and consume move the records
// through the Kafka listener, and what one front end wrote the other reads.
func TestBenchKafka(t *testing.T) {
	cfg := testBrokerConfig(t)
	cfg.ObjectStore.Type = config.ObjectStoreNone
	b, srv := startInProcess(t, cfg)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kafka.NewServer(b, kafka.Config{Advertise: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	go ks.Serve(lis)
	t.Cleanup(func() {
		ks.Close()
		srv.GracefulStop()
		if err := b.Close(); err != nil {
			t.Errorf("close broker: %v", err)
		}
	})
	kafkaAddr := lis.Addr().String()

	s := benchJSON(t, "bench", "produce", "--broker", cfg.Listen, "--kafka", kafkaAddr, "--topic", "kb", "--create",
		"--partitions", "3", "--records", "3000", "--record-size", "100", "--acks", "all")
	if s.Records != 3000 || s.Errors != 0 || s.Bytes != 300_000 || s.Settings["front_end"] != "kafka "+kafkaAddr {
		t.Fatalf("kafka produce: %+v", s)
	}
	s = benchJSON(t, "bench", "produce", "--broker", cfg.Listen, "--topic", "kb", "--records", "2000", "--record-size", "100")
	if s.Records != 2000 || s.Settings["front_end"] != "grpc" {
		t.Fatalf("grpc produce: %+v", s)
	}
	for _, args := range [][]string{{"--kafka", kafkaAddr}, {}} {
		s = benchJSON(t, append([]string{"bench", "consume", "--broker", cfg.Listen, "--topic", "kb"}, args...)...)
		if s.Records != 5000 || s.Bytes != 500_000 || s.Errors != 0 {
			t.Errorf("consume %v: %+v, want all 5000 records of both front ends", args, s)
		}
	}
	s = benchJSON(t, "bench", "consume", "--broker", cfg.Listen, "--topic", "kb", "--kafka", kafkaAddr, "--records", "1234")
	if s.Records != 1234 || s.Bytes != 123_400 {
		t.Errorf("consume --records 1234 --kafka: %+v", s)
	}
}

// The bench's Kafka client bounds its produce requests to two batches (at
// least 1 MiB): left at franz-go's 100 MiB, a request spread over many
// partitions grew to tens of MB.
func TestBenchKafkaRequestBytes(t *testing.T) {
	for _, c := range []struct{ batch, want int64 }{
		{1 << 20, 2 << 20},
		{16 << 10, 1 << 20},
		{1 << 30, 1 << 30},
	} {
		if got := kafkaRequestBytes(c.batch); int64(got) != c.want {
			t.Errorf("batch %d: request bound %d, want %d", c.batch, got, c.want)
		}
	}
	o := &benchProduceOptions{kafka: "127.0.0.1:1", topic: "t", linger: time.Millisecond, inFlight: 1}
	p, err := o.newKafkaProducer(&clientFlags{timeout: time.Second}, stratav1.Acks_ACKS_ALL, record.CompressionNone, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	if v := p.cl.OptValue(kgo.BrokerMaxWriteBytes); v != int32(2<<20) {
		t.Fatalf("client's BrokerMaxWriteBytes %v, want %d", v, 2<<20)
	}
}
