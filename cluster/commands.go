package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// Commands are the entries of the metadata Raft log: a tagged union encoded
// as one JSON object, {"type": "...", "v": 1, ...fields}. JSON keeps the log
// readable with ordinary tools and lets a command grow fields.
//
// Decoding is strict: an unknown type, an unknown version or an unknown
// field is an ErrInvalidCommand result and changes nothing. Strictness is
// what keeps replicas identical: a field that an older broker silently
// ignored would make its state differ from a newer broker's. A command that
// gains a field therefore gets a new version, and a proposer emits it only
// once every voter understands it (the upgrade rule for the log format).
const commandVersion = 1

// commandVersions are the commands whose current version is above
// commandVersion. Older versions of them still decode, so a log written
// before stays readable.
var commandVersions = map[string]int{
	// v2 names the partition epoch the change was computed from.
	cmdChangeISR: 2,
}

func versionOf(typ string) int {
	if v, ok := commandVersions[typ]; ok {
		return v
	}
	return commandVersion
}

// Command type tags.
const (
	cmdRegisterBroker   = "registerBroker"
	cmdCreateTopic      = "createTopic"
	cmdDeleteTopic      = "deleteTopic"
	cmdAlterTopicConfig = "alterTopicConfig"
	cmdAddPartitions    = "addPartitions"
	cmdCommitOffsets    = "commitOffsets"
	cmdChangeLeader     = "changeLeader"
	cmdChangeISR        = "changeISR"
	cmdAllocateProducer = "allocateProducerId"
	cmdReserveProducers = "reserveProducerIds"
	cmdAddACLs          = "addACLs"
	cmdRemoveACLs       = "removeACLs"
	cmdDeleteGroup      = "deleteGroup"
	cmdSaveGroup        = "saveGroup"
	cmdDeleteOffsets    = "deleteOffsets"
	cmdSetSCRAM         = "setSCRAM"    // scram.go
	cmdDeleteSCRAM      = "deleteSCRAM" // scram.go
)

// header is the tag every command starts with.
type header struct {
	Type string `json:"type"`
	V    int    `json:"v"`
}

func (h *header) hdr() *header { return h }

// command is one decoded log entry. Each type's state transition lives in
// transitions.go.
type command interface {
	hdr() *header
	typ() string
}

// registerBrokerCmd adds a broker or replaces what is known about it (a
// broker that restarts with a new address registers again).
type registerBrokerCmd struct {
	header
	Broker BrokerInfo `json:"broker"`
}

// createTopicCmd creates a topic with a complete assignment chosen by the
// proposer, including the random id and the creation time, so applying it
// needs no randomness and no clock.
type createTopicCmd struct {
	header
	Topic TopicInfo `json:"topic"`
}

// deleteTopicCmd deletes a topic and every committed offset of it. ID, when
// set, must match: a delete aimed at a topic that has since been deleted and
// recreated does not remove the new one.
type deleteTopicCmd struct {
	header
	Name string `json:"name"`
	ID   string `json:"id,omitempty"`
}

// alterTopicConfigCmd deletes the keys in Delete and then sets those in Set
// (the two never overlap).
type alterTopicConfigCmd struct {
	header
	Name   string            `json:"name"`
	Set    map[string]string `json:"set,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

// addPartitionsCmd adds partitions to a topic: Partitions are the new ones
// only, numbered on from the topic's last, with their placement, ISR,
// leader and epoch chosen by the proposer (as for createTopicCmd). ID pins
// the command to the topic the proposer saw, as for deleteTopicCmd.
// Existing partitions are never touched.
type addPartitionsCmd struct {
	header
	Name       string          `json:"name"`
	ID         string          `json:"id"`
	Partitions []PartitionInfo `json:"partitions"`
}

// commitOffsetsCmd records a group's positions. All entries are applied or
// none: a command naming a missing partition is refused whole.
type commitOffsetsCmd struct {
	header
	Group         string              `json:"group"`
	Commits       []offsetCommitEntry `json:"commits"`
	CommittedAtMs int64               `json:"committedAtMs"`
}

// deleteGroupCmd removes a consumer group's committed offsets.
type deleteGroupCmd struct {
	header
	Group string `json:"group"`
}

// deleteOffsetsCmd removes some of a consumer group's committed offsets
// (Kafka's OffsetDelete); partitions it has none for are no error. The
// group goes once it has none left.
type deleteOffsetsCmd struct {
	header
	Group      string               `json:"group"`
	Partitions []offsetPartitionRef `json:"partitions"`
}

// offsetPartitionRef names one partition of a deleteOffsetsCmd.
type offsetPartitionRef struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// saveGroupCmd replaces a consumer group's membership, written by the
// group coordinator on the controller whenever it changes; a nil
// Membership removes it (the group has no members). The whole membership
// is written each time, so the last command applied is the group's state.
// Term is the Raft term of the coordinator that wrote it; the command
// applies only in a log entry of that term, so a coordinator of an earlier
// term on a broker that lost the lead and won it back cannot overwrite
// what its successor resumed from.
type saveGroupCmd struct {
	header
	Term       uint64           `json:"term"`
	Group      string           `json:"group"`
	Membership *GroupMembership `json:"membership,omitempty"`
}

// offsetCommitEntry is one partition's position in a commitOffsetsCmd and in
// a snapshot.
type offsetCommitEntry struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Offset        int64  `json:"offset"`
	Metadata      string `json:"metadata,omitempty"`
	CommittedAtMs int64  `json:"committedAtMs,omitempty"` // snapshots only; commands carry one time for all
}

// changeLeaderCmd moves leadership of a partition and bumps its epoch. It is
// fenced by ExpectedEpoch so that two controllers' (or two retries')
// decisions cannot both take effect.
type changeLeaderCmd struct {
	header
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	NewLeader     int32  `json:"newLeader"`
	ExpectedEpoch int32  `json:"expectedEpoch"`
}

// changeISRCmd replaces a partition's ISR. LeaderEpoch fences it: only the
// current leadership may change the ISR. PartitionEpoch (v2) makes it a
// compare-and-set: it applies only to the state it was computed from. A v1
// command, from a log written before partition epochs, has none and is
// fenced by the leader epoch alone.
type changeISRCmd struct {
	header
	Topic          string  `json:"topic"`
	Partition      int32   `json:"partition"`
	ISR            []int32 `json:"isr"`
	LeaderEpoch    int32   `json:"leaderEpoch"`
	PartitionEpoch int32   `json:"partitionEpoch,omitempty"`
}

// allocateProducerIDCmd hands out the next producer id. It carries nothing:
// the id comes from the state machine's counter, so every replica hands out
// the same one, and an id is never handed out twice.
type allocateProducerIDCmd struct {
	header
}

// reserveProducerIDsCmd moves the producer id counter past Above, unless it
// is past it already: a topic restored from the bucket brings producer state
// that names ids another cluster handed out, which this one must never hand
// out again.
type reserveProducerIDsCmd struct {
	header
	Above int64 `json:"above"`
}

// addACLsCmd stores ACLs. It is all or nothing: one invalid ACL, or more
// than MaxACLs stored in all, refuses the whole command. An ACL equal to
// one already stored (or listed twice) is stored once, so a retried add is
// harmless.
type addACLsCmd struct {
	header
	ACLs []aclEntry `json:"acls"`
}

// removeACLsCmd removes the stored ACLs equal to those listed. An ACL that
// is not stored is skipped rather than refused: removing is idempotent, and
// the response says how many went. An invalid ACL refuses the command, as
// it can only be a mistake.
type removeACLsCmd struct {
	header
	ACLs []aclEntry `json:"acls"`
}

func (*reserveProducerIDsCmd) typ() string { return cmdReserveProducers }
func (*addACLsCmd) typ() string            { return cmdAddACLs }
func (*removeACLsCmd) typ() string         { return cmdRemoveACLs }
func (*registerBrokerCmd) typ() string     { return cmdRegisterBroker }
func (*createTopicCmd) typ() string        { return cmdCreateTopic }
func (*deleteTopicCmd) typ() string        { return cmdDeleteTopic }
func (*alterTopicConfigCmd) typ() string   { return cmdAlterTopicConfig }
func (*addPartitionsCmd) typ() string      { return cmdAddPartitions }
func (*commitOffsetsCmd) typ() string      { return cmdCommitOffsets }
func (*changeLeaderCmd) typ() string       { return cmdChangeLeader }
func (*changeISRCmd) typ() string          { return cmdChangeISR }
func (*allocateProducerIDCmd) typ() string { return cmdAllocateProducer }
func (*deleteGroupCmd) typ() string        { return cmdDeleteGroup }
func (*saveGroupCmd) typ() string          { return cmdSaveGroup }
func (*deleteOffsetsCmd) typ() string      { return cmdDeleteOffsets }

// newCommand returns an empty command of the given type and version, or nil
// if this build does not know it.
func newCommand(typ string, v int) command {
	if v < 1 || v > versionOf(typ) {
		return nil
	}
	switch typ {
	case cmdRegisterBroker:
		return &registerBrokerCmd{}
	case cmdCreateTopic:
		return &createTopicCmd{}
	case cmdDeleteTopic:
		return &deleteTopicCmd{}
	case cmdAlterTopicConfig:
		return &alterTopicConfigCmd{}
	case cmdAddPartitions:
		return &addPartitionsCmd{}
	case cmdCommitOffsets:
		return &commitOffsetsCmd{}
	case cmdChangeLeader:
		return &changeLeaderCmd{}
	case cmdChangeISR:
		return &changeISRCmd{}
	case cmdAllocateProducer:
		return &allocateProducerIDCmd{}
	case cmdReserveProducers:
		return &reserveProducerIDsCmd{}
	case cmdAddACLs:
		return &addACLsCmd{}
	case cmdRemoveACLs:
		return &removeACLsCmd{}
	case cmdDeleteGroup:
		return &deleteGroupCmd{}
	case cmdSaveGroup:
		return &saveGroupCmd{}
	case cmdDeleteOffsets:
		return &deleteOffsetsCmd{}
	case cmdSetSCRAM:
		return &setSCRAMCmd{}
	case cmdDeleteSCRAM:
		return &deleteSCRAMCmd{}
	}
	return nil
}

// encodeCommand stamps the command's tag and version and encodes it.
func encodeCommand(c command) ([]byte, error) {
	*c.hdr() = header{Type: c.typ(), V: versionOf(c.typ())}
	return json.Marshal(c)
}

// decodeCommand decodes one log entry; every failure wraps ErrInvalidCommand.
func decodeCommand(data []byte) (command, error) {
	var h header
	if err := json.Unmarshal(data, &h); err != nil {
		return nil, errorf(ErrInvalidCommand, "%v", err)
	}
	c := newCommand(h.Type, h.V)
	if c == nil {
		return nil, errorf(ErrInvalidCommand, "unknown command type %q version %d", h.Type, h.V)
	}
	if err := decodeStrict(data, c); err != nil {
		return nil, errorf(ErrInvalidCommand, "%s v%d: %v", h.Type, h.V, err)
	}
	return c, nil
}

// decodeStrict decodes exactly one JSON value into v, refusing unknown fields
// and trailing data.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the command")
	}
	return nil
}
