package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
)

// readCases: ranged reads through Open, which the cold reader's chunk cache
// is built on.
var readCases = []testCase{
	{"ReadAt", testReadAt},
	{"ConcurrentReadAt", testConcurrentReadAt},
}

func testReadAt(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const key = "read/obj"
	data := payload(21, 100_000)
	size := len(data)
	mustPut(t, ctx, b, key, data)
	r, err := b.Open(ctx, key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	if r.Size() != int64(size) {
		t.Fatalf("Size() = %d, want %d", r.Size(), size)
	}
	for _, c := range []struct {
		name    string
		off, n  int
		wantN   int
		wantErr error
	}{
		{"start", 0, 100, 100, nil},
		{"middle", 50_000, 1234, 1234, nil},
		{"whole object", 0, size, size, nil},
		{"ending at the end exactly", size - 100, 100, 100, nil},
		{"empty buffer", 10, 0, 0, nil},
		{"at the end exactly", size, 10, 0, io.EOF},
		{"across the end", size - 40, 100, 40, io.ErrUnexpectedEOF},
		{"past the end", size + 5, 10, 0, io.ErrUnexpectedEOF},
	} {
		p := make([]byte, c.n)
		n, err := r.ReadAt(ctx, p, int64(c.off))
		if n != c.wantN || !errors.Is(err, c.wantErr) || (c.wantErr == nil && err != nil) {
			t.Fatalf("%s: ReadAt(%d bytes at %d) = %d, %v; want %d, %v", c.name, c.n, c.off, n, err, c.wantN, c.wantErr)
		}
		if c.wantErr == io.EOF && err != io.EOF {
			t.Fatalf("%s: ReadAt error = %#v; want io.EOF itself, as io.ReaderAt gives", c.name, err)
		}
		if !bytes.Equal(p[:n], data[min(c.off, size):min(c.off, size)+n]) {
			t.Fatalf("%s: ReadAt(%d bytes at %d) returned other bytes than were put", c.name, c.n, c.off)
		}
	}
	if n, err := r.ReadAt(ctx, make([]byte, 10), -1); err == nil {
		t.Fatalf("ReadAt at offset -1 = %d, nil; want an error", n)
	}
}

// testConcurrentReadAt shares one ObjectReader among goroutines, as the
// cold reader's chunk fetches and read-ahead do.
func testConcurrentReadAt(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const (
		key     = "read/concurrent"
		readers = 8
		reads   = 25
	)
	data := payload(22, 1<<20+17)
	mustPut(t, ctx, b, key, data)
	r, err := b.Open(ctx, key)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	for g := range readers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for range reads {
				off := rng.IntN(len(data))
				n := 1 + rng.IntN(min(64<<10, len(data)-off))
				p := make([]byte, n)
				m, err := r.ReadAt(ctx, p, int64(off))
				if m != n || err != nil {
					t.Errorf("reader %d: ReadAt(%d bytes at %d) = %d, %v", g, n, off, m, err)
					return
				}
				if !bytes.Equal(p, data[off:off+n]) {
					t.Errorf("reader %d: ReadAt(%d bytes at %d) returned other bytes than were put", g, n, off)
					return
				}
			}
		})
	}
	wg.Wait()
}
