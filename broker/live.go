package broker

// LiveBrokers is the ids of the brokers that gossip shows alive now (with
// TLS, those whose claims are proven), this broker always among them. The
// cluster metadata keeps every broker ever registered, dead ones too; a
// front end that lists brokers for clients to dial (Kafka's Metadata)
// lists only these. nil means unknown (a read replica, which gossips with
// no one): list every registered broker.
func (b *Broker) LiveBrokers() map[int32]bool {
	return b.role.liveBrokers()
}

func (b clusterMember) liveBrokers() map[int32]bool {
	if b.gossip == nil {
		return nil
	}
	live := map[int32]bool{b.id: true}
	for _, m := range b.liveMembers() {
		live[m.Meta.BrokerID] = true
	}
	return live
}
