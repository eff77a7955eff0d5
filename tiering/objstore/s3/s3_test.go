package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/strata-log/strata/tiering/objstore"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
	"github.com/strata-log/strata/tiering/objstore/objstoretest"
	"github.com/strata-log/strata/tiering/objstore/s3"
)

// newBucket returns an s3 Bucket over a fresh bucket on srv.
func newBucket(t *testing.T, srv *miniotest.Server) (objstore.Bucket, s3.Config) {
	t.Helper()
	cfg := srv.S3Config()
	cfg.Bucket = srv.MakeBucket(t)
	b, err := s3.New(t.Context(), cfg)
	if err != nil {
		t.Fatalf("s3.New: %v", err)
	}
	return b, cfg
}

func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 42))
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}

// TestSuite runs the acceptance suite against a real MinIO, one bucket per
// case.
func TestSuite(t *testing.T) {
	srv := miniotest.Start(t)
	objstoretest.Run(t, func(t *testing.T) objstore.Bucket {
		b, _ := newBucket(t, srv)
		return b
	})
}

// TestStoredBytes checks through minio-go, not through the code under
// test, that what the s3 Bucket writes is what is stored: the bytes, the
// size and the ETag, for a single PUT and for both kinds of streamed write.
// A multipart upload shows in the ETag: S3 gives it the "-<parts>" suffix.
func TestStoredBytes(t *testing.T) {
	srv := miniotest.Start(t)
	b, cfg := newBucket(t, srv)
	ctx := t.Context()
	multipart := regexp.MustCompile(`^[0-9a-f]{32}-(\d+)$`)
	for _, c := range []struct {
		key       string
		size      int
		create    bool
		wantParts string // "" for a single PUT
	}{
		{"put/small", 1000, false, ""},
		{"create/under-one-part", s3.DefaultPartSize - 1, true, ""},
		{"create/one-part-exactly", s3.DefaultPartSize, true, ""},
		{"create/one-byte-over", s3.DefaultPartSize + 1, true, "2"},
		{"create/three-parts", 2*s3.DefaultPartSize + 5, true, "3"},
	} {
		data := payload(uint64(c.size), c.size)
		if c.create {
			w, err := b.Create(ctx, c.key)
			if err != nil {
				t.Fatal(err)
			}
			for off := 0; off < len(data); off += 999_983 {
				if _, err := w.Write(data[off:min(off+999_983, len(data))]); err != nil {
					t.Fatalf("%s: Write: %v", c.key, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatalf("%s: Close: %v", c.key, err)
			}
		} else if _, err := b.Put(ctx, c.key, data, objstore.WriteOptions{}); err != nil {
			t.Fatal(err)
		}

		obj, err := srv.Client.GetObject(ctx, cfg.Bucket, c.key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := io.ReadAll(obj)
		obj.Close()
		if err != nil {
			t.Fatalf("%s: minio-go read: %v", c.key, err)
		}
		if !bytes.Equal(stored, data) {
			t.Fatalf("%s: minio-go reads %d bytes that differ from the %d written", c.key, len(stored), len(data))
		}
		st, err := srv.Client.StatObject(ctx, cfg.Bucket, c.key, minio.StatObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		info, err := b.Stat(ctx, c.key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size != int64(c.size) || info.Size != st.Size || info.ETag != st.ETag {
			t.Fatalf("%s: minio-go sees size %d ETag %q; the Bucket says size %d ETag %q", c.key, st.Size, st.ETag, info.Size, info.ETag)
		}
		m := multipart.FindStringSubmatch(st.ETag)
		switch {
		case c.wantParts == "" && m != nil:
			t.Errorf("%s: ETag %q is a multipart upload's; want a single PUT", c.key, st.ETag)
		case c.wantParts != "" && (m == nil || m[1] != c.wantParts):
			t.Errorf("%s: ETag %q; want a multipart upload of %s parts", c.key, st.ETag, c.wantParts)
		}
		t.Logf("%s: %d bytes, ETag %s", c.key, st.Size, st.ETag)
	}
}

// TestAbortLeavesNoUpload: an aborted or failed multipart write leaves no
// incomplete upload behind (they are invisible to List but billed).
func TestAbortLeavesNoUpload(t *testing.T) {
	srv := miniotest.Start(t)
	b, cfg := newBucket(t, srv)
	ctx := t.Context()
	uploads := func() []string {
		var ids []string
		for u := range srv.Client.ListIncompleteUploads(ctx, cfg.Bucket, "", true) {
			if u.Err != nil {
				t.Fatal(u.Err)
			}
			ids = append(ids, u.Key+" "+u.UploadID)
		}
		return ids
	}
	data := payload(1, s3.DefaultPartSize+1)

	w, err := b.Create(ctx, "aborted")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if got := uploads(); len(got) != 1 {
		t.Fatalf("after one part, incomplete uploads = %q; want the one in progress", got)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if got := uploads(); len(got) != 0 {
		t.Fatalf("after Abort, incomplete uploads = %q; want none", got)
	}

	// A write whose context ends is aborted as well, though that context
	// can no longer carry the abort.
	wctx, cancel := context.WithCancel(ctx)
	w, err = b.Create(wctx, "cancelled")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := w.Close(); !errors.Is(err, objstore.ErrAborted) {
		t.Fatalf("Close after the context ended: %v; want ErrAborted", err)
	}
	if got := uploads(); len(got) != 0 {
		t.Fatalf("after a cancelled write, incomplete uploads = %q; want none", got)
	}
}

// TestReadAtPinsVersion: a reader keeps to the version it opened; once the
// object is replaced, ReadAt refuses instead of mixing versions.
func TestReadAtPinsVersion(t *testing.T) {
	srv := miniotest.Start(t)
	b, _ := newBucket(t, srv)
	ctx := t.Context()
	if _, err := b.Put(ctx, "k", []byte("version one"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := b.Open(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := b.Put(ctx, "k", []byte("version two"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n, err := r.ReadAt(ctx, make([]byte, 4), 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ReadAt of a replaced object = %d, %v; want ErrNotFound", n, err)
	}
}

// TestStoreDown: with the server stopped, calls fail (not as "not found")
// within their context's deadline; after a restart on the same data, the
// objects are all there.
func TestStoreDown(t *testing.T) {
	srv := miniotest.Start(t)
	b, err := s3.New(t.Context(), srv.S3Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := b.Put(ctx, "kept", []byte("kept"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err = b.Stat(dctx, "kept")
	if err == nil || errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Stat with the store down: %v; want a failure that is not ErrNotFound", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Stat with the store down took %v, past its 2s deadline", took)
	}
	if !strings.HasPrefix(err.Error(), "s3: stat ") {
		t.Errorf("error %q does not say where it came from", err)
	}
	srv.Restart()
	data, _, err := b.Get(ctx, "kept")
	if err != nil || string(data) != "kept" {
		t.Fatalf("Get after restart = %q, %v", data, err)
	}
}

// TestConfig: settings that cannot work are refused before any request.
func TestConfig(t *testing.T) {
	for _, c := range []struct {
		cfg  s3.Config
		want string
	}{
		{s3.Config{}, "Bucket is required"},
		{s3.Config{Bucket: "b", AccessKey: "a"}, "AccessKey and SecretKey go together"},
		{s3.Config{Bucket: "b", PartSize: 1 << 20}, "below S3's minimum part"},
	} {
		_, err := s3.New(t.Context(), c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "s3: ") {
			t.Errorf("New(%+v) = %v; want an error saying %q", c.cfg, err, c.want)
		}
	}
}

func TestEnsureBucket(t *testing.T) {
	srv := miniotest.Start(t)
	cfg := srv.S3Config()
	cfg.Bucket = "made-by-ensure"
	b, err := s3.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if created, err := s3.EnsureBucket(t.Context(), b); err != nil || !created {
		t.Fatalf("first EnsureBucket: created %v, %v", created, err)
	}
	if ok, err := srv.Client.BucketExists(t.Context(), "made-by-ensure"); err != nil || !ok {
		t.Fatalf("the bucket is not there: %v %v", ok, err)
	}
	if created, err := s3.EnsureBucket(t.Context(), b); err != nil || created {
		t.Fatalf("second EnsureBucket: created %v, %v", created, err)
	}
	if _, err := b.Put(t.Context(), "k", []byte("v"), objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestOpenSized: an object opened with the size its caller knows reads as
// one opened with Open, and the open itself asks the store nothing: one
// that is gone opens, and its first ReadAt says ErrNotFound.
func TestOpenSized(t *testing.T) {
	srv := miniotest.Start(t)
	b, _ := newBucket(t, srv)
	ctx := t.Context()
	data := payload(7, 100_000)
	if _, err := b.Put(ctx, "seg", data, objstore.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	r, err := objstore.OpenSized(ctx, b, "seg", int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5000)
	if _, err := r.ReadAt(ctx, got, 90_000); err != nil || !bytes.Equal(got, data[90_000:95_000]) {
		t.Fatalf("ReadAt: %v, or the bytes differ", err)
	}
	if n, err := r.ReadAt(ctx, make([]byte, 10), int64(len(data))-4); n != 4 || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("ReadAt past the end = %d, %v; want 4, io.ErrUnexpectedEOF", n, err)
	}
	gone, err := objstore.OpenSized(ctx, b, "gone", 10)
	if err != nil {
		t.Fatalf("OpenSized sent a request: %v", err)
	}
	if _, err := gone.ReadAt(ctx, make([]byte, 10), 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("ReadAt of a missing object: %v, want ErrNotFound", err)
	}
	if _, err := objstore.OpenSized(ctx, b, "bad//key", 10); err == nil {
		t.Fatal("OpenSized took an invalid key")
	}
}
