// Package compact rewrites the batches of a compacted topic's log, keeping
// the last record of every key: the log cleaner's work, without its I/O.
// It knows batches (package record), not files; the hot tier (hotlog) and
// the broker's cleaner feed it segments and write what it returns.
//
// A cleaning covers a log's cleanable prefix: the batches below the first
// one that is too young (min.compaction.lag.ms) or not yet sealed, which
// the caller chooses. Within it lies a dirty range, from the first offset
// no earlier cleaning covered. A pass:
//
//  1. builds a KeyMap, key -> highest offset, over the dirty range, batch by
//     batch until the map's memory budget would be exceeded; the map covers
//     [dirty start, map end), and map end becomes the next pass's dirty start;
//  2. filters every batch below map end (the clean ones before the dirty
//     range too, since a newer record may supersede them) with Kafka's
//     rules: a record is kept when its key is not in the map or its offset
//     is the key's highest; a record without a key is dropped; a tombstone
//     (null value) is dropped once it lies below the tombstone horizon: the
//     offsets a cleaning first covered at least delete.retention.ms ago.
//     Batches at or past map end are left as they are.
//
// A batch that keeps every record is returned as it was, byte for byte. One
// that keeps some is re-encoded with its codec: same base offset, same
// lastOffsetDelta (the offsets of the dropped records become gaps), same
// leader epoch, producer id, epoch and base sequence, timestamp type, and a
// new CRC. One that keeps none is dropped, unless it is the last batch of
// its producer in the log: then its header stays, empty, so the producer's
// last sequence survives and a retried send is still seen as a duplicate
// (Kafka's log cleaner does the same, BatchRetention.RETAIN_EMPTY).
// Where Kafka leaves the dropped batches' offsets as a gap between batches,
// Filter.Rewrite puts one empty filler batch over each run of them, so
// every offset of a cleaned log still lies in exactly one batch (see
// Rewrite for why).
// Transactional and control batches are copied unchanged and their keys are
// not mapped: Strata has no transactions, and their rules are not these.
//
// A KeyMap holds whole keys, never hashes, so no collision can drop a live
// record; its budget counts each key's bytes plus a fixed overhead.
package compact
