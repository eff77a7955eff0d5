package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// benchJSON is the part of `strata bench ... --json` the test checks.
type benchJSON struct {
	Bench       string
	Topic       string
	Records     int64
	Bytes       int64
	ElapsedS    float64 `json:"elapsed_s"`
	RecordsPerS float64 `json:"records_per_s"`
	MBPerS      float64 `json:"mb_per_s"`
	Errors      int64
	Latency     struct {
		Count int64
		P50   float64
		P99   float64
		P999  float64 `json:"p99_9"`
		Max   float64
	} `json:"latency_ms"`
}

func decodeBench(t *testing.T, out string) benchJSON {
	t.Helper()
	var s benchJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Fatalf("bench --json output is not one JSON object (%v):\n%s", err, out)
	}
	return s
}

func checkBench(t *testing.T, s benchJSON, bench string, records, bytes int64) {
	t.Helper()
	if s.Bench != bench || s.Topic != "bench" || s.Records != records || s.Bytes != bytes || s.Errors != 0 {
		t.Errorf("bench %s: %+v, want %d records, %d bytes, no errors", bench, s, records, bytes)
	}
	if s.ElapsedS <= 0 || s.RecordsPerS <= 0 || s.MBPerS <= 0 {
		t.Errorf("bench %s: elapsed %v s, %v records/s, %v MB/s: want positive", bench, s.ElapsedS, s.RecordsPerS, s.MBPerS)
	}
	l := s.Latency
	if l.Count <= 0 || l.P50 <= 0 || l.P50 > l.P99 || l.P99 > l.P999 || l.P999 > l.Max {
		t.Errorf("bench %s: latency %+v: want 0 < p50 <= p99 <= p99.9 <= max", bench, l)
	}
}

func TestBenchSmoke(t *testing.T) {
	b := newBroker(t, 1)
	b.start()

	res := strata(t, b, "", "bench", "produce", "--topic", "bench", "--records", "20000", "--record-size", "100",
		"--create", "--partitions", "2", "--json")
	if res.code != 0 {
		t.Fatalf("bench produce: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	p := decodeBench(t, res.stdout)
	checkBench(t, p, "produce", 20000, 2_000_000)
	if p.Latency.Count != 20000 {
		t.Errorf("bench produce: %d latencies, want one per record", p.Latency.Count)
	}

	res = strata(t, b, "", "bench", "consume", "--topic", "bench", "--json")
	if res.code != 0 {
		t.Fatalf("bench consume: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	checkBench(t, decodeBench(t, res.stdout), "consume", 20000, 2_000_000)

	// The text summary names what it measures.
	out := mustStrata(t, b, "", "bench", "consume", "--topic", "bench", "--records", "500")
	for _, want := range []string{"records     500", "records/s", "MB/s (payload bytes / 1e6 / s)", "p99.9"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench consume summary lacks %q:\n%s", want, out)
		}
	}
}
