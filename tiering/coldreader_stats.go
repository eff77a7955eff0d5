package tiering

import "sync/atomic"

// ReaderStats counts what a ColdReader did since it was created, and what
// its caches hold now.
type ReaderStats struct {
	// ChunkHits and ChunkMisses count the chunk lookups of reads (read-ahead
	// not included): served from memory, or waited for a GET.
	ChunkHits   uint64
	ChunkMisses uint64
	// Gets is every request for object bytes sent to the store: ranged
	// reads of chunks and of segment trailers and footers, and whole-object
	// reads of manifest heads and parts.
	Gets uint64
	// ChunkGets are the ranged reads of chunks, read-ahead included;
	// BytesFetched the log bytes fetched, by them and by whole reads of
	// objects no larger than a chunk.
	ChunkGets    uint64
	BytesFetched uint64
	// ReadAheadChunks are the chunk GETs issued by read-ahead.
	ReadAheadChunks uint64
	// SharedGets counts lookups (of chunks, footers and manifests) that
	// joined a GET already in flight instead of sending their own.
	SharedGets uint64
	// IndexGets are the reads of segment trailers and footers (whole
	// objects, when no larger than a chunk);
	// ManifestGets the reads of manifest heads and parts.
	IndexGets    uint64
	ManifestGets uint64
	// FootersCached and PartsCached are how many segment footers (with
	// their open object handles) and closed manifest parts are held now.
	FootersCached int
	PartsCached   int
	// CachedBytes is what the chunk cache holds now, within CacheBytes.
	CachedBytes int64
	// ArenaReused counts chunk buffers recycled from the arena;
	// ArenaHeapBuffers those taken from the heap instead, because every
	// buffer the arena may hold was in use (by the cache, GETs in flight
	// and responses not yet sent) or the chunk was larger than it keeps.
	// ArenaBytes is what the arena holds now, in use and free.
	ArenaReused      uint64
	ArenaHeapBuffers uint64
	ArenaBytes       int64
}

// readerCounters are the running counts behind ReaderStats.
type readerCounters struct {
	chunkHits, chunkMisses      atomic.Uint64
	chunkGets, bytesFetched     atomic.Uint64
	readAheadChunks, sharedGets atomic.Uint64
	indexGets, manifestGets     atomic.Uint64
	// checkedBytes counts the log bytes of batches whose bytes were
	// checked (CRC and all): each once when its chunk comes in, and any a
	// read had to check itself.
	checkedBytes atomic.Uint64
}
