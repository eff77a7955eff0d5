package cluster

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/strata-log/strata/security"
)

// snapshotHead is how a snapshot of the current version starts.
var snapshotHead = fmt.Sprintf(`{"v":%d,`, snapshotVersion)

// richState builds a state with every kind of content.
func richState(t *testing.T) *fsmHarness {
	h := threeBrokers(t)
	h.ok(createCmd(h.f.meta.Load(), "orders", 4, 3, map[string]string{"retention.ms": "-1", "segment.bytes": "1048576"}))
	h.ok(createCmd(h.f.meta.Load(), "events", 2, 1, nil))
	h.ok(createCmd(h.f.meta.Load(), "gone", 1, 1, nil))
	p, _ := h.f.meta.Load().Partition("orders", 1)
	h.ok(&changeLeaderCmd{Topic: "orders", Partition: 1, NewLeader: p.ISR[2], ExpectedEpoch: 0})
	h.ok(&changeISRCmd{Topic: "orders", Partition: 1, ISR: []int32{p.ISR[2], p.ISR[0]}, LeaderEpoch: 1, PartitionEpoch: 1})
	h.ok(&changeLeaderCmd{Topic: "orders", Partition: 3, NewLeader: NoLeader, ExpectedEpoch: 0})
	h.ok(&commitOffsetsCmd{Group: "billing", CommittedAtMs: 1000, Commits: []offsetCommitEntry{
		{Topic: "orders", Partition: 0, Offset: 100, Metadata: "gen-3"},
		{Topic: "orders", Partition: 3, Offset: 7},
		{Topic: "events", Partition: 1, Offset: 0},
	}})
	h.ok(&commitOffsetsCmd{Group: "audit", CommittedAtMs: 2000, Commits: []offsetCommitEntry{{Topic: "gone", Partition: 0, Offset: 1}}})
	h.ok(&deleteTopicCmd{Name: "gone"})
	h.ok(&alterTopicConfigCmd{Name: "events", Set: map[string]string{"flush.policy": "never"}})
	h.ok(&allocateProducerIDCmd{})
	h.ok(&allocateProducerIDCmd{})
	h.refused(&deleteTopicCmd{Name: "gone"}, ErrTopicNotFound) // the index moves past the version
	return h
}

func TestSnapshotRoundTrip(t *testing.T) {
	src := richState(t)
	data := snapshotBytes(t, src.f)

	// Restore into a node that already has other state: it must be replaced
	// entirely, not merged.
	dst := newFSMHarness(t)
	dst.ok(&registerBrokerCmd{Broker: broker(9)})
	dst.ok(createCmd(dst.f.meta.Load(), "stale", 1, 1, nil))
	dst.ok(&commitOffsetsCmd{Group: "stale-group", Commits: []offsetCommitEntry{{Topic: "stale", Partition: 0, Offset: 1}}})
	changed := dst.f.changed.wait()
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("Restore did not signal Changed")
	}

	mustEqual(t, "metadata", dst.f.meta.Load(), src.f.meta.Load())
	mustEqual(t, "offsets", dst.f.offsets.groups, src.f.offsets.groups)
	if got := dst.f.nextProducerID; got != FirstProducerID+2 {
		t.Fatalf("restored producer id counter %d, want %d", got, FirstProducerID+2)
	}
	if got, want := dst.f.index.Load(), src.f.index.Load(); got != want {
		t.Fatalf("index %d, want %d", got, want)
	}
	if src.f.index.Load() == src.f.meta.Load().Version {
		t.Fatal("test state should have index > version")
	}
	// And the same bytes again.
	if again := snapshotBytes(t, dst.f); !bytes.Equal(again, data) {
		t.Fatalf("snapshot of the restored state differs:\n%s\n%s", data, again)
	}
	// The restored state keeps working.
	dst.index = dst.f.index.Load()
	dst.ok(createCmd(dst.f.meta.Load(), "after", 1, 3, nil))
	dst.refused(createCmd(dst.f.meta.Load(), "orders", 1, 1, nil), ErrTopicExists)
	if id := dst.ok(&allocateProducerIDCmd{}).producerID; id != FirstProducerID+2 {
		t.Fatalf("first producer id after restore %d, want %d", id, FirstProducerID+2)
	}
}

// TestSnapshotVersion1: a snapshot written before producer ids existed
// restores with the counter at its start.
func TestSnapshotVersion1(t *testing.T) {
	src := richState(t)
	cur := string(snapshotBytes(t, src.f))
	v1 := strings.Replace(strings.Replace(cur, snapshotHead, `{"v":1,`, 1), `,"nextProducerId":1002`, ``, 1)
	if v1 == cur || strings.Contains(v1, "nextProducerId") || !strings.HasPrefix(v1, `{"v":1,`) {
		t.Fatalf("could not make a version 1 snapshot of %s", cur)
	}
	dst := newFSMHarness(t)
	if err := dst.f.Restore(io.NopCloser(strings.NewReader(v1))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "metadata", dst.f.meta.Load(), src.f.meta.Load())
	if dst.f.nextProducerID != FirstProducerID {
		t.Fatalf("producer id counter %d after a version 1 snapshot, want %d", dst.f.nextProducerID, FirstProducerID)
	}
}

func TestSnapshotEmptyRoundTrip(t *testing.T) {
	src := newFSMHarness(t)
	data := snapshotBytes(t, src.f)
	dst := newFSMHarness(t)
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "metadata", dst.f.meta.Load(), emptyMetadata())
}

// TestRestoreRefusesDamage: a bad snapshot fails the restore and leaves the
// state as it was.
func TestRestoreRefusesDamage(t *testing.T) {
	good := string(snapshotBytes(t, richState(t).f))
	for name, damaged := range map[string]string{
		"truncated":       good[:len(good)/2],
		"version":         strings.Replace(good, snapshotHead, fmt.Sprintf(`{"v":%d,`, snapshotVersion+1), 1),
		"unknown field":   strings.Replace(good, snapshotHead, snapshotHead+`"extra":1,`, 1),
		"producer ids":    strings.Replace(good, `"nextProducerId":1002`, `"nextProducerId":999`, 1),
		"v1 producer ids": strings.Replace(good, snapshotHead, `{"v":1,`, 1),
		"duplicate topic": strings.Replace(good, `"name":"events"`, `"name":"orders"`, 1),
		"bad broker ref":  strings.Replace(good, `"replicas":[`, `"replicas":[77,`, 1),
		"empty":           ``,
	} {
		h := richState(t)
		before := h.stateJSON()
		if err := h.f.Restore(io.NopCloser(strings.NewReader(damaged))); err == nil {
			t.Errorf("%s: restore succeeded", name)
			continue
		}
		if !bytes.Equal(h.stateJSON(), before) {
			t.Errorf("%s: failed restore changed the state", name)
		}
	}
}

type failingSink struct{ memSink }

func (s *failingSink) Write([]byte) (int, error) { return 0, io.ErrShortWrite }

func TestPersistCancelsOnError(t *testing.T) {
	h := richState(t)
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink failingSink
	if err := snap.Persist(&sink); err == nil {
		t.Fatal("Persist succeeded on a failing sink")
	}
	if !sink.cancelled || sink.closed {
		t.Fatalf("cancelled=%v closed=%v, want the sink cancelled", sink.cancelled, sink.closed)
	}
}

// TestSnapshotIsPointInTime: a snapshot taken before more commands persists
// the state as it was when taken, as Raft requires (Persist runs while Apply
// goes on).
func TestSnapshotIsPointInTime(t *testing.T) {
	h := richState(t)
	want := snapshotBytes(t, h.f)
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.ok(createCmd(h.f.meta.Load(), "later", 1, 1, nil))
	h.ok(&commitOffsetsCmd{Group: "billing", Commits: []offsetCommitEntry{{Topic: "orders", Partition: 0, Offset: 101}}})
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sink.Bytes(), want) {
		t.Fatal("snapshot includes changes made after it was taken")
	}
}

// aclState is richState with ACLs added and removed, in an order that is
// not sorted: the order they were added in is part of the state.
func aclState(t *testing.T) *fsmHarness {
	h := richState(t)
	h.ok(addACLs(aclOpsAdmin, aclBobWrites, aclAliceReads))
	h.ok(removeACLs(aclBobWrites))
	h.ok(addACLs(aclAnyGroups, aclBobWrites))
	return h
}

// TestSnapshotACLs: the ACLs go through a snapshot in their order, and the
// restored state goes on adding and removing from there.
func TestSnapshotACLs(t *testing.T) {
	src := aclState(t)
	want := []security.ACL{aclOpsAdmin, aclAliceReads, aclAnyGroups, aclBobWrites}
	mustEqual(t, "ACLs before the snapshot", src.f.meta.Load().ACLs(), want)
	data := snapshotBytes(t, src.f)
	if !strings.HasPrefix(string(data), snapshotHead) || !strings.Contains(string(data), `"acls":[{"principal":"User:ops","resource":"cluster","op":"admin"},`) {
		t.Fatalf("snapshot without the ACLs in order: %s", data)
	}

	dst := newFSMHarness(t)
	dst.ok(&registerBrokerCmd{Broker: broker(9)})
	dst.ok(addACLs(aclAliceReads, security.ACL{Principal: "User:stale", Resource: security.ResourceCluster, Op: security.OpAdmin}))
	if err := dst.f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "metadata", dst.f.meta.Load(), src.f.meta.Load())
	mustEqual(t, "restored ACLs", dst.f.meta.Load().ACLs(), want)
	if again := snapshotBytes(t, dst.f); !bytes.Equal(again, data) {
		t.Fatalf("snapshot of the restored state differs:\n%s\n%s", data, again)
	}

	dst.index = dst.f.index.Load()
	dst.ok(addACLs(aclAliceReads)) // stored: still once
	if n := dst.ok(removeACLs(aclOpsAdmin)).removed; n != 1 {
		t.Fatalf("removed %d after the restore", n)
	}
	mustEqual(t, "ACLs after more commands", dst.f.meta.Load().ACLs(), want[1:])

	// A state without ACLs writes none, and restores as nil, like a new
	// cluster's.
	empty := snapshotBytes(t, richState(t).f)
	if strings.Contains(string(empty), "acls") {
		t.Fatalf("snapshot without ACLs mentions them: %s", empty)
	}
}

// TestSnapshotVersion2: a snapshot written before ACLs existed restores,
// with none.
func TestSnapshotVersion2(t *testing.T) {
	src := richState(t)
	cur := string(snapshotBytes(t, src.f))
	v2 := strings.Replace(cur, snapshotHead, `{"v":2,`, 1)
	if v2 == cur {
		t.Fatalf("could not make a version 2 snapshot of %s", cur)
	}
	dst := aclState(t)
	if err := dst.f.Restore(io.NopCloser(strings.NewReader(v2))); err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "metadata", dst.f.meta.Load(), src.f.meta.Load())
	if acls := dst.f.meta.Load().ACLs(); acls != nil {
		t.Fatalf("ACLs after a version 2 snapshot: %v", acls)
	}
	if dst.f.nextProducerID != src.f.nextProducerID {
		t.Fatalf("producer id counter %d, want %d", dst.f.nextProducerID, src.f.nextProducerID)
	}
}

// TestRestoreRefusesBadACLs: ACLs no command could have stored fail the
// restore and leave the state as it was.
func TestRestoreRefusesBadACLs(t *testing.T) {
	good := string(snapshotBytes(t, aclState(t).f))
	ops := `{"principal":"User:ops","resource":"cluster","op":"admin"}`
	if !strings.Contains(good, ops) {
		t.Fatalf("snapshot lacks %s: %s", ops, good)
	}
	many := make([]string, MaxACLs+1)
	for i := range many {
		many[i] = fmt.Sprintf(`{"principal":"User:u%d","resource":"topic","name":"t","op":"read"}`, i)
	}
	for name, damaged := range map[string]string{
		"v2 with ACLs":   strings.Replace(good, snapshotHead, `{"v":2,`, 1),
		"invalid ACL":    strings.Replace(good, ops, `{"principal":"ops","resource":"cluster","op":"admin"}`, 1),
		"unknown field":  strings.Replace(good, ops, `{"principal":"User:ops","resource":"cluster","op":"admin","host":"*"}`, 1),
		"duplicate ACL":  strings.Replace(good, ops, ops+","+ops, 1),
		"over the limit": strings.Replace(good, ops, strings.Join(many, ","), 1),
	} {
		if damaged == good {
			t.Fatalf("%s: damage did not apply", name)
		}
		h := aclState(t)
		before := h.stateJSON()
		err := h.f.Restore(io.NopCloser(strings.NewReader(damaged)))
		if err == nil {
			t.Errorf("%s: restore succeeded", name)
			continue
		}
		t.Logf("%s: %v", name, err)
		if !bytes.Equal(h.stateJSON(), before) {
			t.Errorf("%s: failed restore changed the state", name)
		}
	}
}
