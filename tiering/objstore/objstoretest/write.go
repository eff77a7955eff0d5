package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
)

// writeCases: whole-object writes, rewrites, deletes and key rules.
var writeCases = []testCase{
	{"PutGetStat", testPutGetStat},
	{"EmptyObject", testEmptyObject},
	{"RewriteChangesETag", testRewriteChangesETag},
	{"Delete", testDelete},
	{"NotFound", testNotFound},
	{"InvalidKeys", testInvalidKeys},
}

// conditionCases: conditional Puts, alone and under contention.
var conditionCases = []testCase{
	{"IfAbsent", testIfAbsent},
	{"IfMatch", testIfMatch},
	{"ConcurrentIfMatch", testConcurrentIfMatch},
}

func testPutGetStat(t *testing.T, ctx context.Context, b objstore.Bucket) {
	for i, key := range []string{
		"t/put/a",
		"orders/7/00000000000000000042-3-4f2a9c.seg",
		"ünï cödé/with space+plus%percent&amp=eq?q#h",
	} {
		data := payload(uint64(i), 1000+i)
		start := time.Now()
		info := mustPut(t, ctx, b, key, data)
		if info.Key != key || info.Size != int64(len(data)) || info.ETag == "" {
			t.Fatalf("Put(%q) = %+v; want key, size %d and an ETag", key, info, len(data))
		}
		got, ginfo := mustGet(t, ctx, b, key)
		if !bytes.Equal(got, data) {
			t.Fatalf("Get(%q) returned other bytes than were put", key)
		}
		sinfo, err := b.Stat(ctx, key)
		if err != nil {
			t.Fatalf("Stat(%q): %v", key, err)
		}
		for what, in := range map[string]objstore.ObjectInfo{"Get": ginfo, "Stat": sinfo} {
			if in.Key != key || in.Size != info.Size || in.ETag != info.ETag {
				t.Fatalf("%s(%q) info = %+v; want the key, size and ETag of Put %+v", what, key, in, info)
			}
			// Stores keep their own clocks (S3 second resolution, a
			// server's time): allow for both.
			if in.ModTime.Before(start.Add(-time.Hour)) || in.ModTime.After(time.Now().Add(time.Hour)) {
				t.Fatalf("%s(%q) ModTime = %v; want about %v", what, key, in.ModTime, start)
			}
		}
		// Neither the caller's buffer nor the returned one is the stored
		// object.
		want := bytes.Clone(data)
		data[0]++
		got[1]++
		wantContent(t, ctx, b, key, want)
	}
}

func testEmptyObject(t *testing.T, ctx context.Context, b objstore.Bucket) {
	info := mustPut(t, ctx, b, "empty/put", nil)
	if info.Size != 0 {
		t.Fatalf("Put of nothing: Size = %d", info.Size)
	}
	wantContent(t, ctx, b, "empty/put", nil)
	r, err := b.Open(ctx, "empty/put")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	if r.Size() != 0 {
		t.Fatalf("Size() = %d, want 0", r.Size())
	}
	n, err := r.ReadAt(ctx, make([]byte, 1), 0)
	if n != 0 || err != io.EOF {
		t.Fatalf("ReadAt(1 byte, 0) of an empty object = %d, %v; want 0, io.EOF", n, err)
	}
}

func testRewriteChangesETag(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const key = "rewrite/obj"
	seen := map[string]bool{}
	var last []byte
	for i := range 4 {
		// Same size every time, so only the content tells them apart.
		last = payload(uint64(100+i), 4096)
		var etag string
		if i%2 == 0 {
			etag = mustPut(t, ctx, b, key, last).ETag
		} else {
			w, err := b.Create(ctx, key)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if _, err := w.Write(last); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			info, err := b.Stat(ctx, key)
			if err != nil {
				t.Fatalf("Stat: %v", err)
			}
			etag = info.ETag
		}
		if seen[etag] {
			t.Fatalf("write %d of other content got ETag %q again", i, etag)
		}
		seen[etag] = true
		wantContent(t, ctx, b, key, last)
	}
}

func testDelete(t *testing.T, ctx context.Context, b objstore.Bucket) {
	mustPut(t, ctx, b, "del/x", []byte("x"))
	mustPut(t, ctx, b, "del/y", []byte("y"))
	mustPut(t, ctx, b, "del/deep/z", []byte("z"))
	for _, key := range []string{"del/x", "del/deep/z"} {
		if err := b.Delete(ctx, key); err != nil {
			t.Fatalf("Delete(%q): %v", key, err)
		}
		wantMissing(t, ctx, b, key)
	}
	wantContent(t, ctx, b, "del/y", []byte("y"))
	for _, key := range []string{"del/x", "never/was/there", "del"} {
		if err := b.Delete(ctx, key); err != nil {
			t.Fatalf("Delete(%q) of a missing object: %v; want nil", key, err)
		}
	}
	if got := keys(t, ctx, b, ""); len(got) != 1 || got[0] != "del/y" {
		t.Fatalf("after deletes, List = %q; want [del/y]", got)
	}
	// A deleted key can be written again, also where its directory went.
	mustPut(t, ctx, b, "del/deep/z", []byte("z2"))
	wantContent(t, ctx, b, "del/deep/z", []byte("z2"))
}

func testNotFound(t *testing.T, ctx context.Context, b objstore.Bucket) {
	wantMissing(t, ctx, b, "missing/key")
	// A key that is only a prefix of another object's key is no object.
	mustPut(t, ctx, b, "parent/child", []byte("c"))
	wantMissing(t, ctx, b, "parent")
	wantMissing(t, ctx, b, "parent/child/grandchild")
}

func testInvalidKeys(t *testing.T, ctx context.Context, b objstore.Bucket) {
	bad := []string{"", "/a", "a/", "a//b", "a/../b", "..", ".", "a/./b", "../escape", "a\x00b"}
	for _, key := range bad {
		if _, err := b.Put(ctx, key, []byte("x"), objstore.WriteOptions{}); err == nil {
			t.Errorf("Put(%q) = nil error; want the key refused", key)
		}
		if w, err := b.Create(ctx, key); err == nil {
			w.Abort()
			t.Errorf("Create(%q) = nil error; want the key refused", key)
		}
		if _, _, err := b.Get(ctx, key); err == nil {
			t.Errorf("Get(%q) = nil error; want the key refused", key)
		}
		if err := b.Delete(ctx, key); err == nil {
			t.Errorf("Delete(%q) = nil error; want the key refused", key)
		}
	}
	if got := keys(t, ctx, b, ""); len(got) != 0 {
		t.Fatalf("after refused writes, List = %q; want nothing", got)
	}
}

func testIfAbsent(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const key = "cond/absent"
	first := []byte("first")
	info, err := b.Put(ctx, key, first, objstore.WriteOptions{IfAbsent: true})
	if err != nil {
		t.Fatalf("Put IfAbsent of a new key: %v", err)
	}
	_, err = b.Put(ctx, key, []byte("second"), objstore.WriteOptions{IfAbsent: true})
	wantErrIs(t, "Put IfAbsent of an existing key", err, objstore.ErrPreconditionFailed)
	wantContent(t, ctx, b, key, first)
	if s, _ := b.Stat(ctx, key); s.ETag != info.ETag {
		t.Fatalf("a failed Put changed the ETag from %q to %q", info.ETag, s.ETag)
	}
	if err := b.Delete(ctx, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := b.Put(ctx, key, []byte("third"), objstore.WriteOptions{IfAbsent: true}); err != nil {
		t.Fatalf("Put IfAbsent after Delete: %v", err)
	}
	wantContent(t, ctx, b, key, []byte("third"))
}

func testIfMatch(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const key = "cond/match"
	v1 := mustPut(t, ctx, b, key, []byte("v1"))
	v2, err := b.Put(ctx, key, []byte("v2"), objstore.WriteOptions{IfMatch: v1.ETag})
	if err != nil {
		t.Fatalf("Put IfMatch the current ETag: %v", err)
	}
	if v2.ETag == "" || v2.ETag == v1.ETag {
		t.Fatalf("Put IfMatch returned ETag %q after %q; want a new one", v2.ETag, v1.ETag)
	}
	_, err = b.Put(ctx, key, []byte("v3"), objstore.WriteOptions{IfMatch: v1.ETag})
	wantErrIs(t, "Put IfMatch a stale ETag", err, objstore.ErrPreconditionFailed)
	_, err = b.Put(ctx, key, []byte("v3"), objstore.WriteOptions{IfMatch: "not-an-etag-of-this-store"})
	wantErrIs(t, "Put IfMatch a made-up ETag", err, objstore.ErrPreconditionFailed)
	wantContent(t, ctx, b, key, []byte("v2"))

	_, err = b.Put(ctx, "cond/missing", []byte("x"), objstore.WriteOptions{IfMatch: v2.ETag})
	wantErrIs(t, "Put IfMatch on a missing key", err, objstore.ErrPreconditionFailed)
	wantMissing(t, ctx, b, "cond/missing")

	if err := b.Delete(ctx, key); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err = b.Put(ctx, key, []byte("v4"), objstore.WriteOptions{IfMatch: v2.ETag})
	wantErrIs(t, "Put IfMatch on a deleted key", err, objstore.ErrPreconditionFailed)
	wantMissing(t, ctx, b, key)
}

// testConcurrentIfMatch runs a compare-and-swap counter from several
// goroutines, as rival leaders would update a manifest head: each reads the
// counter and writes it plus one if its ETag still holds. Exactly one
// writer may win per version, so the counter ends at the number of
// increments and every value is written exactly once; a store that let two
// writers win on one version would lose an increment and write a value
// twice.
func testConcurrentIfMatch(t *testing.T, ctx context.Context, b objstore.Bucket) {
	const (
		key     = "cond/counter"
		writers = 8
		each    = 4 // increments per writer
		total   = writers * each
		// Every lost round is won by another writer, so a writer loses at
		// most total-each times; twice that allows for stores that also
		// fail a write that merely raced (S3's 409).
		maxTries = 2 * total
	)
	mustPut(t, ctx, b, key, []byte("0"))
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		wrote []int
		start = make(chan struct{})
	)
	for w := range writers {
		wg.Go(func() {
			<-start
			wins := 0
			for try := 0; wins < each; try++ {
				if try == maxTries {
					t.Errorf("writer %d: %d wins in %d tries", w, wins, maxTries)
					return
				}
				data, info, err := b.Get(ctx, key)
				if err != nil {
					t.Errorf("writer %d: Get: %v", w, err)
					return
				}
				n, err := strconv.Atoi(string(data))
				if err != nil {
					t.Errorf("writer %d: counter %q: %v", w, data, err)
					return
				}
				// Let the others read the same version before this
				// writer swaps it.
				runtime.Gosched()
				_, err = b.Put(ctx, key, []byte(strconv.Itoa(n+1)), objstore.WriteOptions{IfMatch: info.ETag})
				if errors.Is(err, objstore.ErrPreconditionFailed) {
					continue
				}
				if err != nil {
					t.Errorf("writer %d: Put IfMatch: %v", w, err)
					return
				}
				wins++
				mu.Lock()
				wrote = append(wrote, n+1)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	wantContent(t, ctx, b, key, []byte(strconv.Itoa(total)))
	slices.Sort(wrote)
	for i, v := range wrote {
		if v != i+1 {
			t.Fatalf("values written by the winners = %v; want each of 1..%d once", wrote, total)
		}
	}
}
