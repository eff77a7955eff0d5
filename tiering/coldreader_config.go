package tiering

import (
	"context"
	"fmt"
	"time"
)

// ReaderConfig tunes a ColdReader. A zero field takes its default (see
// DefaultReaderConfig).
type ReaderConfig struct {
	// ChunkBytes is the size of a ranged GET of segment log bytes and of a
	// cache entry, give or take a batch: chunk i of an object starts in
	// [i*ChunkBytes, (i+1)*ChunkBytes) of its log bytes, at a batch when
	// the object's index names one there (see chunkStarts). Default 4 MiB.
	ChunkBytes int64
	// CacheBytes bounds the bytes of chunks held in memory. Default 256 MiB.
	CacheBytes int64
	// ReadAhead is how many chunks' worth of bytes (ReadAhead *
	// ChunkBytes) each sequential reader has fetched ahead of it in the
	// background, on into the segments that follow: ReadAhead chunks of
	// large segments, more objects of small ones. Default 8 (32 MiB at the
	// default chunk size); a negative value turns read-ahead off.
	ReadAhead int
	// MaxGets bounds the GETs of segment bytes (chunks, trailers and
	// footers) in flight at once, for reads and read-ahead together: the
	// cold tier's share of the network and of the store. Default 16.
	MaxGets int
	// Pace, if set, is called before each GET from p's cold tier (of a
	// chunk, a footer or a manifest head) with the bytes it will ask for (0
	// for a manifest head, whose size is not known before), and may hold it
	// back; an error ends the read that needed it. The broker's per-broker
	// and per-topic bytes/s and GETs/s limits are a Pace.
	Pace func(ctx context.Context, p PartitionRef, bytes int64) error
	// HeadTTL is how long a cached manifest head is trusted before a read
	// checks the store for a newer one. Reads past the cached end check at
	// once, and Invalidate drops a head. Default 2s.
	HeadTTL time.Duration
}

// Bounds of the reader's small caches, by count.
const (
	// readerParts: closed manifest parts, ~1000 segments each.
	readerParts = 1024
	// readerObjects: segment footers with their open handles. A footer has
	// an entry per 64 KiB of log: 32 KiB for a 128 MiB segment. The bound
	// is modest because a handle of the directory store is an open file.
	readerObjects = 256
	// readerPartitions: partitions whose head and read positions are kept.
	readerPartitions = 4096
	// readerPrefetches bounds the read-ahead goroutines (each fetches one
	// chunk, and its object's footer if need be), a safety bound over the
	// ReadAhead of every reader: read-ahead that finds them all busy is
	// skipped, not queued. MaxGets bounds the GETs they send.
	readerPrefetches = 256
	// maxChunkBytes keeps a chunk a sensible size for one GET and one
	// allocation.
	maxChunkBytes = 1 << 30
)

// DefaultReaderConfig returns the defaults.
func DefaultReaderConfig() ReaderConfig {
	return ReaderConfig{
		ChunkBytes: 4 << 20,
		CacheBytes: 256 << 20,
		ReadAhead:  8,
		MaxGets:    16,
		HeadTTL:    2 * time.Second,
	}
}

// withDefaults fills zero fields with their defaults.
func (c ReaderConfig) withDefaults() ReaderConfig {
	d := DefaultReaderConfig()
	if c.ChunkBytes == 0 {
		c.ChunkBytes = d.ChunkBytes
	}
	if c.CacheBytes == 0 {
		c.CacheBytes = d.CacheBytes
	}
	if c.ReadAhead == 0 {
		c.ReadAhead = d.ReadAhead
	}
	if c.MaxGets == 0 {
		c.MaxGets = d.MaxGets
	}
	if c.HeadTTL == 0 {
		c.HeadTTL = d.HeadTTL
	}
	return c
}

// Validate checks a configuration after defaults are applied.
func (c ReaderConfig) Validate() error {
	switch {
	case c.ChunkBytes <= 0 || c.ChunkBytes > maxChunkBytes:
		return fmt.Errorf("tiering: reader chunk size %d: want 1 to %d bytes", c.ChunkBytes, maxChunkBytes)
	case c.CacheBytes <= 0:
		return fmt.Errorf("tiering: reader cache size %d: want more than 0 bytes", c.CacheBytes)
	case c.MaxGets < 0:
		return fmt.Errorf("tiering: reader GETs in flight %d: want at least 1", c.MaxGets)
	case c.HeadTTL < 0:
		return fmt.Errorf("tiering: reader head TTL %v is negative", c.HeadTTL)
	}
	return nil
}
