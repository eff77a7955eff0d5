package kafka

// ListOffsets, v1 to v10 (Kafka 4.1's range): per partition, the offset
// for a timestamp, from either tier (broker.ListOffsets on the
// partition's leader).
//
// Timestamp -2 is the earliest offset (the log start), -1 the latest (the
// high watermark; with no transactions the last stable offset is the same,
// so read_committed is answered alike); both answer timestamp -1. A time of
// 0 or more is the first offset whose record's timestamp is at or after
// it, with that timestamp; a time after every committed record answers
// offset -1 and timestamp -1, as Kafka does. Kafka's special times
// (broker.ListSpecialOffset): -3 (v7+) the first committed record with
// the largest timestamp in the hot tier, with that time (-1 and -1 when
// none); -4 (v8+) the first offset in the hot tier; -5 (v9+) the last
// offset in the cold tier (-1 when it holds none); the last two answer
// timestamp -1. A special time below its version, or any other negative
// time, is UNSUPPORTED_VERSION. v10's timeout bounds the request, as a
// produce's does. The leader epoch of the found offset (v4+) comes from
// the leader's epoch history (broker.EpochAt; -1 for cold data older than
// the history; for -1, latest, the latest epoch, as Kafka answers); the request's current leader epoch (v4+) is checked
// (epochs.go). A partition led by another broker is
// NOT_LEADER_OR_FOLLOWER; other errors come from errors.go.
// With authentication each topic needs read, as gRPC's ListOffsets does
// (TOPIC_AUTHORIZATION_FAILED otherwise, special times included, before
// the leader epoch is checked).

import (
	"context"
	"math"

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
			if denied != nil { // before anything is looked up, special times included
				p.ErrorCode = codeOf(denied)
				t.Partitions = append(t.Partitions, p)
				continue
			}
			if req.Version >= 4 {
				if err := c.s.b.CheckLeaderEpoch(rt.Topic, rp.Partition, rp.CurrentLeaderEpoch); err != nil { // epochs.go
					p.ErrorCode = codeOf(err)
					t.Partitions = append(t.Partitions, p)
					continue
				}
			}
			if special, ok := specialOffsets[rp.Timestamp]; ok {
				if req.Version < special.since {
					p.ErrorCode = kerr.UnsupportedVersion.Code
				} else if ans, err := c.s.b.ListSpecialOffset(ctx, rt.Topic, rp.Partition, special.q); err != nil {
					p.ErrorCode = codeOf(err)
				} else {
					p.Offset, p.Timestamp = ans.Offset, ans.TimestampMs
					p.LeaderEpoch = c.s.b.EpochAt(rt.Topic, rp.Partition, p.Offset)
				}
				t.Partitions = append(t.Partitions, p)
				continue
			}
			var q broker.OffsetQuery
			switch {
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
				at := p.Offset
				if q.Latest {
					at = math.MaxInt64 // the latest epoch, as Kafka answers
				}
				p.LeaderEpoch = c.s.b.EpochAt(rt.Topic, rp.Partition, at)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp, nil
}

// specialOffsets are Kafka's special times served by
// broker.ListSpecialOffset, with the version each needs.
var specialOffsets = map[int64]struct {
	q     broker.SpecialOffset
	since int16
}{
	-3: {broker.OffsetMaxTimestamp, 7},
	-4: {broker.OffsetEarliestLocal, 8},
	-5: {broker.OffsetLatestTiered, 9},
}
