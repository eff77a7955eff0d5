package broker

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
)

// parseMetrics reads the text format back: sample name with labels ->
// value, and the declared type of each family. It fails on any line the
// format does not allow, so a writer that breaks the format fails here.
func parseMetrics(t *testing.T, text string) (samples map[string]float64, types map[string]string) {
	t.Helper()
	samples, types = map[string]float64{}, map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# HELP "):
			continue
		case strings.HasPrefix(line, "# TYPE "):
			f := strings.Fields(line)
			if len(f) != 4 {
				t.Fatalf("bad TYPE line %q", line)
			}
			types[f[2]] = f[3]
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad sample line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad value in %q: %v", line, err)
		}
		if _, dup := samples[line[:i]]; dup {
			t.Fatalf("sample %q written twice", line[:i])
		}
		samples[line[:i]] = v
	}
	return samples, types
}

// TestMetricsRequestCounters: the request counters written in the text
// format, with cumulative histogram buckets, bounded labels and escaping.
func TestMetricsRequestCounters(t *testing.T) {
	m := &RequestMetrics{known: func(topic string) bool { return topic == "orders" }}
	s := m.Produce("orders")
	for _, d := range []time.Duration{300 * time.Microsecond, 3 * time.Millisecond, 3 * time.Millisecond, time.Minute} {
		s.Request()
		s.Latency(d)
	}
	s.Sent(100)
	s.Sent(50)
	s.Failed("NOT_LEADER")
	m.Produce("typo").Failed("TOPIC_NOT_FOUND")
	m.Produce("another-typo").Failed("TOPIC_NOT_FOUND")
	f := m.Fetch("orders")
	f.Request()
	f.Sent(10)
	m.Denied(`User:a"b`)
	m.Denied(`User:a"b`)

	var buf bytes.Buffer
	m.write(&metricsWriter{w: &buf})
	got, types := parseMetrics(t, buf.String())
	for name, want := range map[string]float64{
		`strata_produce_requests_total{topic="orders"}`:                               4,
		`strata_produce_bytes_total{topic="orders"}`:                                  150,
		`strata_produce_errors_total{topic="orders",reason="NOT_LEADER"}`:             1,
		`strata_produce_errors_total{topic="(unknown)",reason="TOPIC_NOT_FOUND"}`:     2,
		`strata_produce_latency_seconds_bucket{topic="orders",le="0.0005"}`:           1,
		`strata_produce_latency_seconds_bucket{topic="orders",le="0.001"}`:            1,
		`strata_produce_latency_seconds_bucket{topic="orders",le="0.005"}`:            3,
		`strata_produce_latency_seconds_bucket{topic="orders",le="30"}`:               3,
		`strata_produce_latency_seconds_bucket{topic="orders",le="+Inf"}`:             4,
		`strata_produce_latency_seconds_count{topic="orders"}`:                        4,
		`strata_produce_latency_seconds_sum{topic="orders"}`:                          60.0063,
		`strata_fetch_requests_total{topic="orders"}`:                                 1,
		`strata_fetch_responses_total{topic="orders"}`:                                1,
		`strata_fetch_bytes_total{topic="orders"}`:                                    10,
		`strata_auth_denials_total{principal="User:a\"b"}`:                            2,
		`strata_fetch_latency_seconds_count{topic="orders"}`:                          0,
		`strata_produce_latency_seconds_bucket{topic="(unknown)",le="+Inf"}`:          0,
		`strata_produce_requests_total{topic="(unknown)"}`:                            0,
		`strata_fetch_latency_seconds_bucket{topic="orders",le="0.0005"}`:             0,
		`strata_produce_latency_seconds_bucket{topic="orders",le="2.5"}`:              3,
		`strata_produce_latency_seconds_bucket{topic="orders",le="0.0025"}`:           1,
		`strata_fetch_errors_total{topic="orders",reason="NOT_LEADER"}`:               -1, // absent
		`strata_produce_errors_total{topic="another-typo",reason="TOPIC_NOT_FOUND"}`:  -1, // absent
		`strata_produce_errors_total{topic="typo",reason="TOPIC_NOT_FOUND"}`:          -1, // absent
		`strata_produce_latency_seconds_bucket{topic="orders",le="0.0005",extra="x"}`: -1, // absent
	} {
		v, ok := got[name]
		switch {
		case want < 0 && ok:
			t.Errorf("%s = %v, want no such sample", name, v)
		case want >= 0 && !ok:
			t.Errorf("%s missing from:\n%s", name, buf.String())
		case want >= 0 && fmt.Sprintf("%.6f", v) != fmt.Sprintf("%.6f", want):
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	for name, want := range map[string]string{
		"strata_produce_latency_seconds": "histogram",
		"strata_fetch_latency_seconds":   "histogram",
		"strata_produce_requests_total":  "counter",
		"strata_auth_denials_total":      "counter",
	} {
		if types[name] != want {
			t.Errorf("type of %s = %q, want %q", name, types[name], want)
		}
	}
}

// TestMetricsForgetDeletedTopics: a topic gone from the metadata stops
// being reported; unknown topics keep their shared series.
func TestMetricsForgetDeletedTopics(t *testing.T) {
	exists := map[string]bool{"a": true, "b": true}
	m := &RequestMetrics{known: func(topic string) bool { return exists[topic] }}
	m.Produce("a").Request()
	m.Produce("b").Request()
	m.Fetch("nope").Request()
	delete(exists, "b")
	var buf bytes.Buffer
	m.write(&metricsWriter{w: &buf})
	got, _ := parseMetrics(t, buf.String())
	if _, ok := got[`strata_produce_requests_total{topic="a"}`]; !ok {
		t.Errorf("topic a missing:\n%s", buf.String())
	}
	if _, ok := got[`strata_produce_requests_total{topic="b"}`]; ok {
		t.Errorf("deleted topic b still reported:\n%s", buf.String())
	}
	if got[`strata_fetch_requests_total{topic="(unknown)"}`] != 1 {
		t.Errorf("unknown topic not counted:\n%s", buf.String())
	}
}

// TestMetricsDeniedPrincipalsBounded: past maxDeniedPrincipals, new
// principals share one series.
func TestMetricsDeniedPrincipalsBounded(t *testing.T) {
	m := &RequestMetrics{}
	for i := range maxDeniedPrincipals + 5 {
		m.Denied(fmt.Sprintf("User:%d", i))
	}
	m.Denied("User:0")
	var buf bytes.Buffer
	m.write(&metricsWriter{w: &buf})
	got, _ := parseMetrics(t, buf.String())
	if got[`strata_auth_denials_total{principal="(other)"}`] != 5 || got[`strata_auth_denials_total{principal="User:0"}`] != 2 {
		t.Fatalf("other %v, User:0 %v", got[`strata_auth_denials_total{principal="(other)"}`], got[`strata_auth_denials_total{principal="User:0"}`])
	}
	if n := strings.Count(buf.String(), "\nstrata_auth_denials_total{"); n != maxDeniedPrincipals+1 {
		t.Fatalf("%d denial series, want %d", n, maxDeniedPrincipals+1)
	}
}

func TestMetricsFormatFloat(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 3: "3", -2: "-2", 0.0005: "0.0005", 2.5: "2.5", 1e20: "1e+20"} {
		if got := formatFloat(v); got != want {
			t.Errorf("formatFloat(%v) = %q, want %q", v, got, want)
		}
	}
	if got := labels("a", "x\\y\n\"z\""); got != `{a="x\\y\n\"z\""}` {
		t.Errorf("labels escaping: %s", got)
	}
}

// TestMetricsThrottled: every limit's refusal series is written from the
// start, at 0; a fetch over its quota by more than maxQuotaDelay is
// refused THROTTLED through Broker.Fetch and counted under fetch_quota,
// and the other limits' counts go to their own series.
func TestMetricsThrottled(t *testing.T) {
	b := &Broker{limits: &limits{fetch: newQuota("quotas.fetch_bytes_per_sec", 1000)}}
	write := func() map[string]float64 {
		var buf bytes.Buffer
		b.writeThrottleMetrics(&metricsWriter{w: &buf})
		got, types := parseMetrics(t, buf.String())
		if types["strata_throttled_requests_total"] != "counter" || types["strata_fetch_quota_held_seconds_total"] != "counter" {
			t.Fatalf("types %v", types)
		}
		return got
	}
	got := write()
	for _, limit := range []string{"produce_quota", "fetch_quota", "upload_backlog"} {
		if v, ok := got[`strata_throttled_requests_total{limit="`+limit+`"}`]; !ok || v != 0 {
			t.Errorf("%s before any refusal: %v (present %v), want 0", limit, v, ok)
		}
	}
	if got["strata_fetch_quota_held_seconds_total"] != 0 {
		t.Errorf("held before any fetch: %v", got["strata_fetch_quota_held_seconds_total"])
	}

	ctx := t.Context()
	b.limits.chargeFetch(ctx, 5000) // 4 s over the quota
	if _, err := b.Fetch(ctx, FetchRequest{Topic: "orders"}); ReasonOf(err) != ReasonThrottled {
		t.Fatalf("fetch 4 s over quota: %v; want THROTTLED", err)
	}
	b.metrics.throttle(throttleUploadBacklog)
	b.metrics.throttle(throttleUploadBacklog)
	got = write()
	for limit, want := range map[string]float64{"produce_quota": 0, "fetch_quota": 1, "upload_backlog": 2} {
		if v := got[`strata_throttled_requests_total{limit="`+limit+`"}`]; v != want {
			t.Errorf("%s = %v, want %v", limit, v, want)
		}
	}
}

// TestMetricsGroupLag: group lag by partition (worst, sum, groups) and by
// group and topic, over the partitions this broker leads only; an offset
// past the high watermark lags by 0; label values are escaped.
func TestMetricsGroupLag(t *testing.T) {
	tp := func(topic string, p int32) cluster.TopicPartition {
		return cluster.TopicPartition{Topic: topic, Partition: p}
	}
	hws := map[cluster.TopicPartition]int64{tp("orders", 0): 10, tp("orders", 1): 20, tp("audit", 0): 5}
	hw := func(x cluster.TopicPartition) (int64, bool) { h, ok := hws[x]; return h, ok }
	offsets := map[string]map[cluster.TopicPartition]cluster.OffsetCommit{
		"billing": {tp("orders", 0): {Offset: 4}, tp("orders", 1): {Offset: 18}, tp("audit", 0): {Offset: 7}},
		`a"b`:     {tp("orders", 0): {Offset: 9}},
		// Not led here: no series.
		"shipping": {tp("orders", 2): {Offset: 0}},
	}
	var buf bytes.Buffer
	writeGroupLags(&metricsWriter{w: &buf}, groupLags(offsets, hw))
	got, types := parseMetrics(t, buf.String())
	want := map[string]float64{
		`strata_group_lag_max_records{topic="audit",partition="0"}`:  0,
		`strata_group_lag_max_records{topic="orders",partition="0"}`: 6,
		`strata_group_lag_max_records{topic="orders",partition="1"}`: 2,
		`strata_group_lag_sum_records{topic="audit",partition="0"}`:  0,
		`strata_group_lag_sum_records{topic="orders",partition="0"}`: 7,
		`strata_group_lag_sum_records{topic="orders",partition="1"}`: 2,
		`strata_group_committed{topic="audit",partition="0"}`:        1,
		`strata_group_committed{topic="orders",partition="0"}`:       2,
		`strata_group_committed{topic="orders",partition="1"}`:       1,
		`strata_group_lag_records{group="a\"b",topic="orders"}`:      1,
		`strata_group_lag_records{group="billing",topic="audit"}`:    0,
		`strata_group_lag_records{group="billing",topic="orders"}`:   8,
	}
	if len(got) != len(want) {
		t.Errorf("%d samples, want %d:\n%s", len(got), len(want), buf.String())
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
	if types["strata_group_lag_records"] != "gauge" {
		t.Errorf("strata_group_lag_records is a %q", types["strata_group_lag_records"])
	}
	// Nothing led: every family declared, no samples.
	buf.Reset()
	writeGroupLags(&metricsWriter{w: &buf}, groupLags(offsets, func(cluster.TopicPartition) (int64, bool) { return 0, false }))
	if got, types := parseMetrics(t, buf.String()); len(got) != 0 || len(types) != 4 {
		t.Errorf("nothing led: %d samples, %d families:\n%s", len(got), len(types), buf.String())
	}
}
