package tiering

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

func TestChunkCacheServesFromMemory(t *testing.T) {
	var counters readerCounters
	c, err := newChunkCache(64<<10, 4<<10, &counters)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	ctx := context.Background()
	fetches := 0
	fetch := func(n byte) func(context.Context) (*chunk, error) {
		return func(context.Context) (*chunk, error) {
			fetches++
			return newChunk(nil, nil, false, bytes.Repeat([]byte{n}, 4<<10)), nil
		}
	}
	for i := range 3 {
		ch, err := c.get(ctx, chunkKey("obj", 1), false, fetch(1))
		if err != nil || ch.data[0] != 1 || fetches != 1 {
			t.Fatalf("get %d: %v, %d fetches", i, err, fetches)
		}
	}
	if counters.chunkHits.Load() != 2 || counters.chunkMisses.Load() != 1 {
		t.Fatalf("hits %d misses %d", counters.chunkHits.Load(), counters.chunkMisses.Load())
	}
	// Read-ahead lookups are not counted as hits or misses.
	if _, err := c.get(ctx, chunkKey("obj", 2), true, fetch(2)); err != nil || counters.chunkMisses.Load() != 1 {
		t.Fatalf("%v, misses %d", err, counters.chunkMisses.Load())
	}
	// Chunks of different objects or indexes never meet.
	if ch, _ := c.get(ctx, chunkKey("obj#1", 2), false, fetch(3)); ch.data[0] != 3 {
		t.Fatal("obj#1 chunk 2 served another chunk")
	}
	// The main region takes chunks asynchronously; once it has, a chunk
	// that left the window is still served.
	c.wait()
	c.mu.Lock()
	c.mu.window.clear()
	c.mu.Unlock()
	if ch, _ := c.get(ctx, chunkKey("obj", 1), false, fetch(9)); ch.data[0] != 1 || fetches != 3 {
		t.Fatalf("after the window emptied: chunk %d, %d fetches", ch.data[0], fetches)
	}
	// A dropped chunk is fetched again; a failed fetch caches nothing.
	c.drop(chunkKey("obj", 1))
	boom := errors.New("boom")
	if _, err := c.get(ctx, chunkKey("obj", 1), false, func(context.Context) (*chunk, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if c.has(chunkKey("obj", 1)) {
		t.Fatal("a failed fetch left a chunk")
	}
}

func TestChunkCacheBudget(t *testing.T) {
	for _, tc := range []struct {
		budget, chunk int64
		window, main  int64
	}{
		{256 << 20, 4 << 20, 64 << 20, 192 << 20},
		{3 * 4 << 10, 4 << 10, 4 << 10, 8 << 10}, // one chunk of window at least
		{4 << 10, 4 << 10, 4 << 10, 0},           // all window
		{1000, 4 << 10, 0, 1000},                 // no room for a whole chunk
	} {
		var counters readerCounters
		c, err := newChunkCache(tc.budget, tc.chunk, &counters)
		if err != nil {
			t.Fatal(err)
		}
		if w, m := c.mu.window.limit, c.main.MaxCost(); w != tc.window || m != tc.main {
			t.Errorf("budget %d, chunks %d: window %d main %d, want %d and %d", tc.budget, tc.chunk, w, m, tc.window, tc.main)
		}
		for i := range 20 {
			c.get(context.Background(), chunkKey("o", int64(i)), false, func(context.Context) (*chunk, error) {
				return newChunk(nil, nil, false, make([]byte, tc.chunk)), nil
			})
			c.wait()
			if n := c.bytes(); n > tc.budget {
				t.Errorf("budget %d: holds %d bytes", tc.budget, n)
			}
		}
		c.close()
	}
}
