package broker

import (
	"context"
	"errors"

	"github.com/strata-log/strata/tiering/objstore"
)

// probeKey is an object no broker writes: asking for it shows whether the
// object store answers without reading or changing anything of a topic.
const probeKey = "strata-reachability-probe"

// ErrNoObjectStore is ProbeObjectStore's answer on a broker without a cold
// tier (object_store.type none).
var ErrNoObjectStore = errors.New("broker: no object store configured")

// ProbeObjectStore asks the object store about one object and returns nil
// when it answers (found or not found), else why it does not: the bucket's
// reachability as this broker sees it, for the operator's console. It
// sends one request (a Stat) each call.
func (b *Broker) ProbeObjectStore(ctx context.Context) error {
	if b.store == nil {
		return ErrNoObjectStore
	}
	_, err := b.store.Stat(ctx, probeKey)
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		return nil
	}
	return err
}
