package kafka

// OffsetFetch, v1 to v10: a consumer group's committed positions
// (broker.FetchOffsets). v1 is KIP-896's floor and what segmentio/kafka-go
// still sends; v8+ asks for several groups at once, each answered on its
// own; v10 names topics by id.
//
// Topics null (v2+) means every partition the group committed; a partition
// named that the group never committed (or a group that does not exist)
// answers offset -1, leader epoch -1 and metadata "", with no error, as
// Kafka does. A topic id no topic has (v10) is UNKNOWN_TOPIC_ID. Strata
// does not store a commit's leader epoch, so it is always -1; the metadata
// string is stored and returned. require_stable (v7+) is accepted and
// changes nothing: Strata has no transactions, so no commit is ever
// pending. The member id and epoch of v9+ (KIP-848 members checking their
// own fetch) are not checked; any caller may read. An invalid group name
// is INVALID_GROUP_ID; other errors come from errors.go, for the whole
// group (v2+) or each partition (v1, which has no group-level code).

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
)

func handleOffsetFetch(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group = req.Group
		if req.Topics != nil {
			rg.Topics = []kmsg.OffsetFetchRequestGroupTopic{}
			for _, rt := range req.Topics {
				gt := kmsg.NewOffsetFetchRequestGroupTopic()
				gt.Topic, gt.Partitions = rt.Topic, rt.Partitions
				rg.Topics = append(rg.Topics, gt)
			}
		}
		g := offsetFetchGroup(ctx, c, req.Version, rg)
		resp.ErrorCode = g.ErrorCode
		for _, gt := range g.Topics {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = gt.Topic
			for _, gp := range gt.Partitions {
				p := kmsg.NewOffsetFetchResponseTopicPartition()
				p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode
				if req.Version < 2 && g.ErrorCode != 0 {
					p.ErrorCode = g.ErrorCode // v1 has no group-level code
				}
				t.Partitions = append(t.Partitions, p)
			}
			resp.Topics = append(resp.Topics, t)
		}
		return resp, nil
	}
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, offsetFetchGroup(ctx, c, req.Version, rg))
	}
	return resp, nil
}

// offsetFetchGroup answers one group's part of a request.
func offsetFetchGroup(ctx context.Context, c *conn, version int16, rg kmsg.OffsetFetchRequestGroup) kmsg.OffsetFetchResponseGroup {
	g := kmsg.NewOffsetFetchResponseGroup()
	g.Group = rg.Group
	if err := cluster.ValidateGroupName(rg.Group); err != nil || rg.Group == "" {
		g.ErrorCode = kerr.InvalidGroupID.Code
		return g
	}
	var names map[[16]byte]string
	ids := map[string][16]byte{}
	if version >= 10 {
		names = topicNames(c.s.b)
		for id, name := range names {
			ids[name] = id
		}
	}
	// What to ask the broker for: the partitions named, or all.
	var want []broker.TopicPartition
	for _, rt := range rg.Topics {
		name := rt.Topic
		if version >= 10 {
			name = names[rt.TopicID]
		}
		for _, p := range rt.Partitions {
			if name != "" {
				want = append(want, broker.TopicPartition{Topic: name, Partition: p})
			}
		}
	}
	var got []broker.CommittedOffset
	if rg.Topics == nil || len(want) > 0 {
		var err error
		if got, err = c.s.b.FetchOffsets(ctx, rg.Group, want); err != nil {
			g.ErrorCode = codeOf(err)
			if version >= 2 {
				return g
			}
		}
	}
	slices.SortFunc(got, func(x, y broker.CommittedOffset) int {
		return cmp.Or(strings.Compare(x.Topic, y.Topic), cmp.Compare(x.Partition, y.Partition))
	})
	byTP := make(map[broker.TopicPartition]broker.CommittedOffset, len(got))
	for _, o := range got {
		byTP[broker.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o
	}
	partition := func(topic string, p int32) kmsg.OffsetFetchResponseGroupTopicPartition {
		gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
		gp.Partition, gp.Offset, gp.LeaderEpoch = p, -1, -1
		meta := ""
		if o, ok := byTP[broker.TopicPartition{Topic: topic, Partition: p}]; ok {
			gp.Offset, meta = o.Offset, o.Metadata
		}
		gp.Metadata = &meta
		return gp
	}
	if rg.Topics == nil {
		// Every committed partition, grouped by topic in the order found.
		at := map[string]int{}
		for _, o := range got {
			i, ok := at[o.Topic]
			if !ok {
				i = len(g.Topics)
				at[o.Topic] = i
				t := kmsg.NewOffsetFetchResponseGroupTopic()
				t.Topic, t.TopicID = o.Topic, ids[o.Topic]
				g.Topics = append(g.Topics, t)
			}
			g.Topics[i].Partitions = append(g.Topics[i].Partitions, partition(o.Topic, o.Partition))
		}
		return g
	}
	for _, rt := range rg.Topics {
		t := kmsg.NewOffsetFetchResponseGroupTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name := rt.Topic
		if version >= 10 {
			name = names[rt.TopicID]
		}
		for _, p := range rt.Partitions {
			gp := partition(name, p)
			if name == "" && version >= 10 {
				gp.ErrorCode = kerr.UnknownTopicID.Code
			}
			t.Partitions = append(t.Partitions, gp)
		}
		g.Topics = append(g.Topics, t)
	}
	return g
}
