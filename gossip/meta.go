package gossip

import (
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/hashicorp/memberlist"
)

// MetaMaxSize is the largest encoded Meta, memberlist's limit on node
// metadata. Encoding a larger Meta fails with ErrMetaTooLarge.
const MetaMaxSize = memberlist.MetaMaxSize

// Meta is what each broker tells the others about itself. It travels inside
// every memberlist alive message, so it stays small: a versioned binary
// encoding, not JSON, because JSON's field names alone would spend a fifth of
// the 512-byte budget.
type Meta struct {
	// BrokerID is the broker's unique id in the cluster.
	BrokerID int32
	// GRPCAddr is the advertised host:port clients and brokers dial.
	GRPCAddr string
	// RaftAddr is the host:port of the broker's controller Raft transport.
	RaftAddr string
	// AdminAddr is the host:port of the broker's admin (health, metrics) endpoint.
	AdminAddr string
	// Rack is the failure domain used for replica placement; empty if unknown.
	Rack string
	// Version is the broker's software version.
	Version string
	// KafkaAddr is the host:port Kafka clients are told for this broker;
	// empty when it opens no Kafka listener. Sent in layout version 2.
	KafkaAddr string
}

// nodeMeta is what travels as memberlist node metadata: the broker's Meta
// plus gossip's own flags.
type nodeMeta struct {
	Meta
	// Leaving marks a member that is about to leave gracefully. memberlist
	// reports a graceful leave and a detected death through the same callback
	// and never says which, so Leave first spreads this mark; a member that
	// disappears with it set left, one without it failed.
	Leaving bool
}

// metaVersion1 is the only layout so far:
//
//	byte    version (1)
//	byte    flags: bit 0 leaving; other bits must be 0
//	varint  broker id (zig-zag, must fit int32)
//	5 × (uvarint length, UTF-8 bytes): gRPC, Raft and admin address, rack, version
//
// A later version may only append fields and flag bits. A decoder therefore
// reads the fields it knows from any version >= 1 and ignores what follows,
// and unknown flags, when the version is newer than its own, so brokers of
// mixed versions can gossip during a rolling upgrade. Trailing bytes or
// unknown flags on version 1 are corruption.
//
// Version 2 appends one field after version 1's five:
//
//	uvarint length, UTF-8 bytes: the Kafka address
//
// A Meta without a Kafka address is still encoded as version 1, so
// brokers without a Kafka listener gossip exactly what they did before.
const (
	metaVersion1 = 1
	metaVersion2 = 2
)

const (
	flagLeaving  = 1 << 0
	knownFlagsV1 = flagLeaving
	knownFlagsV2 = knownFlagsV1
)

// fields lists the string fields of version 1 in wire order.
func (m *Meta) fields() [5]*string {
	return [5]*string{&m.GRPCAddr, &m.RaftAddr, &m.AdminAddr, &m.Rack, &m.Version}
}

// fieldsOf lists the string fields of layout version v in wire order: a
// version newer than this decoder knows has at least these.
func (m *Meta) fieldsOf(v byte) []*string {
	f := m.fields()
	if v < metaVersion2 {
		return f[:]
	}
	return append(f[:], &m.KafkaAddr)
}

// encode returns the wire form of n. It refuses strings that are not UTF-8,
// so that whatever decodes also encodes back to the same value.
func (n nodeMeta) encode() ([]byte, error) {
	var flags byte
	if n.Leaving {
		flags |= flagLeaving
	}
	version := byte(metaVersion1)
	if n.KafkaAddr != "" {
		version = metaVersion2
	}
	b := make([]byte, 0, 64)
	b = append(b, version, flags)
	b = binary.AppendVarint(b, int64(n.BrokerID))
	for i, f := range n.fieldsOf(version) {
		if !utf8.ValidString(*f) {
			return nil, fmt.Errorf("%w: field %d is not UTF-8", ErrBadMeta, i)
		}
		b = binary.AppendUvarint(b, uint64(len(*f)))
		b = append(b, *f...)
	}
	if len(b) > MetaMaxSize {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, len(b), MetaMaxSize)
	}
	return b, nil
}

// decodeNodeMeta parses the wire form. Every length is checked against what
// is left, so garbage gives an ErrBadMeta and never a panic or a large
// allocation.
func decodeNodeMeta(b []byte) (nodeMeta, error) {
	var n nodeMeta
	if len(b) == 0 {
		return n, fmt.Errorf("%w: empty", ErrBadMeta)
	}
	if len(b) > MetaMaxSize {
		return n, fmt.Errorf("%w: %d bytes, limit %d", ErrMetaTooLarge, len(b), MetaMaxSize)
	}
	version := b[0]
	if version < metaVersion1 {
		return n, fmt.Errorf("%w: version %d", ErrBadMeta, version)
	}
	if len(b) < 2 {
		return n, fmt.Errorf("%w: no flags", ErrBadMeta)
	}
	flags := b[1]
	if version <= metaVersion2 && flags&^knownFlagsV2 != 0 {
		return n, fmt.Errorf("%w: unknown flags %#x", ErrBadMeta, flags)
	}
	n.Leaving = flags&flagLeaving != 0
	rest := b[2:]
	id, l := binary.Varint(rest)
	if l <= 0 {
		return nodeMeta{}, fmt.Errorf("%w: broker id", ErrBadMeta)
	}
	if id < math.MinInt32 || id > math.MaxInt32 {
		return nodeMeta{}, fmt.Errorf("%w: broker id %d out of range", ErrBadMeta, id)
	}
	n.BrokerID = int32(id)
	rest = rest[l:]
	for i, f := range n.fieldsOf(version) {
		size, l := binary.Uvarint(rest)
		if l <= 0 {
			return nodeMeta{}, fmt.Errorf("%w: field %d length", ErrBadMeta, i)
		}
		rest = rest[l:]
		if size > uint64(len(rest)) {
			return nodeMeta{}, fmt.Errorf("%w: field %d length %d, %d bytes left", ErrBadMeta, i, size, len(rest))
		}
		s := rest[:size]
		if !utf8.Valid(s) {
			return nodeMeta{}, fmt.Errorf("%w: field %d is not UTF-8", ErrBadMeta, i)
		}
		*f = string(s)
		rest = rest[size:]
	}
	if version <= metaVersion2 && len(rest) != 0 {
		return nodeMeta{}, fmt.Errorf("%w: %d trailing bytes", ErrBadMeta, len(rest))
	}
	return n, nil
}
