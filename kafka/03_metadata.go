package kafka

// Metadata, v0 to v13: the brokers, the controller, and the topics asked
// for with their partitions' leaders, leader epochs (v7+), replicas and ISR.
//
// Topics: v0's empty list and v1+'s null list mean every topic; v1+'s
// empty list means none. A topic asked for by name that does not exist is
// UNKNOWN_TOPIC_OR_PARTITION (no topic is created: allow_auto_topic_creation
// is ignored); one asked for by id (v10+, name null) that no topic has is
// UNKNOWN_TOPIC_ID. A partition without a leader is LEADER_NOT_AVAILABLE,
// its leader -1. Each topic's id (v10+) is Strata's topic id, 16 bytes
// written as 32 hex characters, read as the Kafka UUID: stable for the
// topic's life and never zero (an id that is not 32 hex characters, or is
// zero, is replaced by a hash of it, still stable).
//
// Brokers: every live broker with a Kafka listener, at the Kafka address
// it published in the cluster metadata, this one at its own (brokers.go).
// A partition led by a broker without a Kafka listener names that leader
// all the same; the client finds no address for it and waits and
// refreshes until leadership moves. The controller named is this broker:
// it passes controller work (topic admin, producer ids) on to the real one
// (broker/controller.go), so admin clients, which send such work to the
// controller, need no address but this one. Authorized operations (v8+)
// are not computed (left at Kafka's "not asked" value); no cluster id is
// given.
//
// With authentication (auth.go) a principal sees what gRPC's metadata
// shows it (broker.Visibility): every topic lists only those it has some
// permission on, and a topic asked for by name or id that it may not see
// is TOPIC_AUTHORIZATION_FAILED, whether it exists or not.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
)

func handleMetadata(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	view := c.s.b.Cluster(nil)
	// The controller is this broker: it passes controller work on to the
	// real one (broker/controller.go), as a KRaft broker names any broker.
	resp.ControllerID = c.s.b.ID()

	for _, e := range c.s.kafkaBrokers(view) {
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = e.id, e.host, e.port, e.rack
		resp.Brokers = append(resp.Brokers, mb)
	}

	byName := map[string]broker.TopicView{}
	byID := map[[16]byte]broker.TopicView{}
	for _, t := range view.Topics {
		byName[t.Name] = t
		byID[topicID(t.ID)] = t
	}
	if all {
		visible := c.s.b.Visibility(ctx) // the principal's, as gRPC filters (broker/visibility.go)
		for _, t := range view.Topics {
			if visible.Topic(t.Name) {
				resp.Topics = append(resp.Topics, metadataTopic(t))
			}
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		var t broker.TopicView
		var ok bool
		var denied error
		if rt.Topic != nil {
			denied = c.allowTopic("Metadata", *rt.Topic, broker.OpSee) // before existence: a name it may not see tells nothing
			t, ok = byName[*rt.Topic]
		} else if t, ok = byID[rt.TopicID]; ok {
			denied = c.allowTopic("Metadata", t.Name, broker.OpSee)
		}
		if denied != nil {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
			mt.ErrorCode = codeOf(denied)
			resp.Topics = append(resp.Topics, mt)
			continue
		}
		if ok {
			resp.Topics = append(resp.Topics, metadataTopic(t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic, mt.TopicID = rt.Topic, rt.TopicID
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if rt.Topic == nil {
			mt.ErrorCode = kerr.UnknownTopicID.Code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	return resp, nil
}

func metadataTopic(t broker.TopicView) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic, mt.TopicID = &name, topicID(t.ID)
	for _, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition, mp.Leader, mp.LeaderEpoch = p.Partition, p.Leader, p.LeaderEpoch
		mp.Replicas, mp.ISR = p.Replicas, p.ISR
		if mp.Replicas == nil {
			mp.Replicas = []int32{}
		}
		if mp.ISR == nil {
			mp.ISR = []int32{}
		}
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}

// topicID is the Kafka UUID of the topic with Strata id id (see above).
func topicID(id string) [16]byte {
	var u [16]byte
	if len(id) == 32 {
		if n, err := hex.Decode(u[:], []byte(id)); err == nil && n == 16 && u != [16]byte{} {
			return u
		}
	}
	sum := sha256.Sum256([]byte("strata topic id " + id))
	copy(u[:], sum[:])
	if u == [16]byte{} {
		u[15] = 1
	}
	return u
}

// topicNames maps Kafka topic ids to topic names, for requests that name
// topics by id.
func topicNames(b *broker.Broker) map[[16]byte]string {
	view := b.Cluster(nil)
	m := make(map[[16]byte]string, len(view.Topics))
	for _, t := range view.Topics {
		m[topicID(t.ID)] = t.Name
	}
	return m
}
