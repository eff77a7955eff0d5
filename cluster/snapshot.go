package cluster

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"

	"github.com/strata-log/strata/security"
)

// snapshotVersion is the version of the snapshot format below. Version 2
// added the producer id counter; a version 1 snapshot (written before there
// was one) restores with the counter at FirstProducerID. Version 3 added
// the ACLs; a version 1 or 2 snapshot (written before there were any)
// restores with none. Version 4 added consumer group memberships; an older
// snapshot restores with none (their coordinators kept them in memory).
const snapshotVersion = 4

// snapshotFile is the whole state as one JSON document. Lists are sorted
// (brokers by id, topics by name, groups by name, offsets by topic and
// partition) so that the same state always encodes to the same bytes; ACLs
// keep the order they were added in, which is part of the state.
type snapshotFile struct {
	V int `json:"v"`
	// Index is the Raft index of the last command applied.
	Index   uint64          `json:"index"`
	Version uint64          `json:"version"`
	Brokers []BrokerInfo    `json:"brokers"`
	Topics  []*TopicInfo    `json:"topics"`
	Groups  []groupSnapshot `json:"groups"`
	// NextProducerID is the producer id the next allocation hands out.
	NextProducerID int64 `json:"nextProducerId"`
	// ACLs in the order they were added (version 3 on).
	ACLs []aclEntry `json:"acls,omitempty"`
	// Memberships of consumer groups with members, by group (version 4
	// on).
	Memberships []membershipSnapshot `json:"memberships,omitempty"`
	// SCRAM credentials, by user and mechanism (scram.go); absent when
	// there are none, so the version did not change with them.
	SCRAM []scramEntry `json:"scram,omitempty"`
}

// membershipSnapshot is one consumer group's membership in a snapshot.
type membershipSnapshot struct {
	Group      string           `json:"group"`
	Membership *GroupMembership `json:"membership"`
}

// groupSnapshot is one consumer group's offsets in a snapshot.
type groupSnapshot struct {
	Group   string              `json:"group"`
	Offsets []offsetCommitEntry `json:"offsets"`
}

// encodeSnapshot writes the state to w.
func encodeSnapshot(w io.Writer, index uint64, meta *Metadata, offsets map[string]groupOffsets, memberships map[string]*GroupMembership, nextProducerID int64, scram map[scramKey]SCRAMCredential) error {
	s := snapshotFile{
		V:              snapshotVersion,
		Index:          index,
		Version:        meta.Version,
		Brokers:        make([]BrokerInfo, 0, len(meta.Brokers)),
		Topics:         make([]*TopicInfo, 0, len(meta.Topics)),
		Groups:         make([]groupSnapshot, 0, len(offsets)),
		NextProducerID: nextProducerID,
		ACLs:           aclEntries(meta.acls),
		SCRAM:          scramEntries(scram),
	}
	for _, id := range meta.BrokerIDs() {
		s.Brokers = append(s.Brokers, meta.Brokers[id])
	}
	for _, name := range meta.TopicNames() {
		s.Topics = append(s.Topics, meta.Topics[name])
	}
	for group, offs := range offsets {
		g := groupSnapshot{Group: group, Offsets: make([]offsetCommitEntry, 0, len(offs))}
		for tp, oc := range offs {
			g.Offsets = append(g.Offsets, offsetCommitEntry{
				Topic: tp.Topic, Partition: tp.Partition,
				Offset: oc.Offset, Metadata: oc.Metadata, CommittedAtMs: oc.CommittedAtMs,
			})
		}
		slices.SortFunc(g.Offsets, func(a, b offsetCommitEntry) int {
			return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
		})
		s.Groups = append(s.Groups, g)
	}
	slices.SortFunc(s.Groups, func(a, b groupSnapshot) int { return cmp.Compare(a.Group, b.Group) })
	for group, m := range memberships {
		s.Memberships = append(s.Memberships, membershipSnapshot{Group: group, Membership: m})
	}
	slices.SortFunc(s.Memberships, func(a, b membershipSnapshot) int { return cmp.Compare(a.Group, b.Group) })

	bw := bufio.NewWriterSize(w, 64<<10)
	if err := json.NewEncoder(bw).Encode(&s); err != nil {
		return err
	}
	return bw.Flush()
}

// restoredState is a decoded snapshot, ready to install.
type restoredState struct {
	index          uint64
	meta           *Metadata
	offsets        map[string]groupOffsets
	memberships    map[string]*GroupMembership
	nextProducerID int64
	scram          map[scramKey]SCRAMCredential
}

// decodeSnapshot reads and checks a snapshot. It refuses unknown versions and
// fields, duplicate brokers, topics, groups, offsets or ACLs, topics whose
// assignment is inconsistent, invalid ACLs and more than MaxACLs of them, so
// a damaged snapshot fails the restore instead of installing a state no
// command could have produced.
func decodeSnapshot(r io.Reader) (*restoredState, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var s snapshotFile
	if err := decodeStrict(data, &s); err != nil {
		return nil, err
	}
	switch {
	case s.V == 1 && s.NextProducerID == 0:
		s.NextProducerID = FirstProducerID
	case s.V != 2 && s.V != 3 && s.V != snapshotVersion:
		return nil, fmt.Errorf("unknown snapshot version %d", s.V)
	case s.NextProducerID < FirstProducerID:
		return nil, fmt.Errorf("producer id counter %d is below the first producer id %d", s.NextProducerID, FirstProducerID)
	}
	if s.V < 3 && len(s.ACLs) > 0 {
		return nil, fmt.Errorf("a version %d snapshot has ACLs, which came with version 3", s.V)
	}
	if s.V < 4 && len(s.Memberships) > 0 {
		return nil, fmt.Errorf("a version %d snapshot has group memberships, which came with version 4", s.V)
	}
	memberships := make(map[string]*GroupMembership, len(s.Memberships))
	for _, g := range s.Memberships {
		if _, dup := memberships[g.Group]; dup {
			return nil, fmt.Errorf("group %q has two memberships", g.Group)
		}
		if g.Membership == nil {
			return nil, fmt.Errorf("group %q: null membership", g.Group)
		}
		if err := validateGroupMembership(g.Group, g.Membership); err != nil {
			return nil, err
		}
		memberships[g.Group] = g.Membership
	}
	meta := &Metadata{
		Version: s.Version,
		Brokers: make(map[int32]BrokerInfo, len(s.Brokers)),
		Topics:  make(map[string]*TopicInfo, len(s.Topics)),
	}
	for _, b := range s.Brokers {
		if _, dup := meta.Brokers[b.ID]; dup {
			return nil, fmt.Errorf("broker %d appears twice", b.ID)
		}
		if err := validateBroker(b); err != nil {
			return nil, err
		}
		meta.Brokers[b.ID] = b
	}
	for _, t := range s.Topics {
		if t == nil {
			return nil, fmt.Errorf("null topic")
		}
		if _, dup := meta.Topics[t.Name]; dup {
			return nil, fmt.Errorf("topic %q appears twice", t.Name)
		}
		if err := ValidateTopicName(t.Name); err != nil {
			return nil, err
		}
		if err := validateTopicID(t.ID); err != nil {
			return nil, err
		}
		if err := validateAssignment(t.Name, t.Partitions, meta.Brokers); err != nil {
			return nil, err
		}
		if t.Config == nil {
			t.Config = map[string]string{}
		}
		meta.Topics[t.Name] = t
	}
	offsets := make(map[string]groupOffsets, len(s.Groups))
	for _, g := range s.Groups {
		if _, dup := offsets[g.Group]; dup {
			return nil, fmt.Errorf("group %q appears twice", g.Group)
		}
		if g.Group == "" || len(g.Offsets) == 0 {
			return nil, fmt.Errorf("group %q: empty name or no offsets", g.Group)
		}
		offs := make(groupOffsets, len(g.Offsets))
		for _, e := range g.Offsets {
			tp := TopicPartition{e.Topic, e.Partition}
			if _, dup := offs[tp]; dup {
				return nil, fmt.Errorf("group %q: %s/%d appears twice", g.Group, e.Topic, e.Partition)
			}
			offs[tp] = OffsetCommit{Offset: e.Offset, Metadata: e.Metadata, CommittedAtMs: e.CommittedAtMs}
		}
		offsets[g.Group] = offs
	}
	if meta.acls, err = snapshotACLs(s.ACLs); err != nil {
		return nil, err
	}
	scram, err := snapshotSCRAM(s.SCRAM)
	if err != nil {
		return nil, err
	}
	return &restoredState{index: s.Index, meta: meta, offsets: offsets, memberships: memberships, nextProducerID: s.NextProducerID, scram: scram}, nil
}

// snapshotACLs decodes and checks a snapshot's ACLs: nil for none, as the
// state machine keeps it.
func snapshotACLs(entries []aclEntry) ([]security.ACL, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	if len(entries) > MaxACLs {
		return nil, errorf(ErrTooManyACLs, "the snapshot has %d ACLs; at most %d (MaxACLs) can be stored", len(entries), MaxACLs)
	}
	acls, err := commandACLs(entries) // each one valid
	if err != nil {
		return nil, err
	}
	seen := make(map[security.ACL]struct{}, len(acls))
	for _, a := range acls {
		if _, dup := seen[a]; dup {
			return nil, fmt.Errorf("ACL %q appears twice", a.String())
		}
		seen[a] = struct{}{}
	}
	return acls, nil
}
