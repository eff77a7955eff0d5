package objstore_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/objstoretest"
)

func TestWithPrefix(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return objstore.WithPrefix(objstore.NewMemory(), "cluster-1/strata")
	})
}

func TestWithMetrics(t *testing.T) {
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		return objstore.WithMetrics(objstore.NewMemory(), new(objstore.Metrics))
	})
}

// TestWithPrefixIsolates: the view stores under the prefix, lists without
// it, and sees nothing outside it.
func TestWithPrefixIsolates(t *testing.T) {
	ctx := t.Context()
	inner := objstore.NewMemory()
	p := objstore.WithPrefix(inner, "c1/")
	mustPut := func(b objstore.Bucket, key string) objstore.ObjectInfo {
		t.Helper()
		info, err := b.Put(ctx, key, []byte(key), objstore.WriteOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return info
	}
	info := mustPut(p, "t/0/seg")
	if info.Key != "t/0/seg" {
		t.Fatalf("Put through the prefix returned key %q", info.Key)
	}
	mustPut(inner, "c10/t/0/seg") // shares the prefix's characters, not its directory
	mustPut(inner, "other")
	list := func(b objstore.Bucket, prefix string) []string {
		var ks []string
		if err := b.List(ctx, prefix, func(i objstore.ObjectInfo) error { ks = append(ks, i.Key); return nil }); err != nil {
			t.Fatal(err)
		}
		return ks
	}
	if got := list(inner, ""); !slices.Equal(got, []string{"c1/t/0/seg", "c10/t/0/seg", "other"}) {
		t.Fatalf("inner keys = %q", got)
	}
	if got := list(p, ""); !slices.Equal(got, []string{"t/0/seg"}) {
		t.Fatalf("keys through the prefix = %q; want [t/0/seg]", got)
	}
	if _, err := p.Stat(ctx, "other"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Stat of a key outside the prefix: %v; want ErrNotFound", err)
	}
	if objstore.WithPrefix(inner, "") != inner {
		t.Fatal("an empty prefix should return the bucket itself")
	}
}

// TestMetricsCounts: calls, bytes and failures are counted, and expected
// outcomes (not found, a lost condition, io.EOF, a cancelled context, a
// stopped listing, an abort) are not failures.
func TestMetricsCounts(t *testing.T) {
	ctx := t.Context()
	var m objstore.Metrics
	b := objstore.WithMetrics(objstore.NewMemory(), &m)

	info, err := b.Put(ctx, "k", []byte("hello"), objstore.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Expected outcomes.
	b.Put(ctx, "k", []byte("x"), objstore.WriteOptions{IfAbsent: true})
	b.Put(ctx, "k", []byte("x"), objstore.WriteOptions{IfMatch: "stale"})
	b.Get(ctx, "missing")
	b.Stat(ctx, "missing")
	b.Open(ctx, "missing")
	stop := errors.New("stop")
	b.List(ctx, "", func(objstore.ObjectInfo) error { return stop })
	dead, cancel := context.WithCancel(ctx)
	cancel()
	b.Get(dead, "k")
	// Successes with bytes.
	if _, _, err := b.Get(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	r, err := b.Open(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(ctx, make([]byte, 3), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadAt(ctx, make([]byte, 3), 5); err != io.EOF {
		t.Fatalf("ReadAt at the end: %v", err)
	}
	w, _ := b.Create(ctx, "streamed")
	w.Write([]byte("12345678"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w, _ = b.Create(ctx, "aborted")
	w.Write([]byte("1234"))
	w.Abort()
	// Failures: invalid keys, and reading past the end.
	b.Put(ctx, "/bad", nil, objstore.WriteOptions{})
	b.Get(ctx, "bad/")
	b.Delete(ctx, "")
	r.ReadAt(ctx, make([]byte, 3), 4)
	w, _ = b.Create(ctx, "closed-twice")
	w.Close()
	w.Write([]byte("late"))
	if err := b.Delete(ctx, info.Key); err != nil {
		t.Fatal(err)
	}

	want := map[objstore.Op]objstore.OpStats{
		objstore.OpPut:    {Calls: 4, Errors: 1, BytesWritten: 5},
		objstore.OpGet:    {Calls: 4, Errors: 1, BytesRead: 5},
		objstore.OpStat:   {Calls: 1},
		objstore.OpOpen:   {Calls: 2},
		objstore.OpReadAt: {Calls: 3, Errors: 1, BytesRead: 3 + 1},
		objstore.OpList:   {Calls: 1},
		objstore.OpCreate: {Calls: 3, Errors: 0, BytesWritten: 8},
		objstore.OpDelete: {Calls: 2, Errors: 1},
	}
	got := m.Snapshot()
	for _, op := range objstore.Ops() {
		if got[op] != want[op] {
			t.Errorf("%s: got %+v, want %+v", op, got[op], want[op])
		}
	}
}
