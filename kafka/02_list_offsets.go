package kafka

// ListOffsets, v1 to v6: per partition, the offset for a timestamp, from
// either tier (broker.ListOffsets on the partition's leader).
//
// Timestamp -2 is the earliest offset (the log start), -1 the latest (the
// high watermark; with no transactions the last stable offset is the same,
// so read_committed is answered alike); both answer timestamp -1. A time of
// 0 or more is the first offset whose record's timestamp is at or after
// it, with that timestamp; a time after every committed record answers
// offset -1 and timestamp -1, as Kafka does. Other negative times (-3, max
// timestamp, needs v7) are UNSUPPORTED_VERSION. The leader epoch of the
// found offset (v4+) is not known here and is -1; the request's current
// leader epoch is not checked. A partition led by another broker is
// NOT_LEADER_OR_FOLLOWER; other errors come from errors.go. With
// authentication each topic needs read, as gRPC's ListOffsets does
// (TOPIC_AUTHORIZATION_FAILED otherwise).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleListOffsets(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		t := kmsg.NewListOffsetsResponseTopic()
		t.Topic = rt.Topic
		denied := c.allowTopic("ListOffsets", rt.Topic, security.OpRead) // auth.go
		for _, rp := range rt.Partitions {
			p := kmsg.NewListOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			p.Timestamp, p.Offset, p.LeaderEpoch = -1, -1, -1
			var q broker.OffsetQuery
			switch {
			case denied != nil:
				p.ErrorCode = codeOf(denied)
				t.Partitions = append(t.Partitions, p)
				continue
			case rp.Timestamp == -2:
				q.Earliest = true
			case rp.Timestamp == -1:
				q.Latest = true
			case rp.Timestamp >= 0:
				q.TimestampMs = rp.Timestamp
			default:
				p.ErrorCode = kerr.UnsupportedVersion.Code
				t.Partitions = append(t.Partitions, p)
				continue
			}
			ans, err := c.s.b.ListOffsets(ctx, rt.Topic, rp.Partition, q)
			switch {
			case err != nil:
				p.ErrorCode = codeOf(err)
			case !q.Earliest && !q.Latest && ans.TimestampMs < 0:
				// Nothing at or after the time: Kafka's "unknown offset".
			default:
				p.Offset = ans.Offset
				if !q.Earliest && !q.Latest {
					p.Timestamp = ans.TimestampMs
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}
