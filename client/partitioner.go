package client

import (
	"math/rand/v2"
	"sync"
)

// Partitioner chooses the partition of a record produced with
// AnyPartition. It must be safe for concurrent use: Produce calls it from
// the caller's goroutine.
type Partitioner interface {
	// Partition returns a partition in [0, numPartitions) for r.
	Partition(r *Record, numPartitions int32) int32
}

// BatchListener is an optional interface of a Partitioner: the producer
// calls OnBatchClosed when it closes a partition's batch for sending, which
// is when a sticky partitioner moves on.
type BatchListener interface {
	OnBatchClosed(topic string, partition int32)
}

// KeyPartition returns the partition a key lands in among numPartitions,
// exactly as Kafka's Java producer computes it:
// toPositive(murmur2(key)) % numPartitions. Records written by either client
// with the same key and partition count therefore share a partition.
func KeyPartition(key []byte, numPartitions int32) int32 {
	if numPartitions <= 0 {
		return 0
	}
	return int32(murmur2(key)&0x7fffffff) % numPartitions
}

// murmur2 is Kafka's Utils.murmur2: 32-bit MurmurHash2 with seed
// 0x9747b28c, reading the input as little-endian 4-byte words. The Java
// code works on signed ints; uint32 arithmetic gives the same bits.
func murmur2(data []byte) uint32 {
	const (
		seed = 0x9747b28c
		m    = 0x5bd1e995
		r    = 24
	)
	n := len(data)
	h := uint32(seed) ^ uint32(n)
	i := 0
	for ; i+4 <= n; i += 4 {
		k := uint32(data[i]) | uint32(data[i+1])<<8 | uint32(data[i+2])<<16 | uint32(data[i+3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch n - i {
	case 3:
		h ^= uint32(data[i+2]) << 16
		fallthrough
	case 2:
		h ^= uint32(data[i+1]) << 8
		fallthrough
	case 1:
		h ^= uint32(data[i])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return h
}

// NewDefaultPartitioner returns the partitioner producers use unless
// WithPartitioner says otherwise: a record with a key goes to
// KeyPartition(key); a record without one goes to the topic's current
// sticky partition, which changes (to another partition chosen at random)
// each time a batch of it is closed, as Kafka's producer does since KIP-480.
// Sticking fills batches instead of spreading single records thinly over
// every partition.
func NewDefaultPartitioner() Partitioner {
	return &stickyPartitioner{topics: make(map[string]*stickyState)}
}

// stickyPartitioner is the default Partitioner.
type stickyPartitioner struct {
	mu     sync.Mutex
	topics map[string]*stickyState
}

// stickyState is one topic's choice for records without a key.
type stickyState struct {
	cur  int32 // the sticky partition, or -1 to choose anew
	prev int32 // the partition left last, avoided by the next choice
}

// Partition hashes the key, or returns the topic's sticky partition.
func (p *stickyPartitioner) Partition(r *Record, numPartitions int32) int32 {
	if r.Key != nil {
		return KeyPartition(r.Key, numPartitions)
	}
	if numPartitions <= 1 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.topics[r.Topic]
	if !ok {
		st = &stickyState{cur: -1, prev: -1}
		p.topics[r.Topic] = st
	}
	if st.cur < 0 || st.cur >= numPartitions {
		st.cur = rand.Int32N(numPartitions)
		if st.cur == st.prev {
			// Another partition, uniformly among the rest.
			st.cur = (st.cur + 1 + rand.Int32N(numPartitions-1)) % numPartitions
		}
	}
	return st.cur
}

// OnBatchClosed moves the topic's sticky partition on once a batch of it
// is closed; batches of other partitions change nothing.
func (p *stickyPartitioner) OnBatchClosed(topic string, partition int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st, ok := p.topics[topic]; ok && st.cur == partition {
		st.prev, st.cur = partition, -1
	}
}
