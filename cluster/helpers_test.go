package cluster

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// testLogger writes warnings to stderr under -v and nothing otherwise, so a
// failing run can be re-run verbosely to see what Raft complained about.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

// fsmHarness applies commands to an FSM directly, as Raft would, with
// increasing indexes.
type fsmHarness struct {
	t     testing.TB
	f     *fsm
	index uint64
}

func newFSMHarness(t *testing.T) *fsmHarness {
	return &fsmHarness{t: t, f: newFSM(testLogger())}
}

// applyRaw applies encoded bytes as the next log entry.
func (h *fsmHarness) applyRaw(data []byte) *applyResponse {
	h.t.Helper()
	h.index++
	resp, ok := h.f.Apply(&raft.Log{Index: h.index, Term: 1, Type: raft.LogCommand, Data: data}).(*applyResponse)
	if !ok {
		h.t.Fatalf("Apply returned %T", resp)
	}
	return resp
}

func (h *fsmHarness) apply(c command) *applyResponse {
	h.t.Helper()
	data, err := encodeCommand(c)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.applyRaw(data)
}

// ok applies a command that must be accepted and checks the version bump.
func (h *fsmHarness) ok(c command) *applyResponse {
	h.t.Helper()
	resp := h.apply(c)
	if resp.err != nil {
		h.t.Fatalf("%s refused: %v", c.typ(), resp.err)
	}
	if v := h.f.meta.Load().Version; v != h.index {
		h.t.Fatalf("%s: version %d, want %d (the command's index)", c.typ(), v, h.index)
	}
	return resp
}

// refused applies a command that must be refused with want, and checks that
// nothing changed: not the metadata, not the offsets, and nobody was woken.
func (h *fsmHarness) refused(c command, want error) error {
	h.t.Helper()
	data, err := encodeCommand(c)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.refusedRaw(data, want)
}

func (h *fsmHarness) refusedRaw(data []byte, want error) error {
	h.t.Helper()
	before := h.f.meta.Load()
	beforeJSON := h.stateJSON()
	changed := h.f.changed.wait()
	resp := h.applyRaw(data)
	if !errors.Is(resp.err, want) {
		h.t.Fatalf("%s: got error %v, want %v", data, resp.err, want)
	}
	if h.f.meta.Load() != before {
		h.t.Fatalf("%s: refused command replaced the metadata", data)
	}
	if !bytes.Equal(h.stateJSON(), beforeJSON) {
		h.t.Fatalf("%s: refused command changed the state", data)
	}
	select {
	case <-changed:
		h.t.Fatalf("%s: refused command closed the Changed channel", data)
	default:
	}
	return resp.err
}

// stateJSON is the whole state as a snapshot would write it, less the
// applied index (which moves for refused commands too).
func (h *fsmHarness) stateJSON() []byte {
	h.t.Helper()
	var buf bytes.Buffer
	if err := encodeSnapshot(&buf, 0, h.f.meta.Load(), h.f.offsets.snapshot(), h.f.memberships.snapshot(), h.f.nextProducerID, h.f.scram.load()); err != nil {
		h.t.Fatal(err)
	}
	return buf.Bytes()
}

func broker(id int32) BrokerInfo {
	return BrokerInfo{ID: id, Addr: "127.0.0.1:" + strconv.Itoa(9100+int(id)), RaftAddr: "127.0.0.1:" + strconv.Itoa(7400+int(id)), Rack: "r" + strconv.Itoa(int(id)%2)}
}

// createCmd builds the command a controller would propose for a new topic.
func createCmd(m *Metadata, name string, partitions int32, rf int, config map[string]string) *createTopicCmd {
	ids := m.BrokerIDs()
	return &createTopicCmd{Topic: TopicInfo{
		Name:        name,
		ID:          newTopicID(),
		Config:      config,
		Partitions:  assignReplicas(ids, partitions, rf, assignmentStart(m, len(ids))),
		CreatedAtMs: 1700000000000,
	}}
}

// cloneMetadata deep-copies m, so a test can check later that m did not
// change.
func cloneMetadata(m *Metadata) *Metadata {
	c := &Metadata{Version: m.Version, Brokers: maps.Clone(m.Brokers), Topics: make(map[string]*TopicInfo, len(m.Topics)), acls: slices.Clone(m.acls)}
	for name, t := range m.Topics {
		nt := *t
		nt.Config = maps.Clone(t.Config)
		nt.Partitions = slices.Clone(t.Partitions)
		for i := range nt.Partitions {
			nt.Partitions[i].Replicas = slices.Clone(t.Partitions[i].Replicas)
			nt.Partitions[i].ISR = slices.Clone(t.Partitions[i].ISR)
		}
		c.Topics[name] = &nt
	}
	return c
}

func mustEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func mustIs(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got error %v, want %v", err, want)
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Close() error  { s.closed = true; return nil }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }

// snapshotBytes takes and persists a snapshot of f.
func snapshotBytes(t testing.TB, f *fsm) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if !sink.closed || sink.cancelled {
		t.Fatalf("sink closed=%v cancelled=%v after a good Persist", sink.closed, sink.cancelled)
	}
	return sink.Bytes()
}

// --- Raft node harness ---

// testConfig is a node on loopback in a temporary directory, with timing a
// little faster than the defaults so the tests spend less time in elections.
func testConfig(t *testing.T, id int32) Config {
	return Config{
		NodeID:             id,
		Dir:                t.TempDir(),
		Bind:               "127.0.0.1:0",
		Logger:             testLogger(),
		HeartbeatTimeout:   200 * time.Millisecond,
		ElectionTimeout:    200 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond,
		CommitTimeout:      10 * time.Millisecond,
	}
}

// openNode opens a node and closes it when the test ends.
func openNode(t *testing.T, cfg Config) *Node {
	t.Helper()
	n, err := Open(cfg)
	if err != nil {
		t.Fatalf("open node %d: %v", cfg.NodeID, err)
	}
	t.Cleanup(func() { n.Close() })
	return n
}

func testContext(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func waitReady(t *testing.T, n *Node) {
	t.Helper()
	if err := n.WaitReady(testContext(t, 10*time.Second)); err != nil {
		t.Fatalf("node %d: WaitReady: %v", n.cfg.NodeID, err)
	}
}

// waitMetadata waits, through Changed, until cond holds for n's metadata.
func waitMetadata(t *testing.T, n *Node, what string, cond func(*Metadata) bool) *Metadata {
	t.Helper()
	deadline := time.NewTimer(10 * time.Second)
	defer deadline.Stop()
	for {
		ch := n.Changed()
		if m := n.Metadata(); cond(m) {
			return m
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("node %d: timed out waiting for %s; metadata version %d", n.cfg.NodeID, what, n.Metadata().Version)
		}
	}
}
