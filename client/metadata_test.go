package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// testMetadata describes a cluster of three brokers and topic "t" with
// three partitions, the last one without a leader.
func testMetadata(version uint64) *stratav1.GetMetadataResponse {
	return &stratav1.GetMetadataResponse{
		Version:      version,
		ControllerId: 1,
		Brokers: []*stratav1.Broker{
			{Id: 1, Address: "127.0.0.1:1001"},
			{Id: 2, Address: "127.0.0.1:1002"},
			{Id: 3, Address: "127.0.0.1:1003"},
		},
		Topics: []*stratav1.TopicMetadata{{
			Name: "t",
			Partitions: []*stratav1.PartitionMetadata{
				{Partition: 1, Leader: 2, LeaderEpoch: 5},
				{Partition: 0, Leader: 1, LeaderEpoch: 4},
				{Partition: 2, Leader: -1},
			},
		}},
	}
}

func TestSnapshotLookups(t *testing.T) {
	s := newSnapshot(testMetadata(1), time.Now())
	if n, ok := s.partitions("t"); !ok || n != 3 {
		t.Fatalf("partitions(t) = %d, %v", n, ok)
	}
	if _, ok := s.partitions("nope"); ok {
		t.Fatal("unknown topic found")
	}
	if addr, err := s.leaderAddr(TopicPartition{"t", 1}); err != nil || addr != "127.0.0.1:1002" {
		t.Fatalf("leader of t/1: %q, %v", addr, err)
	}
	for _, c := range []struct {
		tp   TopicPartition
		want error
	}{
		{TopicPartition{"nope", 0}, ErrTopicNotFound},
		{TopicPartition{"t", 3}, ErrPartitionNotFound},
		{TopicPartition{"t", -1}, ErrPartitionNotFound},
		{TopicPartition{"t", 2}, ErrLeaderNotAvailable},
	} {
		if _, err := s.leaderAddr(c.tp); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.tp, err, c.want)
		}
	}
	// A leader the broker list does not know is not available either.
	s2 := s.withLeader(TopicPartition{"t", 0}, 9, "")
	if _, err := s2.leaderAddr(TopicPartition{"t", 0}); !errors.Is(err, ErrLeaderNotAvailable) || !IsRetriable(err) {
		t.Errorf("unknown broker: %v", err)
	}
}

func TestLeaderHint(t *testing.T) {
	m := newMetadataCache(nil, 0, time.Hour)
	m.install(testMetadata(1))
	before := m.current()
	tp := TopicPartition{"t", 0}
	if !m.applyLeaderHint(tp, map[string]string{"leader_id": "4", "leader_address": "127.0.0.1:1004"}) {
		t.Fatal("usable hint refused")
	}
	if addr, _ := m.current().leaderAddr(tp); addr != "127.0.0.1:1004" {
		t.Errorf("leader after hint: %q", addr)
	}
	// The old snapshot is untouched: readers holding it see a consistent map.
	if addr, _ := before.leaderAddr(tp); addr != "127.0.0.1:1001" {
		t.Errorf("old snapshot changed: %q", addr)
	}
	for _, md := range []map[string]string{
		{"leader_id": "", "leader_address": ""},           // electing
		{"leader_id": "2", "leader_address": ""},          // no address
		{"leader_id": "x", "leader_address": "h:1"},       // garbage
		{"leader_id": "-1", "leader_address": "h:1"},      // no leader
		{"leader_address": "h:1"},                         // missing id
		{"leader_id": "2", "leader_address": "127.0.0.1"}, // accepted: the address is the broker's business
	} {
		got := m.applyLeaderHint(tp, md)
		want := md["leader_address"] == "127.0.0.1"
		if got != want {
			t.Errorf("hint %v: applied %v", md, got)
		}
	}
	if m.applyLeaderHint(TopicPartition{"unknown", 0}, map[string]string{"leader_id": "1", "leader_address": "h:1"}) {
		t.Error("hint for an unknown topic applied")
	}
}

// A broker whose metadata lags must not take the client back in time.
func TestInstallKeepsNewerVersion(t *testing.T) {
	m := newMetadataCache(nil, 0, time.Hour)
	newer := testMetadata(7)
	newer.Topics[0].Partitions[1].Leader = 3
	m.install(newer)
	m.install(testMetadata(6))
	if addr, _ := m.current().leaderAddr(TopicPartition{"t", 0}); addr != "127.0.0.1:1003" {
		t.Errorf("older metadata replaced newer: leader %q", addr)
	}
	if m.current().version != 7 {
		t.Errorf("version %d", m.current().version)
	}
}

// Callers that ask for a refresh together share one fetch.
func TestRefreshSingleFlight(t *testing.T) {
	var calls atomic.Int32
	release := make(chan struct{})
	m := newMetadataCache(func(ctx context.Context) (*stratav1.GetMetadataResponse, error) {
		calls.Add(1)
		<-release
		return testMetadata(uint64(calls.Load())), nil
	}, 0, time.Hour)
	var wg, started sync.WaitGroup
	for range 10 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			if err := m.refresh(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	// Every caller is running before the fetch may end: on a busy machine
	// a goroutine can otherwise start only after the first fetch is over,
	// and rightly fetch again.
	started.Wait()
	// Wait until the first caller is fetching, then let it finish.
	testutil.WaitFor(t, 5*time.Second, "a caller to start fetching", func() bool { return calls.Load() > 0 })
	close(release)
	wg.Wait()
	if n := calls.Load(); n > 2 {
		// One fetch, or two if a caller arrived just after the first ended.
		t.Errorf("%d fetches for 10 concurrent refreshes", n)
	}
}

// Refreshes are spaced by minInterval however often they are asked for.
func TestRefreshMinInterval(t *testing.T) {
	var calls atomic.Int32
	m := newMetadataCache(func(ctx context.Context) (*stratav1.GetMetadataResponse, error) {
		calls.Add(1)
		return testMetadata(1), nil
	}, 50*time.Millisecond, time.Hour)
	start := time.Now()
	for range 3 {
		if err := m.refresh(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("3 refreshes took %s, want >= 2 intervals", el)
	}
	// A caller whose context ends while waiting out the interval gives up.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if err := m.refresh(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("refresh with a short deadline: %v", err)
	}
}

// fresh starts a background refresh of a snapshot older than maxAge, and
// only then; close waits for it.
func TestFreshMaxAge(t *testing.T) {
	var calls atomic.Int32
	m := newMetadataCache(func(ctx context.Context) (*stratav1.GetMetadataResponse, error) {
		calls.Add(1)
		return testMetadata(uint64(calls.Load())), nil
	}, 0, 200*time.Millisecond)
	defer m.close()
	waitFor := func(n int32) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, fmt.Sprintf("%d fetches", n), func() error {
			if got := calls.Load(); got < n {
				m.fresh()
				return fmt.Errorf("%d fetches, want %d", got, n)
			}
			return nil
		})
	}
	if s := m.fresh(); s.version != 0 {
		t.Fatal("fresh waited for the refresh") // it returns the stale map at once
	}
	waitFor(1)
	testutil.Eventually(t, 5*time.Second, "the refreshed metadata", func() error {
		if v := m.current().version; v != 1 {
			return fmt.Errorf("the refreshed metadata never arrived: version %d", v)
		}
		return nil
	})
	m.fresh()
	m.fresh()
	if n := calls.Load(); n != 1 {
		t.Fatalf("a fresh snapshot was refreshed: %d fetches", n)
	}
	waitFor(2) // once it is older than maxAge
}
