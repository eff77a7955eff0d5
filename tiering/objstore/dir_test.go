package objstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/objstoretest"
)

func TestDir(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket { return newDir(t, t.TempDir()) })
}

func newDir(t *testing.T, root string) objstore.Bucket {
	t.Helper()
	b, err := objstore.NewDir(root)
	if err != nil {
		t.Fatalf("NewDir: %v", err)
	}
	return b
}

// files lists every file under root, relative to it.
func files(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !e.IsDir() {
			rel, _ := filepath.Rel(root, path)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDirCrashDuringCreate: a process that dies between Write and Close
// leaves a temp file; the object never appears, List never shows the temp
// file, and the next NewDir on the root removes it.
func TestDirCrashDuringCreate(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	b := newDir(t, root)
	if _, err := b.Put(ctx, "seg/old", []byte("old"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := b.Create(ctx, "seg/new")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("half of a segment")); err != nil {
		t.Fatal(err)
	}
	// The crash: w is never closed or aborted.
	on := files(t, root)
	if len(on) != 2 || !slices.Contains(on, "seg/old") {
		t.Fatalf("files during the write = %q; want seg/old and one temp file", on)
	}

	for _, b := range []objstore.Bucket{b, newDir(t, root)} {
		var listed []string
		err := b.List(ctx, "", func(info objstore.ObjectInfo) error {
			listed = append(listed, info.Key)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(listed, []string{"seg/old"}) {
			t.Fatalf("List = %q; want [seg/old]", listed)
		}
		if _, err := b.Stat(ctx, "seg/new"); !errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("Stat of the unfinished object: %v; want ErrNotFound", err)
		}
	}
	if got := files(t, root); !slices.Equal(got, []string{"seg/old"}) {
		t.Fatalf("files after reopening = %q; want the temp file gone", got)
	}
}

// TestDirKeys: keys map to paths under the root, and keys that could not
// be stored as files, or would leave the root, are refused with a clear
// error before anything is written.
func TestDirKeys(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	b := newDir(t, root)
	if _, err := b.Put(ctx, "topic/0/00000000000000000000-1-ab.seg", []byte("x"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "topic", "0", "00000000000000000000-1-ab.seg")); err != nil {
		t.Fatalf("object file: %v", err)
	}
	for key, why := range map[string]string{
		"../escape":            `".." segment`,
		"a/../../escape":       `".." segment`,
		"/etc/passwd":          "leading slash",
		"a//b":                 "empty path segment",
		"a/":                   "empty path segment",
		"":                     "empty",
		"a/.strata-tmp-123456": "reserved for temp files",
	} {
		_, err := b.Put(ctx, key, []byte("x"), objstore.WriteOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), "objstore: invalid key") || !strings.Contains(err.Error(), why) {
			t.Errorf("Put(%q) = %v; want an invalid key error saying %q", key, err, why)
		}
	}
	if got := files(t, root); !slices.Equal(got, []string{"topic/0/00000000000000000000-1-ab.seg"}) {
		t.Fatalf("files = %q; want only the valid object", got)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(root), "escape")); err == nil {
		t.Fatal("a key escaped the root")
	}
}

// TestDirDeletePrunes: deleting the last object of a directory removes the
// directories it leaves empty, but never the root.
func TestDirDeletePrunes(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	b := newDir(t, root)
	for _, key := range []string{"t/0/a", "t/1/b"} {
		if _, err := b.Put(ctx, key, []byte(key), objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(ctx, "t/0/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "t", "0")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("t/0 after its last object went: %v; want it removed", err)
	}
	if err := b.Delete(ctx, "t/1/b"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 0 {
		t.Fatalf("root after deleting everything: %v entries, %v; want an empty root", len(entries), err)
	}
}

// TestDirKeyIsDirectory: on a file system a key cannot be an object and a
// directory of objects at once; the store says so instead of losing data.
func TestDirKeyIsDirectory(t *testing.T) {
	ctx := context.Background()
	b := newDir(t, t.TempDir())
	if _, err := b.Put(ctx, "a/b", []byte("x"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "a", []byte("y"), objstore.WriteOptions{}); err == nil {
		t.Fatal(`Put("a") over the directory of "a/b" succeeded`)
	}
	if _, err := b.Put(ctx, "a/b/c", []byte("z"), objstore.WriteOptions{}); err == nil {
		t.Fatal(`Put("a/b/c") under the object "a/b" succeeded`)
	}
	data, _, err := b.Get(ctx, "a/b")
	if err != nil || string(data) != "x" {
		t.Fatalf(`Get("a/b") = %q, %v; want it unchanged`, data, err)
	}
}

// TestDirETagAcrossReopen: ETags are stable across a reopen, and a write
// after it gets a new one even if the clock now reads earlier than the
// stored file's time (stamps continue after the newest file found).
func TestDirETagAcrossReopen(t *testing.T) {
	ctx := t.Context()
	root := t.TempDir()
	b := newDir(t, root)
	if _, err := b.Put(ctx, "k", []byte("one"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(root, "k"), future, future); err != nil {
		t.Fatal(err)
	}
	before, err := b.Stat(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	b = newDir(t, root)
	after, err := b.Stat(ctx, "k")
	if err != nil || after.ETag != before.ETag {
		t.Fatalf("ETag after reopen = %q, %v; want %q", after.ETag, err, before.ETag)
	}
	for range 3 {
		info, err := b.Put(ctx, "k", []byte("two"), objstore.WriteOptions{IfMatch: after.ETag})
		if err != nil {
			t.Fatal(err)
		}
		if info.ETag == after.ETag || !info.ModTime.After(after.ModTime) {
			t.Fatalf("rewrite got ETag %q at %v after %q at %v; want a new ETag, stamped later",
				info.ETag, info.ModTime, after.ETag, after.ModTime)
		}
		after = info
	}
}
