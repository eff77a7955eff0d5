package kafka

// Brokers as Kafka clients see them: every live broker that has a Kafka
// listener, at the address it published in the cluster metadata
// (cluster.BrokerInfo.KafkaAddr: kafka.advertise, or kafka.listen), and
// this broker at its own advertise address. A broker without a Kafka
// listener is left out of the list, yet a partition it leads still names
// it as leader (Metadata, and the KIP-951 hints below): a Kafka client
// then finds no address for the leader, and waits and refreshes its
// metadata until leadership moves to a broker it can reach, as it does
// for a leader Kafka itself does not list.
//
// KIP-951: a Produce (v10+) or Fetch (v12+) partition answered
// NOT_LEADER_OR_FOLLOWER carries the leader this broker knows and its
// epoch (CurrentLeader, a tagged field), and the response lists that
// leader's endpoint (NodeEndpoints: Produce v10+, Fetch v16+), so the
// client moves to the new leader without a Metadata round trip.

import (
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
)

// endpoint is a broker as Kafka clients dial it.
type endpoint struct {
	id   int32
	host string
	port int32
	rack *string
}

// kafkaBrokers lists the brokers of view that Kafka clients can dial,
// this one first.
func (s *Server) kafkaBrokers(view broker.ClusterView) []endpoint {
	self := s.b.ID()
	live := s.b.LiveBrokers()
	out := []endpoint{{id: self, host: s.host, port: s.port}}
	for _, bv := range view.Brokers {
		if bv.ID == self {
			out[0].rack = rackOf(bv)
			continue
		}
		if bv.KafkaAddr == "" || (live != nil && !live[bv.ID]) {
			continue
		}
		host, port, ok := splitHostPort(bv.KafkaAddr)
		if !ok {
			continue // validated when registered; never here
		}
		out = append(out, endpoint{id: bv.ID, host: host, port: port, rack: rackOf(bv)})
	}
	return out
}

func rackOf(bv broker.BrokerView) *string {
	if bv.Rack == "" {
		return nil
	}
	r := bv.Rack
	return &r
}

func splitHostPort(addr string) (string, int32, bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, false
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return "", 0, false
	}
	return host, int32(p), true
}

// leaders maps a topic's partitions to their leader and leader epoch, as
// this broker's metadata has them now.
type leaders struct {
	view   broker.ClusterView
	byName map[string]broker.TopicView
	eps    map[int32]endpoint
}

func (s *Server) leaders() *leaders {
	view := s.b.Cluster(nil)
	l := &leaders{view: view, byName: map[string]broker.TopicView{}, eps: map[int32]endpoint{}}
	for _, t := range view.Topics {
		l.byName[t.Name] = t
	}
	for _, e := range s.kafkaBrokers(view) {
		l.eps[e.id] = e
	}
	return l
}

// of is the leader and leader epoch of a partition, -1 and -1 when unknown.
func (l *leaders) of(topic string, partition int32) (int32, int32) {
	t, ok := l.byName[topic]
	if !ok || partition < 0 || int(partition) >= len(t.Partitions) {
		return -1, -1
	}
	p := t.Partitions[partition]
	return p.Leader, p.LeaderEpoch
}

// produceLeaderHints fills KIP-951's hints into a Produce response (v10+).
func (s *Server) produceLeaderHints(resp *kmsg.ProduceResponse) {
	if resp.Version < 10 {
		return
	}
	var l *leaders
	named := map[int32]bool{}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if l == nil {
				l = s.leaders()
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = l.of(t.Topic, p.Partition)
			if e, ok := l.eps[p.CurrentLeader.LeaderID]; ok && !named[e.id] {
				named[e.id] = true
				resp.Brokers = append(resp.Brokers, kmsg.ProduceResponseBroker{NodeID: e.id, Host: e.host, Port: e.port, Rack: e.rack})
			}
		}
	}
}

// fetchLeaderHints fills KIP-951's hints into a Fetch response (v12+,
// endpoints v16+); names maps topic ids to names for v13+.
func (s *Server) fetchLeaderHints(resp *kmsg.FetchResponse, names map[[16]byte]string) {
	if resp.Version < 12 {
		return
	}
	var l *leaders
	named := map[int32]bool{}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		name := t.Topic
		if resp.Version >= 13 {
			name = names[t.TopicID]
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			if p.ErrorCode != kerr.NotLeaderForPartition.Code {
				continue
			}
			if l == nil {
				l = s.leaders()
			}
			p.CurrentLeader.LeaderID, p.CurrentLeader.LeaderEpoch = l.of(name, p.Partition)
			if e, ok := l.eps[p.CurrentLeader.LeaderID]; ok && resp.Version >= 16 && !named[e.id] {
				named[e.id] = true
				resp.Brokers = append(resp.Brokers, kmsg.FetchResponseBroker{NodeID: e.id, Host: e.host, Port: e.port, Rack: e.rack})
			}
		}
	}
}
