package kafka

// OffsetCommit, v2 to v10: a consumer group's positions, through the
// broker's fenced commit (broker.CommitOffsets). v2 is KIP-896's floor and
// what segmentio/kafka-go still sends; v10 names topics by id.
//
// Who commits:
//   - a member (member id set) commits with its generation as the member
//     epoch. The coordinator lets it commit only partitions it owns, with an
//     epoch no older than the one that granted them. A refused member
//     commit is answered as Kafka answers one: UNKNOWN_MEMBER_ID for a
//     member the group does not have; for a member that lost a partition
//     (or claims an epoch it was never given), STALE_MEMBER_EPOCH from v9,
//     the versions KIP-848 members commit with, and ILLEGAL_GENERATION
//     before v9, the classic protocol's name for it (errors.go,
//     offsetCommitCode).
//   - anyone else (no member id: kadm, "simple" consumers, generation -1 or
//     not) commits only while the group has no members; a group with
//     members answers UNKNOWN_MEMBER_ID, as Kafka does for a commit from
//     outside a non-empty group.
//
// The group instance id (v7+, static membership) is not used: Strata has
// no static members, and the member id alone says who commits. The
// retention time (v2–v4) is ignored: committed offsets stay until the
// group is deleted. Each partition's leader epoch (v6+) is not stored, and
// OffsetFetch answers -1 for it. The metadata string is stored (at most
// 4096 bytes, cluster.MaxOffsetMetadata; a partition with a longer one is
// OFFSET_METADATA_TOO_LARGE and not committed, as Kafka answers).
//
// The partitions of one request are committed together, one write: the
// answer is the same for each. When a partition or topic does not exist,
// each partition is committed on its own instead, so the others still
// commit and only the missing ones answer UNKNOWN_TOPIC_OR_PARTITION (a
// topic id no topic has, v10, is UNKNOWN_TOPIC_ID without being tried). An
// invalid group name is INVALID_GROUP_ID and commits nothing.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
)

func handleOffsetCommit(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)

	// Every partition gets an answer, in the order asked; slots[i] is
	// where the answer of offsets[i] goes (topic, partition index).
	type slot struct{ t, p int }
	var (
		offsets []broker.CommittedOffset
		slots   []slot
	)
	var names map[[16]byte]string
	if req.Version >= 10 {
		names = topicNames(c.s.b)
	}
	groupCode := int16(0)
	if err := cluster.ValidateGroupName(req.Group); err != nil || req.Group == "" {
		groupCode = kerr.InvalidGroupID.Code
	}
	for ti, rt := range req.Topics {
		t := kmsg.NewOffsetCommitResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name, known := rt.Topic, true
		if req.Version >= 10 {
			name, known = names[rt.TopicID]
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetCommitResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case groupCode != 0:
				p.ErrorCode = groupCode
			case !known:
				p.ErrorCode = kerr.UnknownTopicID.Code
			case rp.Metadata != nil && len(*rp.Metadata) > cluster.MaxOffsetMetadata:
				// The metadata layer would refuse the whole write; Kafka
				// refuses only this partition.
				p.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				meta := ""
				if rp.Metadata != nil {
					meta = *rp.Metadata
				}
				offsets = append(offsets, broker.CommittedOffset{Topic: name, Partition: rp.Partition, Offset: rp.Offset, Metadata: meta})
				slots = append(slots, slot{ti, len(t.Partitions)})
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	if len(offsets) == 0 {
		return resp, nil
	}

	commit := func(offsets []broker.CommittedOffset) int16 {
		err := c.s.b.CommitOffsets(ctx, req.Group, req.MemberID, req.Generation, offsets)
		return offsetCommitCode(req.Version, err).Code
	}
	code := commit(offsets)
	if code == kerr.UnknownTopicOrPartition.Code && len(offsets) > 1 {
		// One missing partition fails the whole write: commit each on its
		// own, so only the missing ones are refused.
		for i, o := range offsets {
			s := slots[i]
			resp.Topics[s.t].Partitions[s.p].ErrorCode = commit([]broker.CommittedOffset{o})
		}
		return resp, nil
	}
	for _, s := range slots {
		resp.Topics[s.t].Partitions[s.p].ErrorCode = code
	}
	return resp, nil
}
