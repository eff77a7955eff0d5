// Package objstore is the object store under Strata's cold tier: the
// smallest interface the tiering code needs, with implementations for
// memory (tests), a local directory (the embedded default) and S3 (any
// S3-compatible store, MinIO included), and wrappers that add key prefixes
// and metrics.
//
// Objects are immutable once written, except where a conditional write
// replaces one on purpose (the manifest head). Keys are slash-separated
// paths without a leading slash.
package objstore

import (
	"context"
	"errors"
	"io"
	"time"
)

// Errors every implementation returns, wrapped with detail; test with
// errors.Is.
var (
	// ErrNotFound: no object has that key.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrPreconditionFailed: a conditional write lost: the object exists
	// (IfAbsent) or is not the version named (IfMatch).
	ErrPreconditionFailed = errors.New("objstore: precondition failed")
	// ErrAborted: a Writer was aborted, or its context ended, before Close.
	ErrAborted = errors.New("objstore: write aborted")
)

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ETag    string // opaque version tag; changes whenever the content does
	ModTime time.Time
}

// Reader is the read side, its own interface so that code which only reads
// (the cold reader) cannot write.
type Reader interface {
	// Open returns a handle for ranged reads of one object.
	Open(ctx context.Context, key string) (ObjectReader, error)
	// Get reads a whole object, for small ones (manifests).
	Get(ctx context.Context, key string) ([]byte, ObjectInfo, error)
	// Stat describes an object.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List calls fn for every object whose key starts with prefix, in key
	// order; an error from fn stops the listing and is returned.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
}

// SizedOpener is a Reader that can open an object whose size the caller
// knows already (a cold segment's, from its manifest) without a request to
// the store: its first ReadAt is the first request. Objects are immutable,
// so the size cannot have changed; one that is gone fails that ReadAt with
// ErrNotFound, as Open would have.
type SizedOpener interface {
	OpenSized(ctx context.Context, key string, size int64) (ObjectReader, error)
}

// OpenSized opens key of size bytes through r: with OpenSized where r has
// it, else with Open (which then learns the size from the store).
func OpenSized(ctx context.Context, r Reader, key string, size int64) (ObjectReader, error) {
	if s, ok := r.(SizedOpener); ok {
		return s.OpenSized(ctx, key, size)
	}
	return r.Open(ctx, key)
}

// ObjectReader reads ranges of one object. It is safe for concurrent use.
type ObjectReader interface {
	// ReadAt fills p from offset off. It never returns a short read without
	// an error: reading past the end gives io.ErrUnexpectedEOF (or io.EOF
	// when off is at the end exactly).
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	// Size is the object's size.
	Size() int64
	Close() error
}

// Bucket is a whole store: reads and writes.
type Bucket interface {
	Reader
	// Create starts writing an object, for large ones (segments) that are
	// streamed rather than held in memory. Nothing is visible under key
	// until Close returns nil; Abort (or a failed Close) leaves no trace, and
	// a concurrent reader never sees a partial object. Writes through Create
	// are unconditional: callers give such objects unique keys.
	Create(ctx context.Context, key string) (Writer, error)
	// Put writes a whole object at once, honouring the conditions in opts.
	// It returns the new object's info (with its ETag).
	Put(ctx context.Context, key string, data []byte, opts WriteOptions) (ObjectInfo, error)
	// Delete removes an object. Deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
}

// WriteOptions are conditions on a Put. The zero value writes
// unconditionally.
type WriteOptions struct {
	// IfAbsent: fail with ErrPreconditionFailed if the key exists.
	IfAbsent bool
	// IfMatch: fail with ErrPreconditionFailed unless the object exists with
	// this ETag. Used to replace the manifest head only if nobody else has
	// since.
	IfMatch string
}

// Writer is an object being written.
type Writer interface {
	io.Writer
	// Close commits the object; after it returns nil the object is visible
	// in full.
	Close() error
	// Abort discards the object. Calling it after Close does nothing.
	Abort() error
}
