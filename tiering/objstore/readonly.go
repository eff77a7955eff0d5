package objstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Read-only views, for tools that inspect a cold tier (strata bucket) while
// brokers may be writing it: they must not change a byte of it, not even
// the housekeeping a store does when a broker opens it.

// ErrReadOnly: a write through a read-only view.
var ErrReadOnly = errors.New("objstore: read-only view")

// NewDirReader returns the read side of the directory store at root (see
// NewDir) without what NewDir does on the way: it neither creates root nor
// removes temp files. NewDir's scan deletes every temp file as the
// leftover of a crash, which is right for the broker that owns root and
// wrong for a tool running beside it, whose scan would delete the temp
// file of an upload in flight. A root that does not exist is an error, not
// an empty store: it is more likely a wrong path than an empty cold tier.
func NewDirReader(root string) (Reader, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("objstore: dir %q: %w", root, err)
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return nil, fmt.Errorf("objstore: dir %q: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("objstore: dir %q: not a directory", root)
	}
	// The read methods of dir use only root: no lock, no stamps.
	return readerOnly{&dir{root: abs}}, nil
}

// ReaderWithPrefix is WithPrefix for a Reader: r's objects under
// "prefix/", with keys given and returned without it.
func ReaderWithPrefix(r Reader, prefix string) Reader {
	return readerOnly{WithPrefix(refuseWrites{r}, prefix)}
}

// ReaderWithMetrics counts r's calls in m, as WithMetrics counts a
// Bucket's, and stays read-only.
func ReaderWithMetrics(r Reader, m *Metrics) Reader {
	return readerOnly{WithMetrics(refuseWrites{r}, m)}
}

// readerOnly hides every method but the Reader's, so that a type assertion
// cannot turn a read-only view back into a Bucket.
type readerOnly struct{ Reader }

// refuseWrites lets a Reader pass through the Bucket wrappers; its writes
// fail, and ReaderWithPrefix never hands it out as a Bucket.
type refuseWrites struct{ Reader }

func (refuseWrites) Create(_ context.Context, key string) (Writer, error) {
	return nil, fmt.Errorf("objstore: create %q: %w", key, ErrReadOnly)
}

func (refuseWrites) Put(_ context.Context, key string, _ []byte, _ WriteOptions) (ObjectInfo, error) {
	return ObjectInfo{}, fmt.Errorf("objstore: put %q: %w", key, ErrReadOnly)
}

func (refuseWrites) Delete(_ context.Context, key string) error {
	return fmt.Errorf("objstore: delete %q: %w", key, ErrReadOnly)
}

// OpenSized passes a sized open through, so that a read-only view costs no
// more requests than the store under it.
func (r readerOnly) OpenSized(ctx context.Context, key string, size int64) (ObjectReader, error) {
	return OpenSized(ctx, r.Reader, key, size)
}

// OpenSized passes a sized open through.
func (r refuseWrites) OpenSized(ctx context.Context, key string, size int64) (ObjectReader, error) {
	return OpenSized(ctx, r.Reader, key, size)
}
