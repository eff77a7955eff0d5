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
// Brokers: only this one, at its Kafka advertise address. Brokers do not
// yet publish their Kafka addresses in the cluster metadata, so in a
// cluster a partition led by another broker names a leader the client
// cannot reach; clients then retry against this broker, which answers
// NOT_LEADER_OR_FOLLOWER. The controller named is this broker, since it
// passes controller work (topic admin, producer ids) on to the
// controller, so admin clients, which send it there, can reach it.
// Authorized operations (v8+) are not computed
// (left at Kafka's "not asked" value); no cluster id is given.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
)

func handleMetadata(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	view := c.s.b.Cluster(nil)
	// The controller is this broker: it passes controller work on to the
	// real one (broker/controller.go), as a KRaft broker names any broker.
	resp.ControllerID = c.s.b.ID()

	self := kmsg.NewMetadataResponseBroker()
	self.NodeID, self.Host, self.Port = c.s.b.ID(), c.s.host, c.s.port
	for _, bv := range view.Brokers {
		if bv.ID == self.NodeID && bv.Rack != "" {
			rack := bv.Rack
			self.Rack = &rack
		}
	}
	resp.Brokers = []kmsg.MetadataResponseBroker{self}

	byName := map[string]broker.TopicView{}
	byID := map[[16]byte]broker.TopicView{}
	for _, t := range view.Topics {
		byName[t.Name] = t
		byID[topicID(t.ID)] = t
	}
	if all {
		for _, t := range view.Topics {
			resp.Topics = append(resp.Topics, metadataTopic(t))
		}
		return resp, nil
	}
	for _, rt := range req.Topics {
		var t broker.TopicView
		var ok bool
		if rt.Topic != nil {
			t, ok = byName[*rt.Topic]
		} else {
			t, ok = byID[rt.TopicID]
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
