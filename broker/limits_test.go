package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/security"
)

func TestSegmentFileBound(t *testing.T) {
	for _, tc := range []struct {
		nofile         uint64
		files, written int
	}{
		{0, minSegmentFiles, 0},
		{16, minSegmentFiles, 0},
		{1024, 128, (1024 - 512 - 128) / fdsPerWrittenReplica},
		{4096, 768, (4096 - 1024 - 768) / fdsPerWrittenReplica},
		{20000, 4096, (20000 - 1024 - 4096) / fdsPerWrittenReplica},
		{1 << 20, maxSegmentFiles, (1<<20 - 1024 - maxSegmentFiles) / fdsPerWrittenReplica},
		{^uint64(0), maxSegmentFiles, 1 << 30}, // RLIM_INFINITY
	} {
		files := segmentFileBound(tc.nofile)
		if files != tc.files {
			t.Errorf("segmentFileBound(%d) = %d, want %d", tc.nofile, files, tc.files)
		}
		if got := writtenAtOnce(tc.nofile, files); got != tc.written {
			t.Errorf("writtenAtOnce(%d, %d) = %d, want %d", tc.nofile, files, got, tc.written)
		}
	}
}

// TestNewLimitsReadsTheOpenFileLimit: the segment file cache is sized from
// RLIMIT_NOFILE as the process has it; the partition limit is the setting,
// 20,000 unless set, whatever the open-file limit.
func TestNewLimitsReadsTheOpenFileLimit(t *testing.T) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		t.Fatal(err)
	}
	cfg := config.DefaultBroker()
	l := newLimits(cfg, slog.New(slog.DiscardHandler))
	files := segmentFileBound(rl.Cur)
	if l.segmentFiles != files || l.maxReplicas != 20000 {
		t.Fatalf("default limits %+v; want %d cached files and 20000 replicas", l, files)
	}
	if st := l.segmentFileCache().Stats(); st.Limit != files {
		t.Fatalf("segment file cache %+v, want a bound of %d", st, files)
	}
	if l.maxFetchBytes != 8<<20 || l.maxGroups != 10000 || l.produce != nil || l.fetch != nil {
		t.Fatalf("default limits %+v", l)
	}
	cfg.Limits.MaxPartitionsPerBroker = 7
	cfg.Quotas.ProduceBytesPerSec = 100
	if l := newLimits(cfg, slog.New(slog.DiscardHandler)); l.maxReplicas != 7 || l.segmentFiles != files || l.produce == nil || l.fetch != nil {
		t.Fatalf("configured limits %+v", l)
	}
	var none *limits
	if none.segmentFileCache() != nil {
		t.Fatal("a broker without limits has a shared cache")
	}
}

func TestFetchBytesCap(t *testing.T) {
	l := &limits{maxFetchBytes: 64 << 10}
	for asked, want := range map[int]int{0: 64 << 10, -1: 64 << 10, 1000: 1000, 64 << 10: 64 << 10, 1 << 30: 64 << 10} {
		if got := l.fetchBytes(asked); got != want {
			t.Errorf("fetchBytes(%d) = %d, want %d", asked, got, want)
		}
	}
	var none *limits
	if got := none.fetchBytes(0); got != defaultFetchBytes {
		t.Errorf("no limits: fetchBytes(0) = %d", got)
	}
	big := &limits{maxFetchBytes: 8 << 20}
	if got := big.fetchBytes(0); got != defaultFetchBytes {
		t.Errorf("fetchBytes(0) = %d, want the 1 MiB default", got)
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestQuotaBucket(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1700000000, 0)}
	q := newQuota("quotas.produce_bytes_per_sec", 1000)
	q.now = clock.now

	// A full bucket (one second's worth) lets a request through, however
	// large, and goes into debt.
	if wait := q.take("User:a", 3000); wait != 0 {
		t.Fatalf("first take waited %v", wait)
	}
	// 2000 bytes of debt at 1000/s: a bit over two seconds until a byte.
	wait := q.take("User:a", 10)
	if wait < 2*time.Second || wait > 2*time.Second+5*time.Millisecond {
		t.Fatalf("take in debt: wait %v, want just over 2s", wait)
	}
	// A refused take charges nothing: the wait does not grow.
	if again := q.take("User:a", 10); again != wait {
		t.Fatalf("a refused take changed the debt: %v then %v", wait, again)
	}
	// Principals have their own buckets.
	if w := q.take("User:b", 500); w != 0 {
		t.Fatalf("another principal waited %v", w)
	}
	clock.advance(time.Second)
	if w := q.wait("User:a"); w < time.Second || w > time.Second+5*time.Millisecond {
		t.Fatalf("after a second of 2s debt: wait %v", w)
	}
	clock.advance(time.Second + 10*time.Millisecond)
	if w := q.take("User:a", 10); w != 0 {
		t.Fatalf("after the debt was paid: wait %v", w)
	}
	// The bucket holds at most a second's worth, however long it rests.
	clock.advance(time.Hour)
	q.take("User:a", 1)
	q.charge("User:a", 999)
	if w := q.wait("User:a"); w == 0 {
		t.Fatal("a rested bucket held more than one second's worth")
	}

	// A nil quota is unlimited.
	var none *quota
	if none.take("x", 1<<30) != 0 || none.wait("x") != 0 {
		t.Fatal("a nil quota limited")
	}
}

func TestQuotaForgetsIdlePrincipals(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1700000000, 0)}
	q := newQuota("quotas.fetch_bytes_per_sec", 1000)
	q.now = clock.now
	q.charge("User:in-debt", 5000)
	for i := range maxIdleBuckets + 10 {
		q.take(fmt.Sprintf("User:%d", i), 1)
		clock.advance(time.Millisecond) // about a second in all: the debt of 4s stays
	}
	q.mu.Lock()
	n := len(q.mu.buckets)
	_, kept := q.mu.buckets["User:in-debt"]
	q.mu.Unlock()
	if n > maxIdleBuckets+1 {
		t.Fatalf("%d buckets kept, want at most %d", n, maxIdleBuckets+1)
	}
	if !kept {
		t.Fatal("a principal in debt was forgotten, which would let it start afresh")
	}
}

// TestQuotaAdmission: produce over quota is THROTTLED with a RetryAfter
// and charges nothing; fetch over quota by more than maxQuotaDelay is
// THROTTLED, by less it waits; principals come from the context, "" without
// one.
func TestQuotaAdmission(t *testing.T) {
	l := &limits{produce: newQuota("quotas.produce_bytes_per_sec", 1000), fetch: newQuota("quotas.fetch_bytes_per_sec", 1000)}
	alice := security.WithPrincipal(context.Background(), security.Principal{Name: "User:alice"})
	if err := l.admitProduce(alice, 5000); err != nil {
		t.Fatal(err)
	}
	err := l.admitProduce(alice, 10)
	var be *Error
	if !errors.As(err, &be) || be.Reason != ReasonThrottled || be.RetryAfter < 3*time.Second || !be.Retriable() {
		t.Fatalf("produce over quota: %v; want THROTTLED with a RetryAfter of about 4s", err)
	}
	for _, want := range []string{"User:alice", "quotas.produce_bytes_per_sec", "1000 bytes per second"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %s", err, want)
		}
	}
	// Another principal, and the anonymous one, are not held back.
	if err := l.admitProduce(context.Background(), 10); err != nil {
		t.Fatalf("dev-mode caller: %v", err)
	}
	l.produce.mu.Lock()
	_, counted := l.produce.mu.buckets[""]
	l.produce.mu.Unlock()
	if !counted {
		t.Fatal("a caller without a principal was not counted under \"\"")
	}

	l.chargeFetch(alice, 5000)
	if _, err := l.admitFetch(alice); ReasonOf(err) != ReasonThrottled {
		t.Fatalf("fetch 4s over quota: %v; want THROTTLED", err)
	}
	l.chargeFetch(context.Background(), 1100) // 100 bytes of debt: a tenth of a second
	start := time.Now()
	held, err := l.admitFetch(context.Background())
	if err != nil {
		t.Fatalf("fetch a little over quota: %v; want it delayed, not refused", err)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond || held < 50*time.Millisecond || held > waited {
		t.Fatalf("fetch over quota went through after %v, reported held %v", waited, held)
	}
	l.chargeFetch(context.Background(), 500)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.admitFetch(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("delayed fetch of a cancelled call: %v", err)
	}
	var none *limits
	if none.admitProduce(alice, 1<<30) != nil || func() error { _, err := none.admitFetch(alice); return err }() != nil {
		t.Fatal("no limits limited")
	}
}

func TestCheckStartSpace(t *testing.T) {
	var logged strings.Builder
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	free := func(n int64, err error) func(string) (int64, error) {
		return func(string) (int64, error) { return n, err }
	}
	// Short of space: the broker starts all the same, and says why produce
	// will be refused.
	if !checkStartSpace("/srv/strata", 64<<20, free(1<<20, nil), logger) {
		t.Fatal("1 MiB free with 64 MiB required is not short of space")
	}
	for _, want := range []string{"/srv/strata", "free_bytes=1048576", "storage.min_free_bytes=64MiB", "STORAGE_FULL"} {
		if !strings.Contains(logged.String(), want) {
			t.Errorf("%q does not say %s", logged.String(), want)
		}
	}
	if checkStartSpace("/srv/strata", 64<<20, free(64<<20, nil), logger) {
		t.Fatal("exactly enough is short")
	}
	if checkStartSpace("/srv/strata", 0, free(0, nil), logger) {
		t.Fatal("check disabled, and short")
	}
	if checkStartSpace("/srv/strata", 64<<20, free(0, syscall.ENOSYS), logger) {
		t.Fatal("unreadable free space is short")
	}
	// The real statfs reads this file system.
	if n, err := freeBytes(t.TempDir()); err != nil || n <= 0 {
		t.Fatalf("freeBytes = %d, %v", n, err)
	}
}

// TestClusterErrorRetriable: requests that cannot succeed as they are get
// INVALID_REQUEST, not a retriable UNAVAILABLE; not reaching the controller
// stays retriable.
func TestClusterErrorRetriable(t *testing.T) {
	for _, tc := range []struct {
		err       error
		reason    Reason
		retriable bool
	}{
		{errors.Join(cluster.ErrInvalidISR), ReasonInvalidRequest, false},
		{errors.Join(cluster.ErrNotInISR), ReasonInvalidRequest, false},
		{errors.Join(cluster.ErrStaleEpoch), ReasonFencedEpoch, false},
		{&cluster.NotControllerError{ControllerID: 2, Addr: "b2:7400"}, ReasonUnavailable, true},
		{errors.Join(cluster.ErrOutcomeUnknown), ReasonTimeout, true},
		{errors.Join(cluster.ErrClosed), ReasonUnavailable, true},
	} {
		var be *Error
		if !errors.As(clusterError(tc.err), &be) || be.Reason != tc.reason || be.Retriable() != tc.retriable {
			t.Errorf("%v: %+v; want %s, retriable %v", tc.err, be, tc.reason, tc.retriable)
		}
	}
}

func TestCheckISRRequest(t *testing.T) {
	good := ISRRequest{Topic: "t", TopicID: "x", Partition: 0, LeaderID: 1, ISR: []int32{1, 2}}
	if err := checkISRRequest(good); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*ISRRequest){
		"bad topic":          func(r *ISRRequest) { r.Topic = "a b" },
		"negative partition": func(r *ISRRequest) { r.Partition = -1 },
		"negative leader":    func(r *ISRRequest) { r.LeaderID = -1 },
		"negative epoch":     func(r *ISRRequest) { r.LeaderEpoch = -3 },
		"empty ISR":          func(r *ISRRequest) { r.ISR = nil },
		"duplicate in ISR":   func(r *ISRRequest) { r.ISR = []int32{1, 1} },
		"negative in ISR":    func(r *ISRRequest) { r.ISR = []int32{1, -2} },
	} {
		r := good
		r.ISR = append([]int32(nil), good.ISR...)
		mutate(&r)
		if err := checkISRRequest(r); ReasonOf(err) != ReasonInvalidRequest {
			t.Errorf("%s: %v; want INVALID_REQUEST", name, err)
		}
	}
}
