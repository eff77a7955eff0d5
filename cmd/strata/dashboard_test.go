package main

// The Grafana dashboard (deploy/grafana) against a real broker's /metrics:
// every metric a panel or a templating variable names must be a family
// the broker declares. The metric names come out of the PromQL by a small
// tokenizer, tested on its own, so that a name the dashboard misspells or
// a metric the broker drops fails here rather than as an empty panel.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/kafka"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// dashboardPath is the Grafana dashboard shipped with the repository.
const dashboardPath = "../../deploy/grafana/strata-dashboard.json"

// dashboardQuery is one PromQL expression of the dashboard: a panel's
// target or a templating variable's query, and where it is.
type dashboardQuery struct {
	where string
	expr  string
}

// dashboardQueries returns the dashboard's PromQL, and what is wrong with
// its structure: panel ids used twice, panels without queries, queries
// without an expression or with a datasource other than the ${datasource}
// variable, variables whose query is not one whose metrics can be read.
func dashboardQueries(raw []byte) ([]dashboardQuery, []string, error) {
	var dash struct {
		Title      string           `json:"title"`
		UID        string           `json:"uid"`
		Panels     []map[string]any `json:"panels"`
		Templating struct {
			List []map[string]any `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		return nil, nil, err
	}
	var qs []dashboardQuery
	var problems []string
	if dash.Title == "" || dash.UID == "" {
		problems = append(problems, fmt.Sprintf("dashboard title %q, uid %q", dash.Title, dash.UID))
	}
	viaVariable := func(ds any) bool {
		m, _ := ds.(map[string]any)
		return m["type"] == "prometheus" && m["uid"] == "${datasource}"
	}
	ids := map[float64]bool{}
	var walk func([]map[string]any)
	walk = func(panels []map[string]any) {
		for _, p := range panels {
			id, _ := p["id"].(float64)
			if ids[id] {
				problems = append(problems, fmt.Sprintf("panel id %v used twice", id))
			}
			ids[id] = true
			where := fmt.Sprintf("panel %q", p["title"])
			if p["type"] == "row" {
				nested, _ := json.Marshal(p["panels"]) // a collapsed row holds its panels
				var inner []map[string]any
				_ = json.Unmarshal(nested, &inner)
				walk(inner)
				continue
			}
			if !viaVariable(p["datasource"]) {
				problems = append(problems, where+" does not use the ${datasource} variable")
			}
			targets, _ := p["targets"].([]any)
			if len(targets) == 0 {
				problems = append(problems, where+" has no queries")
			}
			for _, tg := range targets {
				m, _ := tg.(map[string]any)
				expr, _ := m["expr"].(string)
				if expr == "" {
					problems = append(problems, where+" has a query without an expression")
					continue
				}
				if !viaVariable(m["datasource"]) {
					problems = append(problems, where+" has a query that does not use the ${datasource} variable")
				}
				qs = append(qs, dashboardQuery{where, expr})
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v["type"] != "query" {
			continue
		}
		where := fmt.Sprintf("variable %q", v["name"])
		q, _ := v["query"].(string)
		if m, ok := v["query"].(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		expr, err := variableExpr(q)
		if err != nil {
			problems = append(problems, where+": "+err.Error())
			continue
		}
		qs = append(qs, dashboardQuery{where, expr})
	}
	return qs, problems, nil
}

// variableExpr is the PromQL inside a templating variable's query: what
// label_values(selector, label) and query_result(expr) select from.
func variableExpr(q string) (string, error) {
	q = strings.TrimSpace(q)
	if inner, ok := strings.CutPrefix(q, "query_result("); ok && strings.HasSuffix(inner, ")") {
		return strings.TrimSuffix(inner, ")"), nil
	}
	if inner, ok := strings.CutPrefix(q, "label_values("); ok && strings.HasSuffix(inner, ")") {
		inner = strings.TrimSuffix(inner, ")")
		if i := strings.LastIndexByte(inner, ','); i > 0 && !strings.ContainsAny(inner[i:], "}\"") {
			return inner[:i], nil
		}
		return "", fmt.Errorf("%q names no metric: label_values over every series", q)
	}
	return "", fmt.Errorf("%q: only label_values(metric, label) and query_result(expr) are checked", q)
}

// promKeywords are PromQL words that are not metric names: aggregation
// operators (which may come before their by/without clause rather than a
// parenthesis), set and comparison modifiers, and number words.
var promKeywords = map[string]bool{
	"sum": true, "avg": true, "count": true, "min": true, "max": true, "group": true, "stddev": true,
	"stdvar": true, "topk": true, "bottomk": true, "quantile": true, "count_values": true,
	"limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"inf": true, "nan": true,
}

// promLabelLists are the PromQL words followed by a list of label names.
var promLabelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// promMetricNames returns the metric names a PromQL expression reads, in
// order of first use: identifiers that are neither functions (followed by
// a parenthesis), keywords, label names (inside {} or a by/without/on/
// ignoring/group_left/group_right list), durations, nor Grafana's
// $variables; plus names given as {__name__="..."}.
func promMetricNames(expr string) ([]string, error) {
	var names []string
	add := func(n string) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	// skipString returns the index after the string starting at i.
	skipString := func(i int) (int, error) {
		q := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch {
			case expr[j] == '\\' && q != '`':
				j++
			case expr[j] == q:
				return j + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated string at %d in %q", i, expr)
	}
	// skipGroup returns the index after the bracket matching expr[i],
	// skipping strings inside.
	skipGroup := func(i int) (int, error) {
		open, depth := expr[i], 0
		closing := map[byte]byte{'(': ')', '[': ']', '{': '}'}[open]
		for j := i; j < len(expr); j++ {
			switch c := expr[j]; {
			case c == '"' || c == '\'' || c == '`':
				end, err := skipString(j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case c == open:
				depth++
			case c == closing:
				if depth--; depth == 0 {
					return j + 1, nil
				}
			}
		}
		return 0, fmt.Errorf("unclosed %c at %d in %q", open, i, expr)
	}
	nameMatcher := regexp.MustCompile(`__name__\s*=\s*"([^"]*)"`)
	nextNonSpace := func(i int) int {
		for i < len(expr) && strings.ContainsRune(" \t\r\n", rune(expr[i])) {
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '#': // a comment, to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '{' || c == '[':
			end, err := skipGroup(i)
			if err != nil {
				return nil, err
			}
			if c == '{' {
				for _, m := range nameMatcher.FindAllStringSubmatch(expr[i:end], -1) {
					add(m[1])
				}
			}
			i = end
		case c == '$': // a Grafana variable: $name or ${name}
			i++
			if i < len(expr) && expr[i] == '{' {
				end, err := skipGroup(i)
				if err != nil {
					return nil, err
				}
				i = end
			}
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9':
			// A number or a duration: 0.99, 1e3, 0x1f, 5m, 1h30m.
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := nextNonSpace(i)
			switch lower := strings.ToLower(word); {
			case promLabelLists[lower]:
				if next < len(expr) && expr[next] == '(' {
					end, err := skipGroup(next)
					if err != nil {
						return nil, err
					}
					i = end
				}
			case promKeywords[lower]:
			case next < len(expr) && expr[next] == '(': // a function
			default:
				add(word)
			}
		default: // operators, parentheses, commas, spaces
			i++
		}
	}
	return names, nil
}

// histogramSuffixes are the series names a histogram family's samples take.
var histogramSuffixes = []string{"_bucket", "_sum", "_count"}

// metricFamily is the family a series name belongs to, given the declared
// families (name -> type): a histogram's _bucket, _sum and _count are
// their histogram's; any other name is its own.
func metricFamily(name string, families map[string]string) string {
	for _, suffix := range histogramSuffixes {
		if base, ok := strings.CutSuffix(name, suffix); ok && families[base] == "histogram" {
			return base
		}
	}
	return name
}

// undeclaredMetrics returns, for each query, the metrics it names that are
// not a family of families, as "where: name" lines.
func undeclaredMetrics(qs []dashboardQuery, families map[string]string) ([]string, error) {
	var out []string
	for _, q := range qs {
		names, err := promMetricNames(q.expr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", q.where, err)
		}
		if len(names) == 0 {
			out = append(out, fmt.Sprintf("%s: %q names no metric", q.where, q.expr))
		}
		for _, n := range names {
			if _, ok := families[metricFamily(n, families)]; !ok {
				out = append(out, fmt.Sprintf("%s: %s", q.where, n))
			}
		}
	}
	return out, nil
}

// parseExposition reads a /metrics body: the declared families (# TYPE
// lines: name -> type) and the families that have samples.
func parseExposition(body string) (families map[string]string, sampled map[string]bool) {
	families, sampled = map[string]string{}, map[string]bool{}
	var names []string
	for _, line := range strings.Split(body, "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if fs := strings.Fields(f); len(fs) == 2 {
				families[fs[0]] = fs[1]
			}
		} else if line != "" && !strings.HasPrefix(line, "#") {
			name, _, _ := strings.Cut(line, "{")
			name, _, _ = strings.Cut(name, " ")
			names = append(names, name)
		}
	}
	for _, n := range names {
		sampled[metricFamily(n, families)] = true
	}
	return families, sampled
}

// TestPromMetricNames: the tokenizer finds metric names and only them.
func TestPromMetricNames(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum(strata_under_replicated_partitions)`: {"strata_under_replicated_partitions"},
		`sum by (le, topic) (rate(strata_produce_latency_seconds_bucket{instance=~"$instance"}[$__rate_interval]))`: {"strata_produce_latency_seconds_bucket"},
		`histogram_quantile(0.99, sum without (instance) (rate(a_bucket[5m])))`:                                     {"a_bucket"},
		`max by (instance) (a{x="b c"} - on (instance) group_left (state) b) == 1`:                                  {"a", "b"},
		`a / ignoring(topic) b and c unless d or e offset 5m`:                                                       {"a", "b", "c", "d", "e"},
		`topk(10, max by (topic) (x)) > bool 0.5e3`:                                                                 {"x"},
		`count_values("v", a) + quantile(0.5, b) + {__name__="c", le="1"} + a`:                                      {"a", "b", "c"},
		`sum(rate(x{l='}'}[1h:5m])) # a comment naming not_a_metric`:                                                {"x"},
		`label_replace(y, "dst", "$1", "src", "(.*)") * Inf + NaN`:                                                  {"y"},
		`sum by (group) (x) / max(x) by (topic)`:                                                                    {"x"},
		`${var} + 1`:                                                                                                nil,
	} {
		got, err := promMetricNames(expr)
		if err != nil {
			t.Errorf("%s: %v", expr, err)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", expr, got, want)
		}
	}
	for _, bad := range []string{`x{a="b}`, `rate(x[5m)`, `"open`} {
		if _, err := promMetricNames(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	for q, want := range map[string]string{
		"label_values(strata_partitions, instance)":      "strata_partitions",
		`label_values(x{a="b,c"}, topic)`:                `x{a="b,c"}`,
		"query_result(topk(5, strata_upload_lag_bytes))": "topk(5, strata_upload_lag_bytes)",
		"label_values(instance)":                         "",
		"metrics(strata_.*)":                             "",
	} {
		got, err := variableExpr(q)
		if got != want || (err == nil) != (want != "") {
			t.Errorf("variableExpr(%q) = %q, %v; want %q", q, got, err, want)
		}
	}
}

// TestDashboardCheckFindsUnknownMetrics: a copy of the shipped dashboard
// with a misspelled metric in a panel, and one in a variable, fails the
// check, naming both and only them; the shipped one passes against the
// families it names itself.
func TestDashboardCheckFindsUnknownMetrics(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	qs, problems, err := dashboardQueries(raw)
	if err != nil || len(problems) > 0 {
		t.Fatalf("%s: %v %q", dashboardPath, err, problems)
	}
	families := map[string]string{}
	for _, q := range qs {
		names, err := promMetricNames(q.expr)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			if base, ok := strings.CutSuffix(n, "_bucket"); ok {
				families[base] = "histogram"
			} else {
				families[n] = "gauge"
			}
		}
	}
	if missing, err := undeclaredMetrics(qs, families); err != nil || len(missing) > 0 {
		t.Fatalf("the shipped dashboard against its own names: %v %q", err, missing)
	}

	var dash map[string]any
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	panels := dash["panels"].([]any)
	bogus := map[string]any{"id": 9999, "type": "timeseries", "title": "Bogus",
		"datasource": map[string]any{"type": "prometheus", "uid": "${datasource}"},
		"targets": []any{map[string]any{"refId": "A", "datasource": map[string]any{"type": "prometheus", "uid": "${datasource}"},
			"expr": `sum by (topic) (rate(strata_produce_bytes_totl{instance=~"$instance"}[$__rate_interval])) / sum(strata_partitions)`}}}
	dash["panels"] = append(panels, bogus)
	vars := dash["templating"].(map[string]any)["list"].([]any)
	dash["templating"].(map[string]any)["list"] = append(vars, map[string]any{"name": "topic", "type": "query",
		"query": map[string]any{"query": "label_values(strata_topic_info, topic)"}})
	edited, err := json.Marshal(dash)
	if err != nil {
		t.Fatal(err)
	}
	qs, problems, err = dashboardQueries(edited)
	if err != nil || len(problems) > 0 {
		t.Fatalf("edited copy: %v %q", err, problems)
	}
	missing, err := undeclaredMetrics(qs, families)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`panel "Bogus": strata_produce_bytes_totl`, `variable "topic": strata_topic_info`}
	if !slices.Equal(missing, want) {
		t.Fatalf("missing %q, want %q", missing, want)
	}

	// Structure: a panel id used twice and a panel on a fixed datasource.
	bogus["id"] = panels[1].(map[string]any)["id"]
	bogus["datasource"] = map[string]any{"type": "prometheus", "uid": "abc"}
	edited, _ = json.Marshal(dash)
	if _, problems, _ = dashboardQueries(edited); len(problems) != 2 {
		t.Fatalf("problems %q, want a duplicate id and a fixed datasource", problems)
	}
}

// sampleFree are the dashboard's metrics that may have no sample after the
// traffic of a single plaintext broker (the family is declared all the
// same), and why.
var sampleFree = map[string]string{
	"strata_auth_denials_total":      "needs authentication",
	"strata_replication_lag_records": "needs a follower",
	"strata_kafka_errors_total":      "needs a Kafka error code in an answer, which the traffic makes only by chance (a group join's retry)",
}

// TestDashboardMetricsExist: every metric the Grafana dashboard's queries
// (panels and variables) name is a family a real broker's /metrics
// declares, and, after gRPC and Kafka produce and fetch, a committed
// offset and a consumer group with a member, has a sample unless it is
// one of the few a single plaintext broker cannot produce.
func TestDashboardMetricsExist(t *testing.T) {
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	qs, problems, err := dashboardQueries(raw)
	if err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if len(qs) < 40 {
		t.Fatalf("%d queries in %s", len(qs), dashboardPath)
	}

	ab := startAdminBroker(t)
	ab.traffic(t)
	stopKafka := kafkaTraffic(t, ab)
	defer stopKafka()
	code, body := ab.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	families, sampled := parseExposition(body)
	missing, err := undeclaredMetrics(qs, families)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range missing {
		t.Errorf("the dashboard uses a metric /metrics does not declare: %s", m)
	}
	var used []string
	for _, q := range qs {
		names, _ := promMetricNames(q.expr)
		for _, n := range names {
			if f := metricFamily(n, families); !slices.Contains(used, f) {
				used = append(used, f)
			}
		}
	}
	sort.Strings(used)
	for _, f := range used {
		_, declared := families[f]
		_, excused := sampleFree[f]
		if declared && !sampled[f] && !excused {
			t.Errorf("the dashboard uses %s: declared, but no sample after traffic", f)
		}
	}
	for f := range sampleFree {
		if !slices.Contains(used, f) {
			t.Errorf("sampleFree lists %s, which the dashboard does not use", f)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
	for _, want := range []string{`strata_produce_requests_total{topic="orders"} 10`, `strata_fetch_requests_total{topic="orders"} 2`,
		`strata_produce_errors_total{topic="(unknown)",reason="TOPIC_NOT_FOUND"} 1`, `strata_group_lag_max_records{topic="orders",partition="0"} 4`,
		`strata_group_lag_records{group="billing",topic="orders"} 4`, `strata_group_members{group="kafka-billing"} 1`,
		`strata_throttled_requests_total{limit="produce_quota"} 0`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if !regexp.MustCompile(`(?m)^strata_kafka_requests_total\{api="Produce",version="\d+"\} [1-9]`).MatchString(body) {
		t.Error("/metrics counts no Kafka Produce request")
	}
	if n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(regexp.MustCompile(`(?m)^strata_cluster_partitions .*$`).FindString(body), "strata_cluster_partitions"))); n != 2 {
		t.Errorf("strata_cluster_partitions %d, want 2", n)
	}
}

// kafkaTraffic serves Kafka for ab's broker, produces a record to orders'
// partition 1 through it, and joins group kafka-billing, which consumes that record;
// the returned function leaves the group and stops serving.
func kafkaTraffic(t *testing.T, ab *adminBroker) func() {
	t.Helper()
	lis, err := net.Listen("tcp", freeport.Loopback(t))
	if err != nil {
		t.Fatal(err)
	}
	ks, err := kafka.NewServer(ab.b, kafka.Config{Advertise: lis.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	go ks.Serve(lis)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(lis.Addr().String()), kgo.DisableIdempotentWrite(), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumerGroup("kafka-billing"), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		ks.Close()
		t.Fatal(err)
	}
	stop := func() {
		cl.Close()
		ks.Close()
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 1, Value: []byte("k")}).FirstErr(); err != nil {
		stop()
		t.Fatalf("kafka produce: %v", err)
	}
	for got := 0; got == 0; {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			stop()
			t.Fatalf("kafka consume: no record before %v", err)
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("kafka fetch %s/%d: %v", topic, p, err) })
		got = fs.NumRecords()
	}
	return stop
}

// TestThrottledMetrics: on a real broker, a produce over the caller's
// quota and a fetch over its quota by more than a fetch may be held are
// refused with THROTTLED and counted under their limit in /metrics.
func TestThrottledMetrics(t *testing.T) {
	ab := startAdminBrokerWith(t, func(cfg *config.Broker) {
		cfg.Quotas.ProduceBytesPerSec = 1000
		cfg.Quotas.FetchBytesPerSec = 10_000
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := stratav1.NewAdminServiceClient(ab.conn).CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "orders", Partitions: 1}); err != nil {
		t.Fatal(err)
	}
	// The first produce takes its principal's bucket 100 s into debt; the
	// next is refused, and so is a fetch after the one that read 10 s
	// worth.
	produce := stratav1.NewProduceServiceClient(ab.conn)
	big := &stratav1.ProduceRequest{Topic: "orders", Records: []*stratav1.Record{{Value: make([]byte, 100_000)}}}
	if _, err := produce.Produce(ctx, big); err != nil {
		t.Fatal(err)
	}
	throttled := func(what string, err error, setting string) {
		t.Helper()
		if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), setting) {
			t.Fatalf("%s over quota: %v, want THROTTLED (ResourceExhausted) naming %s", what, err, setting)
		}
	}
	_, err := produce.Produce(ctx, big)
	throttled("produce", err, "quotas.produce_bytes_per_sec")
	fetch := stratav1.NewFetchServiceClient(ab.conn)
	var bytes int
	for i := range 2 {
		stream, err := fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "orders", StopAtEnd: true})
		if err != nil {
			t.Fatal(err)
		}
		for err == nil {
			var m *stratav1.FetchResponse
			if m, err = stream.Recv(); err == nil {
				bytes += len(m.GetBatches())
			}
		}
		if i == 0 && (err != io.EOF || bytes < 100_000) {
			t.Fatalf("first fetch: %d bytes, ended by %v", bytes, err)
		}
		if i == 1 {
			throttled("fetch", err, "quotas.fetch_bytes_per_sec")
		}
	}
	_, body := ab.get(t, "/metrics")
	for _, want := range []string{`strata_throttled_requests_total{limit="produce_quota"} 1`,
		`strata_throttled_requests_total{limit="fetch_quota"} 1`, `strata_throttled_requests_total{limit="upload_backlog"} 0`,
		`strata_fetch_quota_held_seconds_total 0`} {
		if !strings.Contains(body, "\n"+want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
