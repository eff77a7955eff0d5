package objstoretest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/strata-log/strata/tiering/objstore"
)

// listCases: listing in key order under a prefix.
var listCases = []testCase{
	{"List", testList},
	{"ListStops", testListStops},
}

func testList(t *testing.T, ctx context.Context, b objstore.Bucket) {
	// Keys that share prefixes and whose order differs from a directory
	// walk's: '-' and '.' sort before '/', so "a-x" and "a.b" come before
	// everything under "a/", and "a/10" between "a/1" and "a/2".
	all := []string{"a-x", "a.b", "a/1", "a/10", "a/2", "ab", "b/c/d", "b/c/e", "b/cd", "c"}
	infos := map[string]objstore.ObjectInfo{}
	for i, key := range slices.Backward(all) {
		infos[key] = mustPut(t, ctx, b, key, payload(uint64(i), 10+i))
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a", []string{"a-x", "a.b", "a/1", "a/10", "a/2", "ab"}},
		{"a/", []string{"a/1", "a/10", "a/2"}},
		{"a/1", []string{"a/1", "a/10"}},
		{"a/10", []string{"a/10"}},
		{"a/1/", nil},
		{"b/c", []string{"b/c/d", "b/c/e", "b/cd"}},
		{"b/c/", []string{"b/c/d", "b/c/e"}},
		{"b/c/d", []string{"b/c/d"}},
		{"zz", nil},
		{"a//", nil},
		{"../", nil},
	} {
		var got []string
		err := b.List(ctx, c.prefix, func(info objstore.ObjectInfo) error {
			got = append(got, info.Key)
			want := infos[info.Key]
			if info.Size != want.Size || info.ETag != want.ETag {
				t.Errorf("List(%q) gives %q size %d ETag %q; Put gave size %d ETag %q",
					c.prefix, info.Key, info.Size, info.ETag, want.Size, want.ETag)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("List(%q): %v", c.prefix, err)
		}
		if !slices.Equal(got, c.want) {
			t.Fatalf("List(%q) = %q; want %q", c.prefix, got, c.want)
		}
	}
}

func testListStops(t *testing.T, ctx context.Context, b objstore.Bucket) {
	for _, key := range []string{"s/1", "s/2", "s/3", "s/4"} {
		mustPut(t, ctx, b, key, []byte(key))
	}
	errStop := errors.New("stop here")
	var got []string
	err := b.List(ctx, "s/", func(info objstore.ObjectInfo) error {
		got = append(got, info.Key)
		if len(got) == 2 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		t.Fatalf("List whose callback fails = %v; want the callback's error", err)
	}
	if !slices.Equal(got, []string{"s/1", "s/2"}) {
		t.Fatalf("List went on after its callback failed: saw %q", got)
	}
}
