package kafka

// OffsetForLeaderEpoch, v2 to v4 (Kafka 4.1's range: v0 and v1 were
// removed in 4.0): per partition, where a leader epoch ended in the
// leader's log (broker.LeaderEpochEnd, from the leader's epoch history),
// so a consumer that suspects its position came from a deposed leader
// (after an unclean leader change) can find where its log and the
// leader's part and reset there (KIP-320).
//
// Answer: the largest epoch at or below the one asked for that the leader
// knows and the start of the next epoch, or the log end offset for the
// latest epoch; an epoch older than the leader's history gets itself and
// the history's first start; an epoch newer than the history, or -1, gets
// epoch -1 and offset -1, with no error, as Kafka answers. The request's
// current leader epoch is checked first (epochs.go: FENCED_LEADER_EPOCH,
// UNKNOWN_LEADER_EPOCH; -1 unchecked). A partition led by another broker is
// NOT_LEADER_OR_FOLLOWER; other errors come from errors.go, with epoch and
// offset -1. The replica id (v3+) makes no difference: Strata's followers
// do not replicate over this protocol.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/security"
)

func handleOffsetForLeaderEpoch(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewOffsetForLeaderEpochResponseTopic()
		t.Topic = rt.Topic
		denied := c.allowTopic("OffsetForLeaderEpoch", rt.Topic, security.OpRead) // auth.go
		for _, rp := range rt.Partitions {
			p := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			p.Partition, p.LeaderEpoch, p.EndOffset = rp.Partition, -1, -1
			if denied != nil {
				p.ErrorCode = codeOf(denied)
				t.Partitions = append(t.Partitions, p)
				continue
			}
			if err := c.s.b.CheckLeaderEpoch(rt.Topic, rp.Partition, rp.CurrentLeaderEpoch); err != nil {
				p.ErrorCode = codeOf(err)
				t.Partitions = append(t.Partitions, p)
				continue
			}
			end, err := c.s.b.LeaderEpochEnd(rt.Topic, rp.Partition, rp.LeaderEpoch)
			if err != nil {
				p.ErrorCode = codeOf(err)
			} else {
				p.LeaderEpoch, p.EndOffset = end.Epoch, end.EndOffset
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
