package objstore

import (
	"context"
	"strings"
)

// Wrappers add behaviour to any Bucket without the implementations knowing
// (thanos-io/objstore's prefixed and metered buckets): one store, many
// views, and no flags inside the stores.

// WithPrefix returns a view of b in which every key is stored under
// "prefix/": a broker's objects live under its cluster's prefix in a
// shared bucket. List takes and returns keys without the prefix, and the
// view cannot see or touch keys outside it. Trailing slashes of prefix are
// ignored; an empty prefix returns b itself. A prefix that makes keys
// invalid (a leading slash, an empty or ".." segment) fails every call.
func WithPrefix(b Bucket, prefix string) Bucket {
	prefix = strings.TrimRight(prefix, "/")
	if prefix == "" {
		return b
	}
	return &prefixed{b: b, prefix: prefix + "/"}
}

type prefixed struct {
	b      Bucket
	prefix string // ends in "/"
}

func (p *prefixed) strip(info ObjectInfo) ObjectInfo {
	info.Key = strings.TrimPrefix(info.Key, p.prefix)
	return info
}

func (p *prefixed) Open(ctx context.Context, key string) (ObjectReader, error) {
	return p.b.Open(ctx, p.prefix+key)
}

func (p *prefixed) OpenSized(ctx context.Context, key string, size int64) (ObjectReader, error) {
	return OpenSized(ctx, p.b, p.prefix+key, size)
}

func (p *prefixed) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	data, info, err := p.b.Get(ctx, p.prefix+key)
	return data, p.strip(info), err
}

func (p *prefixed) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	info, err := p.b.Stat(ctx, p.prefix+key)
	return p.strip(info), err
}

func (p *prefixed) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	return p.b.List(ctx, p.prefix+prefix, func(info ObjectInfo) error {
		return fn(p.strip(info))
	})
}

func (p *prefixed) Create(ctx context.Context, key string) (Writer, error) {
	return p.b.Create(ctx, p.prefix+key)
}

func (p *prefixed) Put(ctx context.Context, key string, data []byte, opts WriteOptions) (ObjectInfo, error) {
	info, err := p.b.Put(ctx, p.prefix+key, data, opts)
	return p.strip(info), err
}

func (p *prefixed) Delete(ctx context.Context, key string) error {
	return p.b.Delete(ctx, p.prefix+key)
}

// WithMetrics returns b counting its calls, failures and bytes in m. See
// OpStats for what counts as a failure: expected outcomes (not found, a
// lost condition, a cancelled context) do not, so that an error rate means
// something is wrong with the store.
func WithMetrics(b Bucket, m *Metrics) Bucket {
	return &metered{b: b, m: m}
}

type metered struct {
	b Bucket
	m *Metrics
}

func (w *metered) start(op Op) { w.m.ops[op].calls.Add(1) }

func (w *metered) Open(ctx context.Context, key string) (ObjectReader, error) {
	w.start(OpOpen)
	r, err := w.b.Open(ctx, key)
	w.m.done(ctx, OpOpen, err, 0, 0)
	if err != nil {
		return nil, err
	}
	return &meteredReader{ObjectReader: r, m: w.m}, nil
}

// OpenSized counts as an Open, whether or not it sent a request.
func (w *metered) OpenSized(ctx context.Context, key string, size int64) (ObjectReader, error) {
	w.start(OpOpen)
	r, err := OpenSized(ctx, w.b, key, size)
	w.m.done(ctx, OpOpen, err, 0, 0)
	if err != nil {
		return nil, err
	}
	return &meteredReader{ObjectReader: r, m: w.m}, nil
}

func (w *metered) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	w.start(OpGet)
	data, info, err := w.b.Get(ctx, key)
	w.m.done(ctx, OpGet, err, int64(len(data)), 0)
	return data, info, err
}

func (w *metered) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	w.start(OpStat)
	info, err := w.b.Stat(ctx, key)
	w.m.done(ctx, OpStat, err, 0, 0)
	return info, err
}

func (w *metered) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	w.start(OpList)
	var fnErr error
	err := w.b.List(ctx, prefix, func(info ObjectInfo) error {
		fnErr = fn(info)
		return fnErr
	})
	if err != nil && err == fnErr {
		// The caller stopped the listing; the store did not fail.
		w.m.done(ctx, OpList, nil, 0, 0)
		return err
	}
	w.m.done(ctx, OpList, err, 0, 0)
	return err
}

func (w *metered) Create(ctx context.Context, key string) (Writer, error) {
	w.start(OpCreate)
	wr, err := w.b.Create(ctx, key)
	if err != nil {
		w.m.done(ctx, OpCreate, err, 0, 0)
		return nil, err
	}
	return &meteredWriter{Writer: wr, ctx: ctx, m: w.m}, nil
}

func (w *metered) Put(ctx context.Context, key string, data []byte, opts WriteOptions) (ObjectInfo, error) {
	w.start(OpPut)
	info, err := w.b.Put(ctx, key, data, opts)
	var written int64
	if err == nil {
		written = int64(len(data))
	}
	w.m.done(ctx, OpPut, err, 0, written)
	return info, err
}

func (w *metered) Delete(ctx context.Context, key string) error {
	w.start(OpDelete)
	err := w.b.Delete(ctx, key)
	w.m.done(ctx, OpDelete, err, 0, 0)
	return err
}

// meteredReader counts each ReadAt.
type meteredReader struct {
	ObjectReader
	m *Metrics
}

func (r *meteredReader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	r.m.ops[OpReadAt].calls.Add(1)
	n, err := r.ObjectReader.ReadAt(ctx, p, off)
	r.m.done(ctx, OpReadAt, err, int64(n), 0)
	return n, err
}

// meteredWriter counts one OpCreate outcome when the write ends: at the
// first failed Write or Close, at a successful Close (with the object's
// size), or at Abort (as no failure: the caller chose it).
type meteredWriter struct {
	Writer
	ctx     context.Context
	m       *Metrics
	written int64
	ended   bool
}

func (w *meteredWriter) Write(p []byte) (int, error) {
	n, err := w.Writer.Write(p)
	w.written += int64(n)
	if err != nil {
		w.end(err, 0)
	}
	return n, err
}

func (w *meteredWriter) Close() error {
	err := w.Writer.Close()
	if err != nil {
		w.end(err, 0)
	} else {
		w.end(nil, w.written)
	}
	return err
}

func (w *meteredWriter) Abort() error {
	err := w.Writer.Abort()
	w.end(nil, 0)
	return err
}

func (w *meteredWriter) end(err error, written int64) {
	if w.ended {
		return
	}
	w.ended = true
	w.m.done(w.ctx, OpCreate, err, 0, written)
}
