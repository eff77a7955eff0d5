package tiering

import (
	"fmt"
	"time"
)

// ReaderConfig tunes a ColdReader. A zero field takes its default (see
// DefaultReaderConfig).
type ReaderConfig struct {
	// ChunkBytes is the size of a ranged GET of segment log bytes and of a
	// cache entry: chunk i of an object is [i*ChunkBytes, (i+1)*ChunkBytes)
	// of its log bytes. Default 4 MiB.
	ChunkBytes int64
	// CacheBytes bounds the bytes of chunks held in memory. Default 256 MiB.
	CacheBytes int64
	// ReadAhead is how many chunks a sequential reader has fetched ahead of
	// it in the background. Default 4: on loopback MinIO that is what keeps a
	// cold replay as fast as one from the cache; a negative value turns
	// read-ahead off.
	ReadAhead int
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
	// readerPrefetches bounds concurrent read-ahead GETs; read-ahead that
	// finds them all busy is skipped, not queued.
	readerPrefetches = 4
	// maxChunkBytes keeps a chunk a sensible size for one GET and one
	// allocation.
	maxChunkBytes = 1 << 30
)

// DefaultReaderConfig returns the defaults.
func DefaultReaderConfig() ReaderConfig {
	return ReaderConfig{
		ChunkBytes: 4 << 20,
		CacheBytes: 256 << 20,
		ReadAhead:  4,
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
	case c.HeadTTL < 0:
		return fmt.Errorf("tiering: reader head TTL %v is negative", c.HeadTTL)
	}
	return nil
}
