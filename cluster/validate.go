package cluster

import (
	"fmt"
	"net"
	"slices"
	"unicode"
	"unicode/utf8"

	"github.com/strata-log/strata/security"
)

// Limits checked by the proposer before a change enters Raft and again by
// the state machine when it is applied.
const (
	// MaxTopicNameLen is the longest topic name; Kafka's limit, so names move
	// between the two systems.
	MaxTopicNameLen = 249
	// MaxGroupNameLen is the longest consumer group name, in bytes: as long
	// as a topic name. Every broker keeps every group's name in memory and
	// every snapshot carries it.
	MaxGroupNameLen = 249
	// MaxPartitions bounds the partition count of one topic.
	MaxPartitions = 10000
	// MaxOffsetMetadata bounds the metadata string of one offset commit, in
	// bytes (Kafka's offset.metadata.max.bytes default): everything committed
	// lives in every snapshot.
	MaxOffsetMetadata = 4096
	// MaxACLs bounds the ACLs stored in the cluster, and those one call may
	// name. Every broker holds them all in memory and scans them on each
	// authorized request, and every snapshot carries them: the bound keeps
	// both cheap. Far more than hand-managed ACLs reach; prefixes and "*"
	// cover whole families of names with one ACL.
	MaxACLs = 10000
)

// ValidateTopicName checks the topic naming rules: 1 to MaxTopicNameLen
// characters from [a-zA-Z0-9._-], and neither "." nor "..". Unlike Kafka,
// names that differ only by '.' versus '_' may coexist: Strata has no metric
// names in which the two would collide.
func ValidateTopicName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w %q: must not be empty", ErrInvalidTopicName, name)
	case len(name) > MaxTopicNameLen:
		return fmt.Errorf("%w %q: longer than %d characters", ErrInvalidTopicName, name, MaxTopicNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("%w %q: \".\" and \"..\" are not allowed", ErrInvalidTopicName, name)
	}
	for i := 0; i < len(name); i++ {
		if !topicNameChar(name[i]) {
			return fmt.Errorf("%w %q: only letters, digits, '.', '_' and '-' are allowed", ErrInvalidTopicName, name)
		}
	}
	return nil
}

func topicNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// ValidateGroupName checks a consumer group name: 1 to MaxGroupNameLen
// bytes of UTF-8 without control characters (which would garble logs and
// listings). Any other character is allowed, as in Kafka. The error wraps
// ErrInvalidOffsetCommit.
//
// The proposer checks it, not the state machine: a name stored before this
// rule existed must still apply when the log is replayed.
func ValidateGroupName(name string) error {
	switch {
	case name == "":
		return errorf(ErrInvalidOffsetCommit, "empty group name")
	case len(name) > MaxGroupNameLen:
		return errorf(ErrInvalidOffsetCommit, "group name of %d bytes (%.20q...): at most %d allowed", len(name), name, MaxGroupNameLen)
	case !utf8.ValidString(name):
		return errorf(ErrInvalidOffsetCommit, "group name %q is not valid UTF-8", name)
	}
	for _, r := range name {
		if unicode.IsControl(r) {
			return errorf(ErrInvalidOffsetCommit, "group name %q: control characters are not allowed", name)
		}
	}
	return nil
}

// ReplicaCounts returns how many partition replicas each registered broker
// holds, and how many it would hold with a new topic of partitions ×
// replicationFactor placed as CreateTopic would place it now (after is nil
// when no placement is possible: a replication factor outside 1 to the
// number of brokers, or a partition count outside 1 to MaxPartitions, which
// CreateTopic refuses anyway). Callers use it to refuse a topic that would
// take a broker beyond what it can hold, before proposing it; a change
// committed in between can shift the placement by a little.
func ReplicaCounts(m *Metadata, partitions int32, replicationFactor int) (now, after map[int32]int) {
	brokers := m.BrokerIDs()
	now = make(map[int32]int, len(brokers))
	for _, id := range brokers {
		now[id] = 0
	}
	for _, t := range m.Topics {
		for _, p := range t.Partitions {
			for _, id := range p.Replicas {
				now[id]++
			}
		}
	}
	if len(brokers) == 0 || replicationFactor < 1 || replicationFactor > len(brokers) || validatePartitionCount(int(partitions)) != nil {
		return now, nil
	}
	after = make(map[int32]int, len(now))
	for id, n := range now {
		after[id] = n
	}
	for _, p := range assignReplicas(brokers, partitions, replicationFactor, assignmentStart(m, len(brokers))) {
		for _, id := range p.Replicas {
			after[id]++
		}
	}
	return now, after
}

// validateTopicID checks the 32-lowercase-hex form newTopicID produces.
func validateTopicID(id string) error {
	if len(id) != 32 {
		return errorf(ErrInvalidCommand, "topic id %q: want 32 hex characters", id)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return errorf(ErrInvalidCommand, "topic id %q: want 32 lowercase hex characters", id)
		}
	}
	return nil
}

func validatePartitionCount(n int) error {
	if n < 1 || n > MaxPartitions {
		return errorf(ErrInvalidPartitions, "%d: want 1 to %d", n, MaxPartitions)
	}
	return nil
}

func validateBroker(b BrokerInfo) error {
	if b.ID < 0 {
		return errorf(ErrInvalidBroker, "id %d: must be >= 0", b.ID)
	}
	if err := validateHostPort(b.Addr); err != nil {
		return errorf(ErrInvalidBroker, "broker %d: addr %q: %v", b.ID, b.Addr, err)
	}
	if b.RaftAddr != "" {
		if err := validateHostPort(b.RaftAddr); err != nil {
			return errorf(ErrInvalidBroker, "broker %d: raft addr %q: %v", b.ID, b.RaftAddr, err)
		}
	}
	if b.KafkaAddr != "" {
		if err := validateHostPort(b.KafkaAddr); err != nil {
			return errorf(ErrInvalidBroker, "broker %d: kafka addr %q: %v", b.ID, b.KafkaAddr, err)
		}
	}
	return nil
}

func validateHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" || port == "" {
		return fmt.Errorf("want host:port")
	}
	return nil
}

// validateConfigChange checks the shape of a config change; the values
// themselves were validated by the caller (the config package knows them).
func validateConfigChange(set map[string]string, del []string) error {
	for k := range set {
		if k == "" {
			return errorf(ErrInvalidConfig, "empty key")
		}
	}
	for _, k := range del {
		if k == "" {
			return errorf(ErrInvalidConfig, "empty key")
		}
		if _, ok := set[k]; ok {
			return errorf(ErrInvalidConfig, "key %q is both set and deleted", k)
		}
	}
	return nil
}

// validateOffsetCommit checks what can be checked without the state: the
// state machine also checks that every partition exists.
func validateOffsetCommit(group string, commits []OffsetCommitRequest) error {
	if group == "" {
		return errorf(ErrInvalidOffsetCommit, "empty group")
	}
	for _, c := range commits {
		if c.Offset < 0 {
			return errorf(ErrInvalidOffsetCommit, "group %q, %s/%d: negative offset %d", group, c.Topic, c.Partition, c.Offset)
		}
		if len(c.Metadata) > MaxOffsetMetadata {
			return errorf(ErrInvalidOffsetCommit, "group %q, %s/%d: metadata is %d bytes, at most %d allowed",
				group, c.Topic, c.Partition, len(c.Metadata), MaxOffsetMetadata)
		}
	}
	return nil
}

// validateISR checks that isr is non-empty, free of duplicates and within
// the replicas. The leader check is the caller's. where names the partition
// in the error ("orders/3").
func validateISR(where string, replicas, isr []int32) error {
	if len(isr) == 0 {
		return errorf(ErrInvalidISR, "%s: empty", where)
	}
	for i, id := range isr {
		if !slices.Contains(replicas, id) {
			return errorf(ErrInvalidISR, "%s: broker %d is not a replica (replicas %v)", where, id, replicas)
		}
		if slices.Contains(isr[:i], id) {
			return errorf(ErrInvalidISR, "%s: broker %d appears twice", where, id)
		}
	}
	return nil
}

// validateAssignment checks a full assignment proposed with a new topic:
// partitions numbered 0..n-1 in order, every replica list non-empty, free of
// duplicates and made of registered brokers, a valid ISR, a leader in the
// ISR and a non-negative epoch.
func validateAssignment(topic string, parts []PartitionInfo, brokers map[int32]BrokerInfo) error {
	if err := validatePartitionCount(len(parts)); err != nil {
		return err
	}
	return validatePartitions(topic, parts, 0, brokers)
}

// validatePartitions checks partitions numbered first, first+1, ... as
// validateAssignment describes: a new topic's (first 0) or those added to
// a topic that has first partitions.
func validatePartitions(topic string, parts []PartitionInfo, first int32, brokers map[int32]BrokerInfo) error {
	for i, p := range parts {
		n := first + int32(i)
		where := fmt.Sprintf("%s/%d", topic, n)
		if p.Partition != n {
			return errorf(ErrInvalidAssignment, "%s: partition %d found where %d belongs", where, p.Partition, n)
		}
		if len(p.Replicas) == 0 {
			return errorf(ErrInvalidAssignment, "%s: no replicas", where)
		}
		for j, id := range p.Replicas {
			if slices.Contains(p.Replicas[:j], id) {
				return errorf(ErrInvalidAssignment, "%s: broker %d appears twice in the replicas", where, id)
			}
			if _, ok := brokers[id]; !ok {
				return errorf(ErrBrokerNotFound, "%s: replica %d", where, id)
			}
		}
		if err := validateISR(where, p.Replicas, p.ISR); err != nil {
			return err
		}
		if p.Leader != NoLeader && !slices.Contains(p.ISR, p.Leader) {
			return errorf(ErrInvalidAssignment, "%s: leader %d is not in the ISR %v", where, p.Leader, p.ISR)
		}
		if p.LeaderEpoch < 0 {
			return errorf(ErrInvalidAssignment, "%s: negative leader epoch %d", where, p.LeaderEpoch)
		}
	}
	return nil
}

// validateACLs checks what can be checked without the state: how many ACLs
// one call names and each ACL's own rules.
func validateACLs(acls []security.ACL) error {
	if len(acls) > MaxACLs {
		return errorf(ErrTooManyACLs, "one call names %d ACLs; at most %d (MaxACLs) are allowed", len(acls), MaxACLs)
	}
	for _, a := range acls {
		if err := a.Validate(); err != nil {
			return errorf(ErrInvalidACL, "%q: %v", a.String(), err)
		}
	}
	return nil
}

// validateGroupMembership checks a consumer group's membership as a
// saveGroup command or a snapshot carries it. Beyond the shape and the
// bounds it holds the coordinator's promise: no partition is granted to
// two members, and no target gives a partition to two members; a grant
// is no newer than its member's epoch, and the latest answer (Sent) named
// only granted partitions.
func validateGroupMembership(group string, m *GroupMembership) error {
	if err := ValidateGroupName(group); err != nil {
		return errorf(ErrInvalidGroupState, "%v", err)
	}
	bad := func(format string, args ...any) error {
		return errorf(ErrInvalidGroupState, "group %q: %s", group, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Assignor == "" || len(m.Assignor) > MaxGroupStringLen:
		return bad("assignor name of %d bytes: want 1 to %d", len(m.Assignor), MaxGroupStringLen)
	case m.Epoch < 0:
		return bad("group epoch %d is negative", m.Epoch)
	case len(m.Members) == 0 || len(m.Members) > MaxGroupMembers:
		return bad("%d members: want 1 to %d", len(m.Members), MaxGroupMembers)
	case len(m.Counts) > MaxGroupTopics:
		return bad("partition counts of %d topics: at most %d", len(m.Counts), MaxGroupTopics)
	}
	total := 0
	for topic, n := range m.Counts {
		if err := ValidateTopicName(topic); err != nil {
			return bad("%v", err)
		}
		if n < 0 || n > MaxPartitions {
			return bad("topic %q has %d partitions: want 0 to %d", topic, n, MaxPartitions)
		}
		total += int(n)
	}
	if total > MaxGroupPartitions {
		return bad("its topics have %d partitions: at most %d", total, MaxGroupPartitions)
	}
	topics := map[string]bool{}
	granted := map[TopicPartition]string{}
	targeted := map[TopicPartition]string{}
	entries := 0
	for i, mb := range m.Members {
		switch {
		case mb.ID == "" || len(mb.ID) > MaxGroupStringLen:
			return bad("member id of %d bytes: want 1 to %d", len(mb.ID), MaxGroupStringLen)
		case i > 0 && m.Members[i-1].ID >= mb.ID:
			return bad("members not sorted by id, or member %q twice", mb.ID)
		case len(mb.ClientID) > MaxGroupStringLen || len(mb.Host) > MaxGroupStringLen:
			return bad("member %q: client id or host longer than %d bytes", mb.ID, MaxGroupStringLen)
		case len(mb.Topics) == 0:
			return bad("member %q subscribes to no topic", mb.ID)
		case mb.SessionTimeoutMs <= 0 || mb.RebalanceTimeoutMs <= 0:
			return bad("member %q: timeouts must be positive", mb.ID)
		case mb.Epoch < 0:
			return bad("member %q: epoch %d is negative", mb.ID, mb.Epoch)
		}
		for j, topic := range mb.Topics {
			if err := ValidateTopicName(topic); err != nil {
				return bad("member %q: %v", mb.ID, err)
			}
			if j > 0 && mb.Topics[j-1] >= topic {
				return bad("member %q: topics not sorted, or %q twice", mb.ID, topic)
			}
			topics[topic] = true
		}
		if len(topics) > MaxGroupTopics {
			return bad("its members subscribe to more than %d topics", MaxGroupTopics)
		}
		target, n, err := partitionSet(mb.Target)
		if err != nil {
			return bad("member %q target: %v", mb.ID, err)
		}
		entries += n
		for tp := range target {
			if other, ok := targeted[tp]; ok {
				return bad("%s/%d is in the targets of members %q and %q", tp.Topic, tp.Partition, other, mb.ID)
			}
			targeted[tp] = mb.ID
		}
		sent, n, err := partitionSet(mb.Sent)
		if err != nil {
			return bad("member %q sent: %v", mb.ID, err)
		}
		entries += n
		own := map[TopicPartition]bool{}
		for topic, pairs := range mb.Granted {
			if err := ValidateTopicName(topic); err != nil {
				return bad("member %q granted: %v", mb.ID, err)
			}
			for k, pe := range pairs {
				p, e := pe[0], pe[1]
				if p < 0 || p >= MaxPartitions || (k > 0 && pairs[k-1][0] >= p) {
					return bad("member %q granted: partitions of %q not sorted, out of range or twice", mb.ID, topic)
				}
				if e < 1 || e > mb.Epoch {
					return bad("member %q: %s/%d granted with epoch %d; want 1 to its epoch %d", mb.ID, topic, p, e, mb.Epoch)
				}
				tp := TopicPartition{topic, p}
				if other, ok := granted[tp]; ok {
					return bad("%s/%d is granted to members %q and %q", topic, p, other, mb.ID)
				}
				granted[tp] = mb.ID
				own[tp] = true
				entries++
			}
		}
		for tp := range sent {
			if !own[tp] {
				return bad("member %q was sent %s/%d, which it was not granted", mb.ID, tp.Topic, tp.Partition)
			}
		}
		if entries > 3*MaxGroupPartitions {
			return bad("more than %d partition entries", 3*MaxGroupPartitions)
		}
		if err := validateClassicMember(mb.Classic); err != nil {
			return bad("member %q: %v", mb.ID, err)
		}
	}
	return nil
}

// validateClassicMember checks a classic member's protocol; nil is a
// heartbeat member.
func validateClassicMember(c *GroupClassicMember) error {
	if c == nil {
		return nil
	}
	if len(c.Protocols) == 0 || len(c.Protocols) > MaxGroupClassicProtocols {
		return fmt.Errorf("%d classic protocols: want 1 to %d", len(c.Protocols), MaxGroupClassicProtocols)
	}
	for _, p := range c.Protocols {
		if len(p) > MaxGroupStringLen {
			return fmt.Errorf("a classic protocol name of %d bytes: at most %d", len(p), MaxGroupStringLen)
		}
	}
	if c.Protocol == "" || !slices.Contains(c.Protocols, c.Protocol) {
		return fmt.Errorf("classic protocol %q is not one it offered", c.Protocol)
	}
	if c.Version < 0 {
		return fmt.Errorf("consumer protocol version %d is negative", c.Version)
	}
	return nil
}

// partitionSet checks a PartitionSet and returns its partitions and their
// number.
func partitionSet(s PartitionSet) (map[TopicPartition]bool, int, error) {
	out := map[TopicPartition]bool{}
	for topic, parts := range s {
		if err := ValidateTopicName(topic); err != nil {
			return nil, 0, err
		}
		for k, p := range parts {
			if p < 0 || p >= MaxPartitions || (k > 0 && parts[k-1] >= p) {
				return nil, 0, fmt.Errorf("partitions of %q not sorted, out of range or twice", topic)
			}
			out[TopicPartition{topic, p}] = true
		}
		if len(out) > MaxGroupPartitions {
			return nil, 0, fmt.Errorf("more than %d partitions", MaxGroupPartitions)
		}
	}
	return out, len(out), nil
}
