package broker

// Producer ids belong to the principal that initialised them. With a
// binding key (brokers with TLS derive it from the gossip key they all
// share), a producer id is the controller's sequential number in its low 32
// bits and, above them, 31 bits of an HMAC of that number and the
// principal's name. Any broker checks a batch's producer id against the
// caller's principal without asking anyone and without a table of every id
// ever issued; another principal's id fails the check, short of a 1 in 2^31
// guess per attempt, and a failed check changes nothing.

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"

	"github.com/strata-log/strata/security"
)

const (
	// producerCounterBits hold the controller's number; the tag is above.
	producerCounterBits = 32
	producerCounterMask = int64(1)<<producerCounterBits - 1
	producerTagMask     = uint32(1)<<31 - 1
)

// ProducerIDKey derives the key that binds producer ids to principals from
// a secret every broker of the cluster holds.
func ProducerIDKey(secret []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("strata producer ids v1"))
	return m.Sum(nil)
}

// WithProducerIDKey binds producer ids to the principals that initialise
// them (see ProducerIDKey).
func WithProducerIDKey(key []byte) Option {
	return func(b *Broker) { b.producerIDKey = key }
}

// producerTag is the tag of counter for principal.
func producerTag(key []byte, counter int64, principal string) int64 {
	m := hmac.New(sha256.New, key)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(counter))
	m.Write(n[:])
	m.Write([]byte(principal))
	return int64(binary.BigEndian.Uint32(m.Sum(nil)) & producerTagMask)
}

// bindProducerID turns the controller's number into the id the caller of
// ctx owns. Without a key, or without a principal (a broker without TLS),
// the number is the id.
func (b *Broker) bindProducerID(ctx context.Context, counter int64) (int64, error) {
	p, ok := security.PrincipalFrom(ctx)
	if b.producerIDKey == nil || !ok {
		return counter, nil
	}
	if counter > producerCounterMask {
		return 0, refuse(ReasonUnavailable, nil, "the cluster has handed out all %d producer ids", producerCounterMask)
	}
	return producerTag(b.producerIDKey, counter, p.Name)<<producerCounterBits | counter, nil
}

// checkProducerID refuses a batch whose producer id was not issued to the
// caller of ctx. Batches without a producer id (-1) pass, and so do
// brokers, which do not produce.
func (b *Broker) checkProducerID(ctx context.Context, id int64) error {
	p, ok := security.PrincipalFrom(ctx)
	if b.producerIDKey == nil || !ok || p.Broker || id < 0 {
		return nil
	}
	if id>>producerCounterBits == producerTag(b.producerIDKey, id&producerCounterMask, p.Name) {
		return nil
	}
	return PermissionDenied("producer id %d was not issued to %s: initialise a producer of your own", id, p.Name).
		With("principal", p.Name).With("producer_id", itoa(id))
}
