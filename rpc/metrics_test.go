package rpc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

// scrape is what a broker's WriteMetrics says: samples by name with
// labels, and the families it declares.
type scrape struct {
	samples  map[string]float64
	families map[string]bool
	text     string
}

func scrapeOf(t *testing.T, b *broker.Broker) scrape {
	t.Helper()
	var buf bytes.Buffer
	b.WriteMetrics(&buf)
	s := scrape{samples: map[string]float64{}, families: map[string]bool{}, text: buf.String()}
	for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			s.families[strings.Fields(f)[0]] = true
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("bad metrics line %q", line)
		}
		s.samples[line[:i]] = v
	}
	return s
}

// get returns a sample, failing the test if it is missing.
func (s scrape) get(t *testing.T, name string) float64 {
	t.Helper()
	v, ok := s.samples[name]
	if !ok {
		t.Fatalf("no sample %s in:\n%s", name, s.text)
	}
	return v
}

// sum adds the samples of one family (every label set).
func (s scrape) sum(family string) float64 {
	var total float64
	for name, v := range s.samples {
		if name == family || strings.HasPrefix(name, family+"{") {
			total += v
		}
	}
	return total
}

// TestRequestMetricsAfterTraffic: produce and fetch through the API of a
// real broker move the request metrics, per topic, with errors by reason;
// the health figures of a broker alone are what they must be; a committed
// offset shows as group lag.
func TestRequestMetricsAfterTraffic(t *testing.T) {
	tb := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	tb.createTopic(t, "m", 1, nil)

	before := scrapeOf(t, tb.Broker)
	for _, f := range []string{"strata_produce_requests_total", "strata_produce_latency_seconds", "strata_fetch_bytes_total",
		"strata_fetch_errors_total", "strata_auth_denials_total", "strata_replication_lag_records", "strata_group_lag_max_records"} {
		if !before.families[f] {
			t.Errorf("family %s not declared before any traffic", f)
		}
	}
	if before.sum("strata_produce_requests_total") != 0 {
		t.Fatalf("produce requests counted before any:\n%s", before.text)
	}

	var sentBytes int
	for i := range 5 {
		batch := batchOf(t, fmt.Sprint(i))
		sentBytes += len(batch)
		if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "m", Batch: batch}); err != nil {
			t.Fatal(err)
		}
	}
	raw, recs := tb.readAll(t, "m", 0, 0)
	if len(recs) != 5 {
		t.Fatalf("read %d records back", len(recs))
	}
	if _, err := tb.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "no-such-topic", Records: []*stratav1.Record{{Value: []byte("x")}}}); status.Code(err) != codes.NotFound {
		t.Fatalf("produce to a missing topic: %v", err)
	}
	stream, err := tb.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "m", Offset: 1000, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.OutOfRange {
		t.Fatalf("fetch past the end: %v", err)
	}
	if _, err := tb.offsets.CommitOffsets(ctx, &stratav1.CommitOffsetsRequest{Group: "g", Offsets: []*stratav1.CommittedOffset{{Topic: "m", Partition: 0, Offset: 2}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stratav1.NewGroupServiceClient(tb.conn).GroupHeartbeat(ctx, &stratav1.GroupHeartbeatRequest{Group: "workers", Topics: []string{"m"}, NoWait: true}); err != nil {
		t.Fatal(err)
	}

	after := scrapeOf(t, tb.Broker)
	for name, want := range map[string]float64{
		`strata_produce_requests_total{topic="m"}`:                                  5,
		`strata_produce_bytes_total{topic="m"}`:                                     float64(sentBytes),
		`strata_produce_latency_seconds_count{topic="m"}`:                           5,
		`strata_produce_latency_seconds_bucket{topic="m",le="+Inf"}`:                5,
		`strata_produce_requests_total{topic="(unknown)"}`:                          1,
		`strata_produce_errors_total{topic="(unknown)",reason="TOPIC_NOT_FOUND"}`:   1,
		`strata_fetch_requests_total{topic="m"}`:                                    2,
		`strata_fetch_bytes_total{topic="m"}`:                                       float64(len(raw)),
		`strata_fetch_latency_seconds_count{topic="m"}`:                             2,
		`strata_fetch_errors_total{topic="m",reason="OFFSET_OUT_OF_RANGE"}`:         1,
		`strata_group_lag_max_records{topic="m",partition="0"}`:                     3,
		`strata_group_lag_sum_records{topic="m",partition="0"}`:                     3,
		`strata_group_committed{topic="m",partition="0"}`:                           1,
		`strata_group_members{group="workers"}`:                                     1,
		`strata_partitions_led`:                                                     1,
		`strata_controller_active`:                                                  1,
		`strata_under_replicated_partitions`:                                        0,
		`strata_offline_partitions`:                                                 0,
		`strata_raft_state{state="leader"}`:                                         1,
		`strata_raft_state{state="follower"}`:                                       0,
		`strata_gossip_members{state="alive"}`:                                      1,
		`strata_brokers_registered`:                                                 1,
		`strata_cluster_partitions`:                                                 1,
		`strata_produce_errors_total{topic="m",reason="OFFSET_OUT_OF_RANGE"}`:       -1,
		`strata_produce_latency_seconds_bucket{topic="(unknown)",le="0.0005"}`:      -2, // present, any value
		`strata_fetch_latency_seconds_bucket{topic="m",le="30"}`:                    2,
		`strata_produce_latency_seconds_sum{topic="m"}`:                             -2,
		`strata_raft_commit_index`:                                                  -2,
		`strata_metadata_version`:                                                   -2,
		`strata_fetch_responses_total{topic="m"}`:                                   -2,
		`strata_fetch_errors_total{topic="(unknown)",reason="OFFSET_OUT_OF_RANGE"}`: -1,
	} {
		v, ok := after.samples[name]
		switch {
		case want == -1 && ok:
			t.Errorf("%s = %v, want no such sample", name, v)
		case want != -1 && !ok:
			t.Errorf("%s missing", name)
		case want >= 0 && v != want:
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if after.get(t, `strata_produce_latency_seconds_sum{topic="m"}`) <= 0 || after.get(t, `strata_raft_commit_index`) <= before.get(t, `strata_raft_commit_index`) {
		t.Errorf("latency sum or Raft commit index did not move:\n%s", after.text)
	}
	if t.Failed() {
		t.Logf("metrics:\n%s", after.text)
	}
}

// metricsSum adds one sample over brokers.
func metricsSum(t *testing.T, bs []*testBroker, name string) float64 {
	var total float64
	for _, b := range bs {
		total += scrapeOf(t, b.Broker).samples[name]
	}
	return total
}

// TestClusterHealthMetricsAndStatus: with a broker stopped, the survivors
// report its partitions under-replicated (each once, by its leader), the
// controller reports the one it alone held offline and counts the leader
// it elected, the leaders count their ISR shrinks, and ClusterStatus says
// the same, listing only what the caller may see. When the broker returns
// it all clears and the ISRs expand. Without a majority of the metadata
// group, a broker is not ready.
func TestClusterHealthMetricsAndStatus(t *testing.T) {
	// A leader takes a follower that just stopped back into the ISR (it
	// has everything, and was heard from within replica.lag.time.max) and
	// the controller takes it out again, until lag_time_max has passed
	// since it was last heard: a short one lets the ISRs settle quickly.
	dir := t.TempDir()
	cfgOf := func(id int32) config.Broker {
		cfg := brokerConfig(t, id, filepath.Join(dir, fmt.Sprint(id)))
		cfg.Replica.LagTimeMax = config.Duration(time.Second)
		return cfg
	}
	b1 := startBroker(t, cfgOf(1))
	bs := []*testBroker{b1, joinSecondBroker(t, b1, cfgOf(2)), joinSecondBroker(t, b1, cfgOf(3))}
	ctx := testCtx(t)
	createEverywhere(t, bs, "h", 3, map[string]string{"replication.factor": "3", "min.insync.replicas": "1"})
	createEverywhere(t, bs, "solo", 3, map[string]string{"replication.factor": "1"})
	if _, err := bs[0].admin.CreateACLs(ctx, &stratav1.CreateACLsRequest{Acls: []*stratav1.ACL{
		{Principal: "User:alice", ResourceType: "topic", Name: "h", Operation: "read"},
	}}); err != nil {
		t.Fatal(err)
	}
	md, err := bs[0].meta.GetMetadata(ctx, &stratav1.GetMetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	controller := md.ControllerId
	// The victim leads a partition of h and one of solo (each broker leads
	// one of each) and is not the controller, which must survive to report.
	var victim *testBroker
	var survivors []*testBroker
	for _, b := range bs {
		if victim == nil && b.ID() != controller {
			victim = b
		} else {
			survivors = append(survivors, b)
		}
	}
	ctl, other := byID(survivors, controller), survivors[0]
	if other == ctl {
		other = survivors[1]
	}
	for _, b := range bs {
		if err := b.Ready(ctx); err != nil {
			t.Fatalf("broker %d not ready: %v", b.ID(), err)
		}
	}
	testutil.WaitFor(t, 20*time.Second, "full ISRs", func() bool {
		return metricsSum(t, bs, "strata_under_replicated_partitions") == 0 && metricsSum(t, bs, "strata_offline_partitions") == 0
	})
	// Every change so far applied everywhere before the counters are read.
	for _, b := range bs {
		if err := b.Ready(ctx); err != nil {
			t.Fatalf("broker %d not ready: %v", b.ID(), err)
		}
	}
	shrinksBefore := metricsSum(t, survivors, "strata_isr_shrinks_total")
	electionsBefore := scrapeOf(t, ctl.Broker).get(t, "strata_leader_elections_total")
	fullBefore := metricsSum(t, survivors, "strata_reconcile_full_rounds_total")
	partialBefore := metricsSum(t, survivors, "strata_reconcile_partial_rounds_total")
	victim.stop(t)

	var st *stratav1.ClusterStatusResponse
	testutil.WaitFor(t, 20*time.Second, "the victim's partitions under-replicated and its solo partition offline", func() bool {
		st, err = ctl.admin.ClusterStatus(ctx, &stratav1.ClusterStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return metricsSum(t, survivors, "strata_under_replicated_partitions") == 3 &&
			scrapeOf(t, ctl.Broker).samples["strata_offline_partitions"] == 1 &&
			st.UnderReplicatedCount == 3 && st.OfflineCount == 1
	})
	if v := scrapeOf(t, other.Broker).get(t, "strata_offline_partitions"); v != 0 {
		t.Errorf("a broker that is not the controller reports %v offline partitions", v)
	}
	if v := scrapeOf(t, ctl.Broker).get(t, "strata_leader_elections_total") - electionsBefore; v < 1 {
		t.Errorf("the controller counted %v leader elections; the victim led a partition of h", v)
	}
	if v := metricsSum(t, survivors, "strata_isr_shrinks_total") - shrinksBefore; v < 2 {
		t.Errorf("%v ISR shrinks counted; the two partitions of h the survivors led lost the victim", v)
	}
	// A leader election and ISR shrinks change one partition each: the
	// survivors apply them to that partition alone, never in a round over
	// every replica they hold.
	if v := metricsSum(t, survivors, "strata_reconcile_full_rounds_total") - fullBefore; v != 0 {
		t.Errorf("the survivors ran %v reconcile rounds over every replica for leader and ISR changes; want 0", v)
	}
	if v := metricsSum(t, survivors, "strata_reconcile_partial_rounds_total") - partialBefore; v < 2 {
		t.Errorf("the survivors ran %v reconcile rounds of the partitions changed; want one per change at least", v)
	}
	if st.BrokerId != ctl.ID() || st.ControllerId != controller || st.Topics != 2 || st.Partitions != 6 ||
		len(st.UnderReplicated) != 3 || len(st.Offline) != 1 || st.Offline[0].Topic != "solo" || st.Offline[0].Partition.Leader != -1 {
		t.Fatalf("cluster status: %v", st)
	}
	var alive []int32
	for _, b := range st.Brokers {
		if !b.Registered {
			t.Errorf("broker %d not registered", b.Id)
		}
		if b.Alive {
			alive = append(alive, b.Id)
		}
		// Each live broker's version is what it published in gossip.
		if want := map[bool]string{true: harnessVersion}[b.Alive]; b.Version != want {
			t.Errorf("broker %d (alive %v) reports version %q, want %q", b.Id, b.Alive, b.Version, want)
		}
	}
	if len(st.Brokers) != 3 || slices.Contains(alive, victim.ID()) || len(alive) != 2 {
		t.Errorf("brokers %v: want 3, all but %d alive", st.Brokers, victim.ID())
	}
	// A client held to ACLs sees the counts and the partitions of the
	// topics it may see, and nothing of the others: solo's offline
	// partition counts nowhere, as solo is in no listing of hers.
	asAlice := security.WithPrincipal(ctx, security.UserPrincipal("alice"))
	testutil.WaitFor(t, 20*time.Second, "alice's view of the cluster status", func() bool {
		st, err = (&adminService{b: ctl.Broker}).ClusterStatus(asAlice, &stratav1.ClusterStatusRequest{MaxPartitions: 2})
		if err != nil {
			t.Fatal(err)
		}
		return st.UnderReplicatedCount == 3
	})
	if st.Topics != 1 || st.Partitions != 3 || st.OfflineCount != 0 || len(st.Offline) != 0 ||
		len(st.UnderReplicated) != 2 || st.UnderReplicated[0].Topic != "h" || st.UnderReplicated[1].Topic != "h" {
		t.Fatalf("cluster status for alice, at most 2 partitions each: %v", st)
	}
	// Mallory, granted nothing, sees no topic, partition or count.
	asMallory := security.WithPrincipal(ctx, security.UserPrincipal("mallory"))
	if st, err := (&adminService{b: ctl.Broker}).ClusterStatus(asMallory, &stratav1.ClusterStatusRequest{}); err != nil ||
		st.Topics != 0 || st.Partitions != 0 || st.UnderReplicatedCount != 0 || st.OfflineCount != 0 || st.UploadLagPartitions != 0 || st.UploadLagBytes != 0 {
		t.Fatalf("cluster status for a principal granted nothing: %v, %v; want no counts", st, err)
	}

	// The victim returns: the ISRs expand, its solo partition has a leader.
	expandsBefore := metricsSum(t, survivors, "strata_isr_expands_total")
	back := startBrokerAt(t, victim.cfg)
	now := append(slices.Clone(survivors), back)
	testutil.WaitFor(t, 20*time.Second, "nothing under-replicated or offline", func() bool {
		st, err = ctl.admin.ClusterStatus(ctx, &stratav1.ClusterStatusRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return metricsSum(t, now, "strata_under_replicated_partitions") == 0 && scrapeOf(t, ctl.Broker).samples["strata_offline_partitions"] == 0 &&
			st.UnderReplicatedCount == 0 && st.OfflineCount == 0
	})
	if v := metricsSum(t, survivors, "strata_isr_expands_total") - expandsBefore; v < 2 {
		t.Errorf("%v ISR expands counted by the survivors", v)
	}

	// Two of the three voters gone: the last one knows no controller and
	// says it is not ready.
	last := now[0]
	for _, b := range now[1:] {
		b.stop(t)
	}
	var readyErr error
	testutil.WaitFor(t, 20*time.Second, "the last broker to say it knows no controller", func() bool {
		rctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		readyErr = last.Ready(rctx)
		return readyErr != nil
	})
	if !strings.Contains(readyErr.Error(), "no controller known") {
		t.Fatalf("not ready, but: %v", readyErr)
	}
}

// TestAuthDeniedHook: refusals by an ACL or by a rule reach OnDenied with
// the principal; allowed calls and unauthenticated ones do not. Any
// authenticated principal may read the cluster's status.
func TestAuthDeniedHook(t *testing.T) {
	var denied []string
	acls := []security.ACL{{Principal: "User:bob", Resource: security.ResourceTopic, Name: "t", Op: security.OpWrite}}
	a := &Auth{ACLs: func() []security.ACL { return acls }, OnDenied: func(p string) { denied = append(denied, p) }}
	produce := &stratav1.ProduceRequest{Topic: "t"}
	if err := a.authorize(security.UserPrincipal("alice"), produceMethod, produce); broker.ReasonOf(err) != broker.ReasonPermissionDenied {
		t.Fatalf("alice's produce: %v", err)
	}
	if err := a.authorize(security.UserPrincipal("bob"), produceMethod, produce); err != nil {
		t.Fatalf("bob's produce: %v", err)
	}
	if err := a.authorize(security.UserPrincipal("mallory"), "/strata.v1.ReplicationService/AlterISR", &stratav1.AlterISRRequest{LeaderId: 1}); broker.ReasonOf(err) != broker.ReasonPermissionDenied {
		t.Fatalf("mallory's AlterISR: %v", err)
	}
	if err := a.authorize(security.Principal{Name: security.AnonymousName}, produceMethod, produce); broker.ReasonOf(err) != broker.ReasonUnauthenticated {
		t.Fatalf("an anonymous produce: %v", err)
	}
	if !slices.Equal(denied, []string{"User:alice", "User:mallory"}) {
		t.Fatalf("OnDenied saw %q", denied)
	}
	status := "/strata.v1.AdminService/ClusterStatus"
	if err := a.authorize(security.UserPrincipal("carol"), status, &stratav1.ClusterStatusRequest{}); err != nil {
		t.Fatalf("carol's cluster status: %v", err)
	}
	if err := a.authorize(security.Principal{Name: security.AnonymousName}, status, &stratav1.ClusterStatusRequest{}); broker.ReasonOf(err) != broker.ReasonUnauthenticated {
		t.Fatalf("an anonymous cluster status: %v", err)
	}
}

func TestErrorReason(t *testing.T) {
	withInfo, _ := status.New(codes.NotFound, "x").WithDetails(&errdetails.ErrorInfo{Reason: "TOPIC_NOT_FOUND", Domain: ErrorDomain})
	for err, want := range map[error]string{
		withInfo.Err(): "TOPIC_NOT_FOUND",
		status.Error(codes.DeadlineExceeded, "slow"): "DEADLINE_EXCEEDED",
		status.Error(codes.Canceled, "gone"):         "CANCELED",
		context.Canceled:                             "CANCELED",
		errors.New("odd"):                            "UNKNOWN",
	} {
		if got := errorReason(err); got != want {
			t.Errorf("errorReason(%v) = %q, want %q", err, got, want)
		}
	}
}
