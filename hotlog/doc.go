// Package hotlog is the local, append-only, segmented log of one partition: the
// hot tier of Strata.
//
// A log is a directory of segments. Each segment is one file of consecutive
// record batches named by its 20-digit base offset (00000000000000000000.log)
// with two sparse, fixed-width indexes beside it:
//
//	<base>.log        batches, exactly as produced (record.Batch, Kafka v2 layout)
//	<base>.index      entries of (relative offset uint32, file position uint32)
//	<base>.timeindex  entries of (max timestamp so far int64, relative offset uint32)
//
// Both indexes get an entry at the same batches: the first batch of a segment and
// then the first batch after every IndexIntervalBytes of log. The time index holds
// the largest timestamp of all batches up to and including the indexed one, so
// its values never decrease and a binary search finds where a timestamp lookup can
// start. Indexes are hints: they are checked against the log on open and rebuilt
// from it when they do not agree. The active segment's entries reach its index
// files 32 at a time (flush.go: indexLag), a sealed segment's whole, fsynced.
//
// The last segment is active and takes appends; the others are sealed and
// immutable until retention removes them. A roll does not fsync on the append
// path: the flusher fsyncs the sealed segment in the background, and only then
// does it count as sealed to the outside (SegmentInfo.Sealed: uploadable,
// deletable) and do offsets past it count as durable. Beside the segments live two
// checkpoints, each written to a temporary file, fsynced, renamed and followed by
// a directory fsync: state.checkpoint (log start offset and high watermark) and
// leader-epoch.checkpoint (leader epoch -> first offset of that epoch).
//
// Durability follows the flush policy: FlushAlways (the default) returns from an
// append only after its bytes are fsynced, and concurrent appenders share one
// fsync done by one flusher goroutine (group commit); FlushInterval fsyncs every
// FlushInterval; FlushNever leaves it to the OS. A segment is always fsynced
// soon after it is sealed. After a failed write or fsync the log refuses every
// later append. Logs sharing a FileCache with a SyncGroup (a broker's) may have
// an fsync answered by one syncfs of their file system, when many run at once
// (syncgroup.go).
//
// On open every segment holding offsets past the checkpointed recovery point
// (the active one, and any a roll sealed that a crash caught before its fsync)
// is scanned from its last index entry that agrees with the log; everything
// after the last valid batch (a torn or corrupt tail) is truncated, with the
// segments after it, and the report says what was cut. Damage below the
// recovery point is reported, never cut.
//
// Sealed segments of a compacted topic are rewritten by the log cleaner
// through RewriteSegments: the new files are staged as .cleaned files and
// swapped in by a committed marker (cleaner.swap), so that a crash at any
// step leaves the old segments or the new ones; open finishes or discards
// an interrupted swap before anything else. See rewrite.go.
//
// File descriptors: a segment's log file is opened on demand through a
// FileCache, shared by every log of a broker, that closes the least
// recently used once more than its bound are open; only files no read,
// write or fsync holds and whose every write is fsynced are closed, so an
// idle log holds none, and a read after an eviction reopens its file. Index
// files, checkpoints and side files are open only while they are written.
// See filecache.go.
//
// Lock order: Log.appendMu, Log.stateMu, Log.syncMu, Log.mu; the list of
// segments awaiting their fsync has its own lock, taken last; the FileCache
// lock is a leaf below all of them, held for no I/O. Readers take only
// Log.mu (shared), so appends, which touch only bytes past what readers can see,
// do not stop them.
package hotlog
