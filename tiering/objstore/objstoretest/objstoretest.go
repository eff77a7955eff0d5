// Package objstoretest is the acceptance suite every objstore.Bucket must
// pass: the promises of the interface written down as tests, run against
// memory, a local directory, S3 on a real MinIO and the wrappers, so that
// the cold tier can rely on any of them in the same way.
package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
)

// caseTimeout bounds each case, so that a store that hangs fails the case
// with a message instead of the whole test binary on its timeout.
const caseTimeout = 2 * time.Minute

// A case is one promise of the interface, checked on an empty bucket.
type testCase struct {
	name string
	run  func(t *testing.T, ctx context.Context, b objstore.Bucket)
}

// cases lists every case, in the order they run; each file of this package
// adds the cases of one part of the interface.
var cases = concat(writeCases, conditionCases, createCases, readCases, listCases, contextCases)

func concat(lists ...[]testCase) []testCase {
	var all []testCase
	for _, l := range lists {
		all = append(all, l...)
	}
	return all
}

// Run runs the suite as subtests of t. newBucket returns an empty bucket
// for each one and registers with t whatever cleanup it needs; it may call
// t.Fatal.
func Run(t *testing.T, newBucket func(t *testing.T) objstore.Bucket) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBucket(t)
			ctx, cancel := context.WithTimeout(t.Context(), caseTimeout)
			defer cancel()
			c.run(t, ctx, b)
		})
	}
}

// payload returns n bytes that depend on seed, so that every object in a
// case differs from the others and a misplaced range shows.
func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	p := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := i; j < n && j < i+8; j++ {
			p[j] = byte(v)
			v >>= 8
		}
	}
	return p
}

// mustPut stores data unconditionally and returns its info.
func mustPut(t *testing.T, ctx context.Context, b objstore.Bucket, key string, data []byte) objstore.ObjectInfo {
	t.Helper()
	info, err := b.Put(ctx, key, data, objstore.WriteOptions{})
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return info
}

// mustGet reads a whole object.
func mustGet(t *testing.T, ctx context.Context, b objstore.Bucket, key string) ([]byte, objstore.ObjectInfo) {
	t.Helper()
	data, info, err := b.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return data, info
}

// wantContent fails unless key holds exactly want.
func wantContent(t *testing.T, ctx context.Context, b objstore.Bucket, key string, want []byte) {
	t.Helper()
	got, info := mustGet(t, ctx, b, key)
	if !bytes.Equal(got, want) {
		t.Fatalf("Get(%q) = %d bytes %s, want %d bytes %s", key, len(got), short(got), len(want), short(want))
	}
	if info.Size != int64(len(want)) {
		t.Fatalf("Get(%q) info.Size = %d, want %d", key, info.Size, len(want))
	}
}

// wantMissing fails unless Stat, Get and Open of key all say ErrNotFound.
func wantMissing(t *testing.T, ctx context.Context, b objstore.Bucket, key string) {
	t.Helper()
	if info, err := b.Stat(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Stat(%q) = %+v, %v; want ErrNotFound", key, info, err)
	}
	if data, _, err := b.Get(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Get(%q) = %d bytes, %v; want ErrNotFound", key, len(data), err)
	}
	r, err := b.Open(ctx, key)
	if err == nil {
		r.Close()
	}
	if !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Open(%q) error = %v; want ErrNotFound", key, err)
	}
}

// wantErrIs fails unless err matches target.
func wantErrIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error = %v; want %v", what, err, target)
	}
}

// keys lists the keys under prefix.
func keys(t *testing.T, ctx context.Context, b objstore.Bucket, prefix string) []string {
	t.Helper()
	var ks []string
	err := b.List(ctx, prefix, func(info objstore.ObjectInfo) error {
		ks = append(ks, info.Key)
		return nil
	})
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return ks
}

// short renders the start of p for a failure message.
func short(p []byte) string {
	if len(p) > 8 {
		return fmt.Sprintf("%x...", p[:8])
	}
	return fmt.Sprintf("%x", p)
}
