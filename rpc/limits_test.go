package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// Limits that keep one client from hurting the rest, and small wrong
// answers found by a hostile-input review, each tried through a real broker
// over loopback gRPC.

// wantRefusal checks a call's error: its code, reason, retriable flag and
// that its message says each of says.
func wantRefusal(t *testing.T, what string, err error, code codes.Code, reason string, retriable bool, says ...string) {
	t.Helper()
	got, info, _ := errorInfo(err)
	if err == nil || got != code || info == nil || info.Reason != reason || info.Metadata["retriable"] != fmt.Sprint(retriable) {
		t.Fatalf("%s: %v (info %v); want %v %s retriable=%v", what, err, info, code, reason, retriable)
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
}

func topicNames(t *testing.T, tb *testBroker) []string {
	t.Helper()
	resp, err := tb.admin.ListTopics(testCtx(t), &stratav1.ListTopicsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tp := range resp.Topics {
		names = append(names, tp.Name)
	}
	return names
}

// TestCreateTopicPartitionLimit: a topic that would put more partition
// replicas on a broker than limits.max_partitions_per_broker is refused,
// naming the limit, the count and what to change, and nothing is created;
// a topic that fits is created.
func TestCreateTopicPartitionLimit(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.Limits.MaxPartitionsPerBroker = 10
	b1 := startBroker(t, cfg)
	ctx := testCtx(t)
	b1.createTopic(t, "first", 8, nil)
	_, err := b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "many", Partitions: 3000})
	wantRefusal(t, "3000 partitions", err, codes.InvalidArgument, "INVALID_REQUEST", false,
		"3008 partition replicas on broker 1", "holds 8", "at most 10", "limits.max_partitions_per_broker", "at most 10000")
	_, info, _ := errorInfo(err)
	if info.Metadata["limit"] != "10" || info.Metadata["broker_id"] != "1" || info.Metadata["replicas"] != "8" {
		t.Errorf("metadata %v", info.Metadata)
	}
	_, err = b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "three", Partitions: 3})
	wantRefusal(t, "one over", err, codes.InvalidArgument, "INVALID_REQUEST", false, "11 partition replicas")
	if names := topicNames(t, b1); len(names) != 1 {
		t.Fatalf("topics %v after the refusals, want only first", names)
	}
	b1.createTopic(t, "two", 2, nil) // exactly at the limit
}

// lowNofileEnv, set in a child test process, is the open-file limit it
// lowers itself to before it starts a broker.
const lowNofileEnv = "STRATA_TEST_LOW_NOFILE"

// inLowNofileChild runs the calling test again in a child process whose
// open-file limit is lowered to nofile, so that no other test runs under
// it, and reports whether this is that child (which should go on with the
// test). The parent logs the child's lines that say "served".
func inLowNofileChild(t *testing.T, nofile uint64) bool {
	t.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	if os.Getenv(lowNofileEnv) != "" {
		rl.Cur = nofile
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			t.Fatal(err)
		}
		return true
	}
	if rl.Max < nofile {
		t.Skipf("cannot set an open-file limit of %d (hard limit %d)", nofile, rl.Max)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), lowNofileEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child with an open-file limit of %d: %v\n%s", nofile, err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "served") {
			t.Log(strings.TrimSpace(line))
		}
	}
	return false
}

// serveOneRecordEach produces a record to each partition of topic and
// fetches it back.
func serveOneRecordEach(t *testing.T, b1 *testBroker, topic string, partitions int32) {
	t.Helper()
	ctx := testCtx(t)
	for p := range partitions {
		deadline := time.Now().Add(20 * time.Second)
		for {
			_, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: topic, Partition: p, Batch: batchOf(t, fmt.Sprint(p))})
			if err == nil {
				break
			}
			if _, info, _ := errorInfo(err); info == nil || info.Metadata["retriable"] != "true" || time.Now().After(deadline) {
				t.Fatalf("produce to partition %d: %v", p, err)
			}
			time.Sleep(10 * time.Millisecond) // a leader is being placed: retry as a client would
		}
	}
	for p := range partitions {
		_, recs := b1.readAll(t, topic, p, 0)
		if len(recs) != 1 || string(recs[0].Value) != fmt.Sprint(p) {
			t.Fatalf("partition %d holds %d records, want one of %q", p, len(recs), fmt.Sprint(p))
		}
	}
}

// logDescriptors counts this process's descriptors open on files under the
// broker's logs directory.
func logDescriptors(t *testing.T, dataDir string) int {
	t.Helper()
	logs := filepath.Join(dataDir, "logs") + string(filepath.Separator)
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	open := 0
	for _, e := range entries {
		if target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(target, logs) {
			open++
		}
	}
	return open
}

// TestPartitionLimitIgnoresTheOpenFileLimit: under an open-file limit of
// 4096 a broker used to derive its partition limit from the descriptors
// (768 replicas at 3 each beside the cache). Idle replicas hold none, so
// the limit is limits.max_partitions_per_broker alone: the default broker
// creates 1,500 partitions, takes a record on each and serves each back,
// and a broker set to 1,600 refuses past it, naming the setting.
func TestPartitionLimitIgnoresTheOpenFileLimit(t *testing.T) {
	const partitions = 1500
	if !inLowNofileChild(t, 4096) {
		return
	}
	dir := t.TempDir()
	cfg := brokerConfig(t, 1, dir)
	cfg.Limits.MaxPartitionsPerBroker = 1600
	b1 := startBroker(t, cfg)
	b1.createTopic(t, "many", partitions, nil)
	serveOneRecordEach(t, b1, "many", partitions)
	t.Logf("%d partitions served with %d descriptors open on their logs", partitions, logDescriptors(t, dir))

	_, err := b1.admin.CreateTopic(testCtx(t), &stratav1.CreateTopicRequest{Name: "more", Partitions: 101})
	wantRefusal(t, "past the configured limit", err, codes.InvalidArgument, "INVALID_REQUEST", false,
		"1601 partition replicas on broker 1", "holds 1500", "at most 1600", "limits.max_partitions_per_broker is 1600")
	if _, err := b1.admin.CreateTopic(testCtx(t), &stratav1.CreateTopicRequest{Name: "more", Partitions: 100}); err != nil {
		t.Fatalf("up to the limit: %v", err)
	}
}

// TestBrokerLogsShareOneBoundedFileCache: every partition of a broker opens
// its segment files through the broker's one cache, sized from the
// open-file limit (768 files under 4096): 1000 partitions, each written
// and read, and so idle, hold no more than that. Before the cache each
// held its segment file and two index files open.
func TestBrokerLogsShareOneBoundedFileCache(t *testing.T) {
	const partitions, bound = 1000, (4096 - 1024) / 4
	if !inLowNofileChild(t, 4096) {
		return
	}
	dir := t.TempDir()
	cfg := brokerConfig(t, 1, dir)
	cfg.Limits.MaxPartitionsPerBroker = partitions
	b1 := startBroker(t, cfg)
	b1.createTopic(t, "many", partitions, nil)
	serveOneRecordEach(t, b1, "many", partitions)
	// Produce returned after its fsync, so every log file is clean and may
	// be evicted; what is left open is the cache, and now and then a file
	// opened for a moment (a checkpoint the broker writes every few
	// seconds, a directory fsync): wait, with a deadline, for a count
	// without one.
	open := logDescriptors(t, dir)
	for deadline := time.Now().Add(10 * time.Second); open > bound && time.Now().Before(deadline); open = logDescriptors(t, dir) {
		time.Sleep(5 * time.Millisecond)
	}
	if open > bound {
		t.Fatalf("%d descriptors open on the logs of %d idle partitions, want at most the cache bound %d", open, partitions, bound)
	}
	t.Logf("%d partitions served with %d descriptors open on their logs (cache bound %d)", partitions, open, bound)
}

// TestCreateTopicReplicationFactorConflicts: a negative replication factor
// or partition count is refused, not taken as the default, and so is a
// replication_factor that the request's own replication.factor setting
// contradicts; agreeing ones pass.
func TestCreateTopicReplicationFactorConflicts(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.ObjectStore.Type = config.ObjectStoreFS
	b1 := startBroker(t, cfg)
	ctx := testCtx(t)
	_, err := b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "neg", ReplicationFactor: -1})
	wantRefusal(t, "replication factor -1", err, codes.InvalidArgument, "INVALID_REQUEST", false, "replication factor -1")
	_, err = b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "neg", Partitions: -1})
	wantRefusal(t, "partitions -1", err, codes.InvalidArgument, "INVALID_REQUEST", false, "partitions -1")
	_, err = b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "both", ReplicationFactor: 1, Config: map[string]string{"replication.factor": "2"}})
	wantRefusal(t, "replication_factor 1 with replication.factor=2", err, codes.InvalidArgument, "INVALID_REQUEST", false,
		"replication_factor 1", "replication.factor=2")
	_, err = b1.admin.RestoreTopic(ctx, &stratav1.RestoreTopicRequest{Name: "gone", ReplicationFactor: -1})
	wantRefusal(t, "restore with replication factor -1", err, codes.InvalidArgument, "INVALID_REQUEST", false, "replication factor -1")
	if names := topicNames(t, b1); len(names) != 0 {
		t.Fatalf("topics %v after the refusals", names)
	}
	d := b1.createTopic(t, "agree", 1, map[string]string{"replication.factor": "1"})
	resp, err := b1.admin.CreateTopic(ctx, &stratav1.CreateTopicRequest{Name: "same", ReplicationFactor: 1, Config: map[string]string{"replication.factor": "1"}})
	if err != nil || d.Config["replication.factor"] != "1" || resp.Topic.Config["replication.factor"] != "1" {
		t.Fatalf("agreeing settings: %v, %v", resp, err)
	}
}

// TestFetchCapsMaxBytes: a fetch asking for a gigabyte gets responses of
// at most limits.max_fetch_bytes, and still everything, in order.
func TestFetchCapsMaxBytes(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.Limits.MaxFetchBytes = 64 << 10
	b1 := startBroker(t, cfg)
	ctx := testCtx(t)
	b1.createTopic(t, "big", 1, nil)
	value := strings.Repeat("v", 10<<10)
	for i := range 30 {
		if _, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "big", Batch: batchOf(t, fmt.Sprintf("%02d%s", i, value))}); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := b1.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "big", MaxBytes: 1 << 30, StopAtEnd: true})
	if err != nil {
		t.Fatal(err)
	}
	responses, next := 0, int64(0)
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		responses++
		if len(resp.Batches) > 64<<10 {
			t.Fatalf("a response of %d bytes with limits.max_fetch_bytes 64KiB", len(resp.Batches))
		}
		next = resp.NextOffset
	}
	if next != 30 || responses < 5 {
		t.Fatalf("fetched to %d in %d responses, want 30 in at least 5", next, responses)
	}
}

// TestConsumerGroupLimits: group names longer than a topic name may be, or
// with control characters, are refused; so is a commit that would create a
// group beyond limits.max_groups, while existing groups keep committing.
func TestConsumerGroupLimits(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.Limits.MaxGroups = 2
	b1 := startBroker(t, cfg)
	ctx := testCtx(t)
	b1.createTopic(t, "events", 1, nil)
	commit := func(group string, off int64) error {
		_, err := b1.offsets.CommitOffsets(ctx, &stratav1.CommitOffsetsRequest{Group: group, Offsets: []*stratav1.CommittedOffset{{Topic: "events", Offset: off}}})
		return err
	}
	wantRefusal(t, "a 10 KB group name", commit(strings.Repeat("g", 10<<10), 1), codes.InvalidArgument, "INVALID_REQUEST", false, "at most 249")
	wantRefusal(t, "a group name with a newline", commit("two\nlines", 1), codes.InvalidArgument, "INVALID_REQUEST", false, "control characters")
	for _, g := range []string{"g1", "g2"} {
		if err := commit(g, 1); err != nil {
			t.Fatalf("group %s: %v", g, err)
		}
	}
	wantRefusal(t, "a third group", commit("g3", 1), codes.InvalidArgument, "INVALID_REQUEST", false, `"g3"`, "at most 2", "limits.max_groups")
	if err := commit("g1", 2); err != nil {
		t.Fatalf("an existing group at the limit: %v", err)
	}
	resp, err := b1.offsets.FetchOffsets(ctx, &stratav1.FetchOffsetsRequest{Group: "g3"})
	if err != nil || len(resp.Offsets) != 0 {
		t.Fatalf("offsets of the refused group: %v, %v", resp, err)
	}
}

// TestProduceQuota: a principal over quotas.produce_bytes_per_sec is
// refused with THROTTLED, retriable, with a RetryInfo, and the batch is not
// written.
func TestProduceQuota(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.Quotas.ProduceBytesPerSec = 1 << 10
	b1 := startBroker(t, cfg)
	ctx := testCtx(t)
	b1.createTopic(t, "q", 1, nil)
	// A full bucket lets one batch through, however large: about 8 KiB
	// (batchOf repeats the value in the key) against a second's worth of
	// 1 KiB leaves 7 seconds of debt.
	if _, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "q", Batch: batchOf(t, strings.Repeat("x", 4<<10))}); err != nil {
		t.Fatal(err)
	}
	_, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "q", Batch: batchOf(t, "over")})
	wantRefusal(t, "produce over quota", err, codes.ResourceExhausted, "THROTTLED", true, "quotas.produce_bytes_per_sec", "1024 bytes per second")
	_, _, retry := errorInfo(err)
	if retry == nil || retry.RetryDelay.AsDuration() < 3*time.Second {
		t.Fatalf("RetryInfo %v; want a delay of several seconds", retry)
	}
	if _, recs := b1.readAll(t, "q", 0, 0); len(recs) != 1 {
		t.Fatalf("%d records stored, want only the one admitted", len(recs))
	}
}

// TestFetchQuotaDelays: a principal a little over
// quotas.fetch_bytes_per_sec is served later, not refused.
func TestFetchQuotaDelays(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.Quotas.FetchBytesPerSec = 16 << 10
	b1 := startBroker(t, cfg)
	ctx := testCtx(t)
	b1.createTopic(t, "q", 1, nil)
	// A batch of about 24 KiB (batchOf repeats the value in the key).
	if _, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "q", Batch: batchOf(t, strings.Repeat("x", 12<<10))}); err != nil {
		t.Fatal(err)
	}
	// 24 KiB read against 16 KiB: half a second of debt, so the next read
	// waits for it.
	b1.readAll(t, "q", 0, 0)
	start := time.Now()
	if _, recs := b1.readAll(t, "q", 0, 0); len(recs) != 1 {
		t.Fatalf("%d records read after the delay", len(recs))
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("a fetch half a second over quota was served after %v", waited)
	}
}

// TestFetchQuotaThrottles: a principal far over quotas.fetch_bytes_per_sec
// is refused with THROTTLED and a RetryInfo at its next read.
func TestFetchQuotaThrottles(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	cfg.Quotas.FetchBytesPerSec = 16 << 10
	b1 := startBroker(t, cfg)
	ctx := testCtx(t)
	b1.createTopic(t, "q", 1, nil)
	// About 64 KiB against 16 KiB a second: three seconds of debt.
	if _, err := b1.produce.Produce(ctx, &stratav1.ProduceRequest{Topic: "q", Batch: batchOf(t, strings.Repeat("y", 32<<10))}); err != nil {
		t.Fatal(err)
	}
	stream, err := b1.fetch.Fetch(ctx, &stratav1.FetchRequest{Topic: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if resp, err := stream.Recv(); err != nil || len(resp.Batches) == 0 {
		t.Fatalf("first read: %v, %v", resp, err)
	}
	_, err = stream.Recv()
	wantRefusal(t, "fetch far over quota", err, codes.ResourceExhausted, "THROTTLED", true, "quotas.fetch_bytes_per_sec")
	if _, _, retry := errorInfo(err); retry == nil || retry.RetryDelay.AsDuration() < 2*time.Second {
		t.Fatalf("RetryInfo %v; want a delay of seconds", retry)
	}
}

// TestAlterISRInvalidIsNotRetriable: an AlterISR that cannot be right is
// INVALID_ARGUMENT (INVALID_REQUEST), not a retriable UNAVAILABLE, and
// changes nothing.
func TestAlterISRInvalidIsNotRetriable(t *testing.T) {
	b1 := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	ctx := testCtx(t)
	b1.createTopic(t, "t", 1, nil)
	p := partitionState(t, b1, "t", 0).Metadata
	id := partitionTopicID(t, b1, "t")
	repl := stratav1.NewReplicationServiceClient(b1.conn)
	base := func() *stratav1.AlterISRRequest {
		return &stratav1.AlterISRRequest{Topic: "t", TopicId: id, Partition: 0, LeaderId: 1, LeaderEpoch: p.LeaderEpoch, Isr: []int32{1}}
	}
	for name, mutate := range map[string]func(*stratav1.AlterISRRequest){
		"a broker that is not a replica": func(r *stratav1.AlterISRRequest) { r.Isr = []int32{1, 9} },
		"an empty ISR":                   func(r *stratav1.AlterISRRequest) { r.Isr = nil },
		"a duplicate":                    func(r *stratav1.AlterISRRequest) { r.Isr = []int32{1, 1} },
		"a negative partition":           func(r *stratav1.AlterISRRequest) { r.Partition = -1 },
		"a bad topic name":               func(r *stratav1.AlterISRRequest) { r.Topic = "no such/topic" },
	} {
		req := base()
		mutate(req)
		_, err := repl.AlterISR(ctx, req)
		wantRefusal(t, name, err, codes.InvalidArgument, "INVALID_REQUEST", false)
	}
	_, err := repl.AlterISR(ctx, &stratav1.AlterISRRequest{Topic: "t", TopicId: id, Partition: 5, LeaderId: 1, Isr: []int32{1}})
	if code, info, _ := errorInfo(err); code == codes.Unavailable || info == nil || info.Metadata["retriable"] != "false" {
		t.Fatalf("a partition the topic lacks: %v; want a refusal that is not retriable", err)
	}
	if after := partitionState(t, b1, "t", 0).Metadata; after.LeaderEpoch != p.LeaderEpoch || len(after.Isr) != 1 {
		t.Fatalf("partition changed: %v", after)
	}
}

// TestReplicateHalfClose: a follower that half-closes its Replicate stream
// ends it with OK, not Internal "EOF".
func TestReplicateHalfClose(t *testing.T) {
	b1 := startBroker(t, brokerConfig(t, 1, t.TempDir()))
	b1.createTopic(t, "t", 1, nil)
	repl := stratav1.NewReplicationServiceClient(b1.conn)
	for _, positions := range [][]*stratav1.ReplicaPosition{nil, {{Topic: "t", TopicId: partitionTopicID(t, b1, "t"), Partition: 0, Stop: true}}} {
		stream, err := repl.Replicate(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		if positions != nil {
			if err := stream.Send(&stratav1.ReplicateRequest{FollowerId: 1, Positions: positions}); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.CloseSend(); err != nil {
			t.Fatal(err)
		}
		for {
			_, err = stream.Recv()
			if err != nil {
				break
			}
		}
		if !errors.Is(err, io.EOF) {
			t.Fatalf("after a half-close (%d positions sent) the stream ended with %v; want OK", len(positions), err)
		}
	}
}

// TestStartsOnAFullDisk: a broker whose data dir has less free space than
// storage.min_free_bytes starts, serves metadata, and refuses produce with
// STORAGE_FULL (retriable, naming the setting) until space is freed; then
// it takes produce without a restart. (e2e's TestRestartOnAFullDisk does
// it on a file system that is really full.)
func TestStartsOnAFullDisk(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	var free atomic.Int64
	free.Store(int64(cfg.Storage.MinFreeBytes) - 1)
	b := startBroker(t, cfg, broker.WithFreeSpace(func(string) (int64, error) { return free.Load(), nil }))
	if _, err := b.admin.CreateTopic(testCtx(t), &stratav1.CreateTopicRequest{Name: "t", Partitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatalf("create a topic on a full disk: %v", err)
	}
	testutil.WaitFor(t, 20*time.Second, "a leader of t/0", func() bool {
		md, err := b.meta.GetMetadata(testCtx(t), &stratav1.GetMetadataRequest{Topics: []string{"t"}})
		return err == nil && md.Topics[0].Partitions[0].Leader == cfg.NodeID
	})
	_, err := b.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "t", Batch: batchOf(t, "x")})
	code, info, retry := errorInfo(err)
	if code != codes.ResourceExhausted || info == nil || info.Reason != "STORAGE_FULL" || info.Metadata["retriable"] != "true" || retry == nil {
		t.Fatalf("produce on a full disk: %v; want a retriable STORAGE_FULL", err)
	}
	if !strings.Contains(err.Error(), "storage.min_free_bytes") {
		t.Fatalf("%v does not name storage.min_free_bytes", err)
	}
	free.Store(int64(cfg.Storage.MinFreeBytes))
	if _, err := b.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "t", Batch: batchOf(t, "x")}); err != nil {
		t.Fatalf("produce once space is freed: %v", err)
	}
}

// TestBrokerIdlePartitionFootprint measures what idle partitions cost a
// broker: it creates STRATA_FOOTPRINT_PARTITIONS partitions, writes and
// reads one record on each, and reports the descriptors and resident memory
// they added. A measurement, run by hand:
//
//	STRATA_FOOTPRINT_PARTITIONS=5000 go test -run TestBrokerIdlePartitionFootprint -v ./rpc/
func TestBrokerIdlePartitionFootprint(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("STRATA_FOOTPRINT_PARTITIONS"))
	if n <= 0 {
		t.Skip("set STRATA_FOOTPRINT_PARTITIONS to measure")
	}
	dir := t.TempDir()
	cfg := brokerConfig(t, 1, dir)
	cfg.Limits.MaxPartitionsPerBroker = n
	b1 := startBroker(t, cfg)
	fds0, rss0 := countFDs(t), residentBytes(t)
	b1.createTopic(t, "many", int32(n), nil)
	serveOneRecordEach(t, b1, "many", int32(n))
	fds, rss := countFDs(t), residentBytes(t)
	t.Logf("%d idle partitions served: +%d descriptors in all (%.3f per partition; %d on their logs), resident memory +%.1f MiB (%.1f KiB per partition), %d goroutines",
		n, fds-fds0, float64(fds-fds0)/float64(n), logDescriptors(t, dir),
		float64(rss-rss0)/(1<<20), float64(rss-rss0)/1024/float64(n), runtime.NumGoroutine())
}

func countFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	return len(entries)
}

// residentBytes is VmRSS after a collection that returns freed memory to
// the operating system.
func residentBytes(t *testing.T) int64 {
	runtime.GC()
	debug.FreeOSMemory()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestOpeningAReplicaBlocksNoOtherPartition: the broker opens (and
// recovers) a new replica outside the lock every produce and fetch takes,
// so while the open of a new topic's partition is held, another partition
// of the broker takes a produce and serves a fetch; once the open goes on,
// the new topic is served too.
func TestOpeningAReplicaBlocksNoOtherPartition(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	hold := func(topic string, _ int32) {
		if topic == "slow" {
			once.Do(func() { close(entered) })
			<-release
		}
	}
	b1 := startBroker(t, brokerConfig(t, 1, t.TempDir()), broker.WithBeforeOpen(hold))
	// Registered after the broker's: runs before it is closed, whatever
	// fails below.
	letGo := sync.OnceFunc(func() { close(release) })
	t.Cleanup(letGo)
	b1.createTopic(t, "busy", 1, nil)
	serveOneRecordEach(t, b1, "busy", 1)

	created := make(chan error, 1)
	go func() {
		_, err := b1.admin.CreateTopic(testCtx(t), &stratav1.CreateTopicRequest{Name: "slow", Partitions: 4})
		created <- err
	}()
	select {
	case <-entered:
	case err := <-created:
		t.Fatalf("the topic was created (%v) without opening its replicas", err)
	case <-testCtx(t).Done():
		t.Fatal("the broker never opened the new topic's replicas")
	}
	// The open is held: the other partition is served meanwhile. Were the
	// broker lock held, these would block until testCtx's deadline.
	_, err := b1.produce.Produce(testCtx(t), &stratav1.ProduceRequest{Topic: "busy", Partition: 0, Batch: batchOf(t, "during")})
	if err != nil {
		t.Fatalf("produce while a replica is being opened: %v", err)
	}
	_, recs := b1.readAll(t, "busy", 0, 0)
	if len(recs) != 2 || string(recs[1].Value) != "during" {
		t.Fatalf("fetch while a replica is being opened: %d records", len(recs))
	}
	letGo()
	if err := <-created; err != nil {
		t.Fatalf("create topic: %v", err)
	}
	serveOneRecordEach(t, b1, "slow", 4)
}
