package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
)

// Op names a Bucket operation in Metrics.
type Op int

// The operations Metrics counts. A streamed write counts once, as
// OpCreate, from Create to the Close or Abort that ends it.
const (
	OpOpen Op = iota
	OpReadAt
	OpGet
	OpStat
	OpList
	OpCreate
	OpPut
	OpDelete
	numOps
)

var opNames = [numOps]string{"open", "read_at", "get", "stat", "list", "create", "put", "delete"}

// String returns the operation's name, fit for a metric label.
func (o Op) String() string {
	if o < 0 || o >= numOps {
		return fmt.Sprintf("op(%d)", int(o))
	}
	return opNames[o]
}

// Ops lists every operation Metrics counts, in a fixed order.
func Ops() []Op {
	ops := make([]Op, numOps)
	for i := range ops {
		ops[i] = Op(i)
	}
	return ops
}

// OpStats are the counts of one operation.
type OpStats struct {
	// Calls is how many times the operation was started.
	Calls int64
	// Errors is how many calls failed. Outcomes a caller expects and acts
	// on are not failures: ErrNotFound from Open, Get and Stat,
	// ErrPreconditionFailed from Put, io.EOF from ReadAt, a context the
	// caller cancelled, an error returned by a List callback, and a write
	// the caller aborted.
	Errors int64
	// BytesRead counts the bytes returned by Get and ReadAt.
	BytesRead int64
	// BytesWritten counts the bytes of objects committed by Put and by a
	// Writer's Close; an aborted or failed write adds nothing.
	BytesWritten int64
}

// Metrics holds counters per operation, updated atomically by the buckets
// wrapped with WithMetrics. The zero value is ready to use; one Metrics may
// be shared by several buckets to count them together.
type Metrics struct {
	ops [numOps]opCounters
}

type opCounters struct {
	calls, errors, read, written atomic.Int64
}

// Snapshot returns the current counts of every operation. Each counter is
// read atomically, though not all of them at one instant.
func (m *Metrics) Snapshot() map[Op]OpStats {
	s := make(map[Op]OpStats, numOps)
	for i := range m.ops {
		c := &m.ops[i]
		s[Op(i)] = OpStats{
			Calls:        c.calls.Load(),
			Errors:       c.errors.Load(),
			BytesRead:    c.read.Load(),
			BytesWritten: c.written.Load(),
		}
	}
	return s
}

// done counts the end of one call of op.
func (m *Metrics) done(ctx context.Context, op Op, err error, read, written int64) {
	c := &m.ops[op]
	c.read.Add(read)
	c.written.Add(written)
	if err != nil && !expected(ctx, op, err) {
		c.errors.Add(1)
	}
}

// expected reports whether err is an outcome callers handle as a normal
// answer rather than a failure of the store.
func expected(ctx context.Context, op Op, err error) bool {
	switch {
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		return true
	case op == OpOpen || op == OpGet || op == OpStat:
		return errors.Is(err, ErrNotFound)
	case op == OpPut:
		return errors.Is(err, ErrPreconditionFailed)
	case op == OpReadAt:
		return err == io.EOF
	}
	return false
}
