package objstore

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// memory is the in-memory Bucket: a map under a mutex. It is the reference
// the other stores are compared with, so it is strict where they are: keys
// are validated, conditions are exact and a Writer's bytes appear only on
// Close.
type memory struct {
	mu struct {
		sync.Mutex
		objects map[string]memObject
		// version numbers every write, so each one gets an ETag no other
		// write had, even one of the same bytes: a compare-and-swap can
		// then never succeed against a version it did not read (ABA).
		version uint64
	}
}

// memObject is one stored object. data is never modified after it is
// stored: a rewrite stores a new slice, so readers that hold the old one
// keep a consistent view.
type memObject struct {
	data []byte
	info ObjectInfo
}

// NewMemory returns an empty in-memory Bucket, for tests and tools.
func NewMemory() Bucket {
	m := &memory{}
	m.mu.objects = make(map[string]memObject)
	return m
}

func (m *memory) lookup(ctx context.Context, op, key string) (memObject, error) {
	if err := ctxErr(ctx, op, key); err != nil {
		return memObject{}, err
	}
	if err := ValidateKey(key); err != nil {
		return memObject{}, err
	}
	m.mu.Lock()
	obj, ok := m.mu.objects[key]
	m.mu.Unlock()
	if !ok {
		return memObject{}, fmt.Errorf("objstore: %s %q: %w", op, key, ErrNotFound)
	}
	return obj, nil
}

// Open implements Reader. The handle keeps the version that was current at
// Open, as a file handle keeps its file after a rename replaces it.
func (m *memory) Open(ctx context.Context, key string) (ObjectReader, error) {
	obj, err := m.lookup(ctx, "open", key)
	if err != nil {
		return nil, err
	}
	return &memReader{key: key, data: obj.data}, nil
}

// Get implements Reader. It returns a copy: the caller may keep or change it.
func (m *memory) Get(ctx context.Context, key string) ([]byte, ObjectInfo, error) {
	obj, err := m.lookup(ctx, "get", key)
	if err != nil {
		return nil, ObjectInfo{}, err
	}
	return bytes.Clone(obj.data), obj.info, nil
}

// Stat implements Reader.
func (m *memory) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	obj, err := m.lookup(ctx, "stat", key)
	return obj.info, err
}

// List implements Reader. It calls fn on a snapshot taken under the lock
// and without holding it, so fn may use the bucket.
func (m *memory) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := ctxErr(ctx, "list", prefix); err != nil {
		return err
	}
	m.mu.Lock()
	var infos []ObjectInfo
	for key, obj := range m.mu.objects {
		if strings.HasPrefix(key, prefix) {
			infos = append(infos, obj.info)
		}
	}
	m.mu.Unlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i].Key < infos[j].Key })
	for _, info := range infos {
		if err := ctxErr(ctx, "list", prefix); err != nil {
			return err
		}
		if err := fn(info); err != nil {
			return err
		}
	}
	return nil
}

// Create implements Bucket. The bytes are buffered and stored at Close.
func (m *memory) Create(ctx context.Context, key string) (Writer, error) {
	if err := ctxErr(ctx, "create", key); err != nil {
		return nil, err
	}
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	return &memWriter{ctx: ctx, m: m, key: key}, nil
}

// Put implements Bucket. The conditions are checked and the object stored
// under one hold of the lock, so concurrent conditional Puts serialise and
// exactly one of them wins per version.
func (m *memory) Put(ctx context.Context, key string, data []byte, opts WriteOptions) (ObjectInfo, error) {
	if err := ctxErr(ctx, "put", key); err != nil {
		return ObjectInfo{}, err
	}
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	data = bytes.Clone(data)
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, exists := m.mu.objects[key]
	if opts.IfAbsent && exists {
		return ObjectInfo{}, fmt.Errorf("objstore: put %q if absent: object exists: %w", key, ErrPreconditionFailed)
	}
	if opts.IfMatch != "" {
		if !exists {
			return ObjectInfo{}, fmt.Errorf("objstore: put %q if ETag %s: no such object: %w", key, opts.IfMatch, ErrPreconditionFailed)
		}
		if cur.info.ETag != opts.IfMatch {
			return ObjectInfo{}, fmt.Errorf("objstore: put %q if ETag %s: ETag is %s: %w", key, opts.IfMatch, cur.info.ETag, ErrPreconditionFailed)
		}
	}
	return m.storeLocked(key, data), nil
}

// storeLocked stores data, which the caller no longer changes, as a new
// version of key.
func (m *memory) storeLocked(key string, data []byte) ObjectInfo {
	m.mu.version++
	info := ObjectInfo{
		Key:     key,
		Size:    int64(len(data)),
		ETag:    "m" + strconv.FormatUint(m.mu.version, 10),
		ModTime: time.Now(),
	}
	m.mu.objects[key] = memObject{data: data, info: info}
	return info
}

// Delete implements Bucket.
func (m *memory) Delete(ctx context.Context, key string) error {
	if err := ctxErr(ctx, "delete", key); err != nil {
		return err
	}
	if err := ValidateKey(key); err != nil {
		return err
	}
	m.mu.Lock()
	delete(m.mu.objects, key)
	m.mu.Unlock()
	return nil
}

// memReader reads one version of an object.
type memReader struct {
	key  string
	data []byte
}

func (r *memReader) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := ctxErr(ctx, "read", r.key); err != nil {
		return 0, err
	}
	n, err := ReadRange(r.key, int64(len(r.data)), off, len(p))
	if n > 0 {
		copy(p[:n], r.data[off:])
	}
	return n, err
}

func (r *memReader) Size() int64  { return int64(len(r.data)) }
func (r *memReader) Close() error { return nil }

// memWriter buffers an object until Close.
type memWriter struct {
	ctx   context.Context
	m     *memory
	key   string
	buf   bytes.Buffer
	state writeState
}

func (w *memWriter) Write(p []byte) (int, error) {
	if err := w.state.usable(w.ctx, "write", w.key); err != nil {
		w.discard()
		return 0, err
	}
	return w.buf.Write(p)
}

func (w *memWriter) Close() error {
	if w.state == writeClosed {
		return nil
	}
	if err := w.state.usable(w.ctx, "close", w.key); err != nil {
		w.discard()
		return err
	}
	w.state = writeClosed
	data := w.buf.Bytes()
	w.buf = bytes.Buffer{}
	w.m.mu.Lock()
	w.m.storeLocked(w.key, data)
	w.m.mu.Unlock()
	return nil
}

func (w *memWriter) Abort() error {
	if w.state == writeOpen {
		w.discard()
	}
	return nil
}

// discard drops the buffer of a writer that will never commit.
func (w *memWriter) discard() {
	if w.state == writeOpen {
		w.state = writeAborted
		w.buf = bytes.Buffer{}
	}
}
