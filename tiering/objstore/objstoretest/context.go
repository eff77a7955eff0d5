package objstoretest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
)

// contextCases: an ended context stops every operation promptly, changes
// nothing, and ends a Writer as an abort.
var contextCases = []testCase{
	{"CancelledContext", testCancelledContext},
	{"CancelDuringCreate", testCancelDuringCreate},
	{"CancelDuringList", testCancelDuringList},
}

// prompt bounds how long a call with an ended context may take: it should
// not wait for the network, let alone retry.
const prompt = 5 * time.Second

func testCancelledContext(t *testing.T, ctx context.Context, b objstore.Bucket) {
	mustPut(t, ctx, b, "ctx/old", []byte("old"))
	r, err := b.Open(ctx, "ctx/old")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()

	dead, cancel := context.WithCancel(ctx)
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, _, err := b.Get(dead, "ctx/old"); return err }},
		{"Stat", func() error { _, err := b.Stat(dead, "ctx/old"); return err }},
		{"Open", func() error {
			r, err := b.Open(dead, "ctx/old")
			if err == nil {
				r.Close()
			}
			return err
		}},
		{"ReadAt", func() error { _, err := r.ReadAt(dead, make([]byte, 2), 0); return err }},
		{"List", func() error { return b.List(dead, "", func(objstore.ObjectInfo) error { return nil }) }},
		{"Put", func() error { _, err := b.Put(dead, "ctx/new", []byte("new"), objstore.WriteOptions{}); return err }},
		{"Delete", func() error { return b.Delete(dead, "ctx/old") }},
		{"Create", func() error {
			w, err := b.Create(dead, "ctx/created")
			if err != nil {
				return err
			}
			if _, err := w.Write([]byte("x")); err != nil {
				return err
			}
			return w.Close()
		}},
	}
	for _, c := range calls {
		start := time.Now()
		err := c.call()
		if took := time.Since(start); took > prompt {
			t.Errorf("%s with a cancelled context took %v", c.name, took)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v; want an error wrapping context.Canceled", c.name, err)
		}
	}
	wantContent(t, ctx, b, "ctx/old", []byte("old"))
	wantMissing(t, ctx, b, "ctx/new")
	wantMissing(t, ctx, b, "ctx/created")
}

func testCancelDuringCreate(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const key = "ctx/create"
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := b.Create(wctx, key)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	writeChunks(t, w, payload(31, 1<<20))
	cancel()
	start := time.Now()
	_, werr := w.Write([]byte("more"))
	cerr := w.Close()
	if took := time.Since(start); took > prompt {
		t.Errorf("Write and Close after the context ended took %v", took)
	}
	if !errors.Is(werr, objstore.ErrAborted) || !errors.Is(cerr, objstore.ErrAborted) {
		t.Fatalf("after the Create context ended: Write = %v, Close = %v; want ErrAborted", werr, cerr)
	}
	if !errors.Is(cerr, context.Canceled) && !errors.Is(werr, context.Canceled) {
		t.Errorf("the abort does not say the context ended: Write = %v, Close = %v", werr, cerr)
	}
	wantMissing(t, ctx, b, key)
}

func testCancelDuringList(t *testing.T, ctx context.Context, b objstore.Bucket) {
	for _, key := range []string{"l/1", "l/2", "l/3"} {
		mustPut(t, ctx, b, key, []byte(key))
	}
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	calls := 0
	err := b.List(lctx, "l/", func(objstore.ObjectInfo) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("List whose context ends in the first callback = %v after %d callbacks; want context.Canceled after 1", err, calls)
	}
}
