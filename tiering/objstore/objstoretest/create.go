package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
)

// createCases: streamed writes through Create, which commit on Close only.
var createCases = []testCase{
	{"CreateLarge", testCreateLarge},
	{"CreateEmpty", testCreateEmpty},
	{"CreateInvisibleUntilClose", testCreateInvisibleUntilClose},
	{"Abort", testAbort},
	{"AbortAfterClose", testAbortAfterClose},
}

// largeSize is over one default S3 part (16 MiB), so the S3 run goes
// through a multipart upload, and not a multiple of any part size.
const largeSize = 20<<20 + 12345

// writeChunks writes data through w in odd-sized pieces, as a segment
// upload copying from a file would, and checks every Write takes it all.
func writeChunks(t *testing.T, w objstore.Writer, data []byte) {
	t.Helper()
	sizes := []int{1, 4093, 65537, 1<<20 + 7, 3<<20 + 11, 0, 17}
	for i, off := 0, 0; off < len(data); i++ {
		n := min(sizes[i%len(sizes)], len(data)-off)
		m, err := w.Write(data[off : off+n])
		if err != nil || m != n {
			t.Fatalf("Write(%d bytes at %d) = %d, %v; want %d, nil", n, off, m, err, n)
		}
		off += n
	}
}

func testCreateLarge(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const key = "create/large.seg"
	data := payload(7, largeSize)
	w, err := b.Create(ctx, key)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	writeChunks(t, w, data)
	wantMissing(t, ctx, b, key)
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	info, err := b.Stat(ctx, key)
	if err != nil {
		t.Fatalf("Stat after Close: %v", err)
	}
	if info.Size != largeSize || info.ETag == "" {
		t.Fatalf("Stat = %+v; want size %d and an ETag", info, largeSize)
	}
	wantContent(t, ctx, b, key, data)

	// Ranges across the 16 MiB boundary of the first S3 part, and the end.
	r, err := b.Open(ctx, key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	for _, rg := range []struct{ off, n int }{{16<<20 - 1000, 5000}, {largeSize - 100, 100}, {0, 1}} {
		p := make([]byte, rg.n)
		n, err := r.ReadAt(ctx, p, int64(rg.off))
		if n != rg.n || err != nil || !bytes.Equal(p, data[rg.off:rg.off+rg.n]) {
			t.Fatalf("ReadAt(%d bytes at %d) = %d, %v (content equal: %v)", rg.n, rg.off, n, err, bytes.Equal(p, data[rg.off:rg.off+rg.n]))
		}
	}
}

func testCreateEmpty(t *testing.T, ctx context.Context, b objstore.Bucket) {
	w, err := b.Create(ctx, "create/empty")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("Close of an empty object: %v", err)
	}
	wantContent(t, ctx, b, "create/empty", nil)
}

// testCreateInvisibleUntilClose writes one new object and one replacement
// while a reader polls both: every read sees nothing or the old version
// until Close returns, and only the whole new version after.
func testCreateInvisibleUntilClose(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const (
		fresh    = "create/visible/fresh"
		replaced = "create/visible/replaced"
		size     = 3<<20 + 5
	)
	old := payload(1, 1000)
	mustPut(t, ctx, b, replaced, old)
	news := map[string][]byte{fresh: payload(2, size), replaced: payload(3, size)}
	writers := map[string]objstore.Writer{}
	for key := range news {
		w, err := b.Create(ctx, key)
		if err != nil {
			t.Fatalf("Create(%q): %v", key, err)
		}
		writers[key] = w
	}

	// The poller sees each key before, during and after the writes; it
	// only reports, and the test goroutine waits for it before the end.
	var (
		wg        sync.WaitGroup
		stop      = make(chan struct{})
		mu        sync.Mutex
		committed = map[string]bool{}
	)
	check := func(key string) bool {
		mu.Lock()
		done := committed[key]
		mu.Unlock()
		data, _, err := b.Get(ctx, key)
		switch {
		case errors.Is(err, objstore.ErrNotFound) && key == fresh && !done:
			return true
		case err != nil:
			t.Errorf("Get(%q) while writing: %v", key, err)
			return false
		case bytes.Equal(data, news[key]):
			return true
		case bytes.Equal(data, old) && key == replaced && !done:
			return true
		}
		t.Errorf("Get(%q) while writing = %d bytes, neither the old nor the whole new version", key, len(data))
		return false
	}
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if !check(fresh) || !check(replaced) {
				return
			}
			err := b.List(ctx, fresh, func(info objstore.ObjectInfo) error {
				if info.Size != size {
					t.Errorf("List shows %q with %d bytes of %d", info.Key, info.Size, size)
				}
				return nil
			})
			if err != nil {
				t.Errorf("List while writing: %v", err)
				return
			}
		}
	})
	for key, w := range writers {
		writeChunks(t, w, news[key])
	}
	for key, w := range writers {
		if err := w.Close(); err != nil {
			t.Errorf("Close(%q): %v", key, err)
		}
		// A read that overlaps Close may see either version; one that
		// starts after it returned must see the new one.
		mu.Lock()
		committed[key] = true
		mu.Unlock()
	}
	close(stop)
	wg.Wait()
	for key, want := range news {
		wantContent(t, ctx, b, key, want)
	}
}

func testAbort(t *testing.T, ctx context.Context, b objstore.Bucket) {
	// Over one S3 part, so a multipart upload has begun when Abort runs.
	data := payload(9, 17<<20+3)
	old := []byte("the old version")
	mustPut(t, ctx, b, "abort/replaced", old)
	for _, key := range []string{"abort/fresh", "abort/replaced"} {
		w, err := b.Create(ctx, key)
		if err != nil {
			t.Fatalf("Create(%q): %v", key, err)
		}
		writeChunks(t, w, data)
		if err := w.Abort(); err != nil {
			t.Fatalf("Abort(%q): %v", key, err)
		}
		if _, err := w.Write([]byte("more")); !errors.Is(err, objstore.ErrAborted) {
			t.Fatalf("Write after Abort: %v; want ErrAborted", err)
		}
		if err := w.Close(); !errors.Is(err, objstore.ErrAborted) {
			t.Fatalf("Close after Abort: %v; want ErrAborted", err)
		}
		if err := w.Abort(); err != nil {
			t.Fatalf("second Abort: %v", err)
		}
	}
	wantMissing(t, ctx, b, "abort/fresh")
	wantContent(t, ctx, b, "abort/replaced", old)
	if got := keys(t, ctx, b, ""); len(got) != 1 || got[0] != "abort/replaced" {
		t.Fatalf("after Abort, List = %q; want only [abort/replaced]", got)
	}
}

func testAbortAfterClose(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const key = "abort/after-close"
	data := payload(11, 1<<20)
	w, err := b.Create(ctx, key)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	writeChunks(t, w, data)
	if err := w.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort after Close: %v; want nil", err)
	}
	wantContent(t, ctx, b, key, data)
}
