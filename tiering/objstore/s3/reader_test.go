package s3_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

// fakeStore serves one object, "b/k", the way a misbehaving store or a
// broken connection would: each range GET declares the whole range but
// sends at most maxBody bytes, then the connection drops. hang makes GETs
// wait until the client gives up.
type fakeStore struct {
	data    []byte
	maxBody int
	hang    bool
	gets    atomic.Int64
	// wrongChecksum sends a CRC32 checksum header that matches no body.
	wrongChecksum bool
	// checksumAsked counts GETs that asked for the object's checksum.
	checksumAsked atomic.Int64
}

func (f *fakeStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/b/k" {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("ETag", `"fake-etag"`)
	w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Length", strconv.Itoa(len(f.data)))
		return
	}
	f.gets.Add(1)
	if r.Header.Get("X-Amz-Checksum-Mode") != "" {
		f.checksumAsked.Add(1)
	}
	if f.hang {
		<-r.Context().Done()
		return
	}
	var first, last int
	if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &first, &last); err != nil {
		http.Error(w, "want a range", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(last-first+1))
	w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, len(f.data)))
	if f.wrongChecksum {
		w.Header().Set("X-Amz-Checksum-Crc32", "AAAAAA==")
	}
	w.WriteHeader(http.StatusPartialContent)
	// Fewer bytes than declared: the server closes the connection and the
	// client sees the body end early.
	w.Write(f.data[first:min(last+1, first+f.maxBody)])
}

func fakeBucket(t *testing.T, f *fakeStore) objstore.Bucket {
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	b, err := s3.New(t.Context(), s3.Config{
		Endpoint: srv.URL, Bucket: "b", PathStyle: true, AccessKey: "a", SecretKey: "s",
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadAtShortBodies: ReadAt asks again for the rest of a range whose
// body ended early, and fills p completely.
func TestReadAtShortBodies(t *testing.T) {
	f := &fakeStore{data: []byte(strings.Repeat("0123456789", 10)), maxBody: 7}
	b := fakeBucket(t, f)
	r, err := b.Open(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 50)
	n, err := r.ReadAt(t.Context(), p, 3)
	if n != 50 || err != nil || !bytes.Equal(p, f.data[3:53]) {
		t.Fatalf("ReadAt = %d, %v, %q; want 50, nil, %q", n, err, p[:n], f.data[3:53])
	}
	if got := f.gets.Load(); got < 50/7 {
		t.Fatalf("%d GETs for 50 bytes sent 7 at a time; the short bodies were not retried", got)
	}
}

// TestReadAtAsksNoChecksum: range GETs do not ask the store for the
// object's checksum, nor does the SDK check one the store sends anyway (here
// a wrong one, on a read of the whole object): Strata's own CRCs cover
// every byte it reads, and a second pass would double the cost of reading
// small objects whole.
func TestReadAtAsksNoChecksum(t *testing.T) {
	f := &fakeStore{data: []byte(strings.Repeat("0123456789", 10)), maxBody: 100, wrongChecksum: true}
	b := fakeBucket(t, f)
	r, err := b.(objstore.SizedOpener).OpenSized(t.Context(), "k", int64(len(f.data)))
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, len(f.data))
	if n, err := r.ReadAt(t.Context(), p, 0); n != len(p) || err != nil || !bytes.Equal(p, f.data) {
		t.Fatalf("ReadAt = %d, %v; want %d, nil and the object", n, err, len(p))
	}
	if got := f.checksumAsked.Load(); got != 0 {
		t.Fatalf("%d of %d GETs asked for the checksum", got, f.gets.Load())
	}
}

// TestReadAtStalls: a store that keeps sending nothing fails the read
// after a few tries instead of looping.
func TestReadAtStalls(t *testing.T) {
	f := &fakeStore{data: make([]byte, 100), maxBody: 0}
	b := fakeBucket(t, f)
	r, err := b.Open(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	n, err := r.ReadAt(t.Context(), make([]byte, 10), 0)
	if err == nil || n != 0 {
		t.Fatalf("ReadAt from a store that sends nothing = %d, %v; want an error", n, err)
	}
	if got := f.gets.Load(); got > 10 {
		t.Fatalf("%d GETs before giving up", got)
	}
}

// TestReadAtDeadline: a read from a store that does not answer returns
// when its context ends, not when the connection times out.
func TestReadAtDeadline(t *testing.T) {
	f := &fakeStore{data: make([]byte, 100), hang: true}
	b := fakeBucket(t, f)
	r, err := b.Open(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = r.ReadAt(ctx, make([]byte, 10), 0)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("ReadAt past its deadline: %v; want context.DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("ReadAt returned %v after its 200ms deadline", took)
	}
}
