package objstore_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
)

// TestDirReaderChangesNothing: the read-only view of a directory store
// reads what the store wrote, leaves the temp file of a write in flight
// alone (NewDir would delete it), does not create a missing root and
// cannot be turned into a Bucket.
func TestDirReaderChangesNothing(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	b := newDir(t, root)
	if _, err := b.Put(ctx, "c1/t/id/0/manifest", []byte("head"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// A broker's upload in flight: its temp file beside the final path.
	inflight := filepath.Join(root, "c1", "t", "id", "0", ".strata-tmp-upload")
	if err := os.WriteFile(inflight, []byte("half"), 0o644); err != nil {
		t.Fatal(err)
	}

	r, err := objstore.NewDirReader(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(objstore.Bucket); ok {
		t.Fatal("the read-only view is a Bucket")
	}
	data, _, err := r.Get(ctx, "c1/t/id/0/manifest")
	if err != nil || string(data) != "head" {
		t.Fatalf("get: %q, %v", data, err)
	}
	if _, err := os.Stat(inflight); err != nil {
		t.Fatalf("the temp file of the write in flight: %v", err)
	}
	var keys []string
	prefixed := objstore.ReaderWithPrefix(r, "c1/")
	if err := prefixed.List(ctx, "", func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys, []string{"t/id/0/manifest"}) {
		t.Fatalf("listed under the prefix: %q", keys)
	}
	if data, _, err := prefixed.Get(ctx, "t/id/0/manifest"); err != nil || string(data) != "head" {
		t.Fatalf("get under the prefix: %q, %v", data, err)
	}
	if _, ok := prefixed.(objstore.Bucket); ok {
		t.Fatal("the prefixed read-only view is a Bucket")
	}

	missing := filepath.Join(root, "nope")
	if _, err := objstore.NewDirReader(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing root: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("NewDirReader created the missing root: %v", err)
	}
}
