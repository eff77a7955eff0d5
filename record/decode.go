package record

import (
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"sync"
)

// minRecordSize is the smallest encoded record: a length byte plus six
// one-byte fields (attributes, timestamp delta, offset delta, null key, null
// value, zero headers). It bounds preallocation by what the bytes can hold,
// never by the count field an attacker controls.
const minRecordSize = 7

// Records decodes every record of the batch, decompressing the records
// section when needed (bounded by MaxDecompressedSize). The batch is
// validated first (Validate), so any input is safe to pass.
//
// Key, Value and header values alias b when the batch is uncompressed, and a
// fresh buffer otherwise: copy them before reusing b's memory.
func (b Batch) Records() ([]Record, error) {
	return b.RecordsLimit(MaxDecompressedSize)
}

// RecordsLimit is Records with an explicit bound on the decompressed size
// of the records section; maxDecompressed <= 0 means MaxDecompressedSize.
func (b Batch) RecordsLimit(maxDecompressed int) ([]Record, error) {
	if err := b.Validate(); err != nil {
		return nil, err
	}
	d, err := b.newDecoder(nil, maxDecompressed)
	if err != nil {
		return nil, err
	}
	recs := make([]Record, 0, min(int(d.count), len(d.data)/minRecordSize+1))
	var hdrs []Header
	for d.index < d.count {
		var r Record
		if hdrs, err = d.next(&r, hdrs, true); err != nil {
			return nil, err
		}
		recs = append(recs, r)
	}
	if err := d.finish(); err != nil {
		return nil, err
	}
	return recs, nil
}

// All iterates over the records without building a slice:
//
//	for r, err := range batch.All() {
//		if err != nil { ... } // the last value yielded
//	}
//
// Aliasing is as for Records. On error the iteration yields one zero Record
// with the error and stops; the records yielded before it were well formed.
func (b Batch) All() iter.Seq2[Record, error] {
	return b.AllLimit(MaxDecompressedSize)
}

// AllLimit is All with an explicit bound on the decompressed size of the
// records section; maxDecompressed <= 0 means MaxDecompressedSize.
func (b Batch) AllLimit(maxDecompressed int) iter.Seq2[Record, error] {
	return func(yield func(Record, error) bool) {
		err := b.Validate()
		var d recordDecoder
		if err == nil {
			d, err = b.newDecoder(nil, maxDecompressed)
		}
		if err != nil {
			yield(Record{}, err)
			return
		}
		var hdrs []Header
		for d.index < d.count {
			var r Record
			if hdrs, err = d.next(&r, hdrs, true); err != nil {
				yield(Record{}, err)
				return
			}
			if !yield(r, nil) {
				return
			}
		}
		if err := d.finish(); err != nil {
			yield(Record{}, err)
		}
	}
}

// ValidateRecords is ValidateRecordsLimit with MaxDecompressedSize.
func (b Batch) ValidateRecords() error { return b.ValidateRecordsLimit(MaxDecompressedSize) }

// ValidateRecordsLimit is Validate plus a full decode of every record, the
// check a leader makes (Validate, then CheckRecords) before it assigns
// offsets to a producer's batch: the records section decompresses to at
// most maxDecompressed bytes (<= 0 means MaxDecompressedSize) without
// allocating much more than that; every varint and length is in range and
// within its record; offset deltas increase strictly and stay within
// lastOffsetDelta (a compacted batch has gaps; CheckRecordTimes, the
// produce path's check, wants them dense: exactly 0..n-1); header keys
// are not null; the count matches the records present and nothing trails
// the last one. It accepts exactly the batches that RecordsLimit with the
// same limit decodes.
//
// Timestamps are only required to decode (a varlong of at most 10 bytes):
// any int64 is a valid record timestamp, deltas may be negative (records
// batched out of time order) and the header's timestamps are not compared
// with the records'. Which timestamps a log accepts is its owner's policy:
// a leader reads them from the same pass with CheckRecordTimes and decides
// (Strata's broker refuses negative ones, ones outside the topic's bounds
// and a header that disagrees with its records).
//
// It builds no records; for an uncompressed batch it does not allocate,
// and decompression buffers are recycled.
func (b Batch) ValidateRecordsLimit(maxDecompressed int) error {
	if err := b.Validate(); err != nil {
		return err
	}
	_, err := b.checkRecordsPooled(maxDecompressed)
	return err
}

// CheckRecords is ValidateRecordsLimit for a batch that has just passed
// Validate, as a leader's produce path has: it checks the header's layout
// again (cheap, so any input is still safe) but not the CRC, which over a
// large batch costs as much as walking its records. On a batch whose CRC
// was not checked it proves nothing about the bytes' integrity.
func (b Batch) CheckRecords(maxDecompressed int) error {
	_, err := b.CheckRecordTimes(maxDecompressed)
	return err
}

// RecordTimes is what a check of a batch's records learns of their
// timestamps, as readers report them (for a LogAppendTime batch, the
// batch's maxTimestamp for every record).
type RecordTimes struct {
	// First is the first record's timestamp; Max the largest of all.
	First, Max int64
	// Min is the smallest timestamp other than NoTimestamp, or NoTimestamp
	// when no record has one: the bound a lower limit is held against.
	Min int64
	// Keyless counts the records whose key is null, learnt in the same
	// pass: a compacted topic's leader refuses them without decoding the
	// batch again.
	Keyless int
}

// CheckRecordTimes is CheckRecords that also returns the records'
// timestamps, gathered in the same pass: a leader that holds them against
// its bounds decodes a compressed batch once, not twice. The times are
// valid only when the error is nil.
//
// Unlike the other checks it accepts only a dense batch, as a producer
// sends: lastOffsetDelta+1 records with offset deltas exactly 0..n-1. Gaps
// are what compaction leaves in a stored log, never what a producer sends.
func (b Batch) CheckRecordTimes(maxDecompressed int) (RecordTimes, error) {
	if err := b.checkHeader(false); err != nil {
		return RecordTimes{}, err
	}
	if n, lod := b.NumRecords(), b.LastOffsetDelta(); n != lod+1 {
		return RecordTimes{}, corruptf(ErrBadCount, "%d records with lastOffsetDelta %d: a produced batch has no gaps", n, lod)
	}
	return b.checkRecordsPooled(maxDecompressed)
}

// checkRecordsPooled is checkRecords with a recycled decompression buffer:
// nothing escapes validation.
func (b Batch) checkRecordsPooled(maxDecompressed int) (RecordTimes, error) {
	if b.Compression() == CompressionNone {
		_, times, err := b.checkRecords(nil, maxDecompressed)
		return times, err
	}
	bufp, _ := scratchBuffers.Get().(*[]byte)
	if bufp == nil {
		bufp = new([]byte)
	}
	data, times, err := b.checkRecords(*bufp, maxDecompressed)
	if cap(data) > cap(*bufp) && cap(data) <= maxPooledScratch {
		*bufp = data[:0]
	}
	scratchBuffers.Put(bufp)
	return times, err
}

// checkRecords decodes every record of a validated batch without building
// them, noting their timestamps, and returns the decompressed section (for
// buffer reuse).
func (b Batch) checkRecords(buf []byte, limit int) ([]byte, RecordTimes, error) {
	d, err := b.newDecoder(buf, limit)
	if err != nil {
		return nil, RecordTimes{}, err
	}
	var r Record
	times := RecordTimes{Min: NoTimestamp}
	for d.index < d.count {
		if _, err := d.next(&r, nil, false); err != nil {
			return d.data, RecordTimes{}, err
		}
		ts := r.Timestamp
		if d.index == 1 {
			times.First, times.Max = ts, ts
		} else if ts > times.Max {
			times.Max = ts
		}
		if ts != NoTimestamp && (times.Min == NoTimestamp || ts < times.Min) {
			times.Min = ts
		}
		if r.Key == nil {
			times.Keyless++
		}
	}
	return d.data, times, d.finish()
}

// scratchBuffers recycles decompression buffers of checkRecordsPooled.
// Buffers over maxPooledScratch are left to the GC so one huge batch does
// not pin its memory forever.
var scratchBuffers sync.Pool // *[]byte

const maxPooledScratch = 4 << 20

// recordDecoder walks the records section of a validated batch.
type recordDecoder struct {
	data       []byte // the records section, decompressed
	pos        int
	index      int32 // the next record's position in the batch
	prevDelta  int32 // the offset delta of the record before, -1 at first
	lastDelta  int32 // the batch's lastOffsetDelta: no record goes past it
	count      int32
	baseOffset int64
	baseTime   int64
	appendTime int64 // the batch's maxTimestamp, for LogAppendTime batches
	logAppend  bool
	// keys remembers header keys already made into strings: records of a
	// batch tend to repeat the same few keys, and reusing the string saves
	// an allocation per header.
	keys []string
}

// maxCachedKeys bounds the key cache: a linear scan of a few strings is
// cheaper than an allocation; a batch with many distinct keys gains nothing.
const maxCachedKeys = 8

// headerKey returns k as a string, reusing an earlier identical one.
func (d *recordDecoder) headerKey(k []byte) string {
	for _, s := range d.keys {
		if s == string(k) { // compiles to a comparison, no allocation
			return s
		}
	}
	s := string(k)
	if len(d.keys) < maxCachedKeys {
		d.keys = append(d.keys, s)
	}
	return s
}

// newDecoder decompresses the records of a validated batch, into buf's
// memory when it fits (buf may be nil).
func (b Batch) newDecoder(buf []byte, limit int) (recordDecoder, error) {
	if limit <= 0 {
		limit = MaxDecompressedSize
	}
	data, err := decompress(b.Compression(), b[HeaderSize:], buf, limit)
	if err != nil {
		return recordDecoder{}, err
	}
	return recordDecoder{
		data:       data,
		count:      b.NumRecords(),
		prevDelta:  -1,
		lastDelta:  b.LastOffsetDelta(),
		baseOffset: b.BaseOffset(),
		baseTime:   b.FirstTimestamp(),
		appendTime: b.MaxTimestamp(),
		logAppend:  b.TimestampType() == LogAppendTime,
	}, nil
}

// next decodes the next record into r. Headers are appended to hdrs, which
// is returned grown: records share one backing array, each holding a
// capacity-clipped window of it, so many small header lists cost few
// allocations and appending to one record's headers cannot clobber another.
// With keep false the record is only checked (headers are not built).
func (d *recordDecoder) next(r *Record, hdrs []Header, keep bool) ([]Header, error) {
	i := d.index
	if d.pos == len(d.data) {
		return hdrs, corruptf(ErrBadCount, "batch says %d records, records section holds %d", d.count, i)
	}
	length, pos, ok := readVarint(d.data, d.pos)
	if !ok || length < 0 || int(length) > len(d.data)-pos {
		return hdrs, corruptf(ErrBadRecord, "record %d at byte %d: bad length: %s", i, d.pos, describeLength(d.data, d.pos))
	}
	end := pos + int(length)
	// Reading through rec, clipped at the record's end, keeps a lying inner
	// length from reaching into the next record.
	rec := d.data[:end]
	if pos == end {
		return hdrs, corruptf(ErrBadRecord, "record %d: empty", i)
	}
	pos++ // attributes: unused by magic 2
	tsDelta, pos, ok := readVarlong(rec, pos)
	if !ok {
		return hdrs, corruptf(ErrBadRecord, "record %d: bad timestamp delta: %s", i, describeLength(rec, pos))
	}
	offDelta, at, ok := readVarint(rec, pos)
	if !ok {
		return hdrs, corruptf(ErrBadRecord, "record %d: bad offset delta: %s", i, describeLength(rec, pos))
	}
	// Deltas increase strictly; a compacted batch skips some (the
	// records it dropped), within the batch's range.
	if offDelta <= d.prevDelta || offDelta > d.lastDelta {
		return hdrs, corruptf(ErrBadCount, "record %d has offset delta %d (after %d, at most %d)", i, offDelta, d.prevDelta, d.lastDelta)
	}
	key, pos, ok := readBytes(rec, at)
	if !ok {
		return hdrs, corruptf(ErrBadRecord, "record %d: bad key: %s", i, describeLength(rec, at))
	}
	value, at, ok := readBytes(rec, pos)
	if !ok {
		return hdrs, corruptf(ErrBadRecord, "record %d: bad value: %s", i, describeLength(rec, pos))
	}
	nh, pos, ok := readVarint(rec, at)
	// A header takes at least two bytes (empty key, null value).
	if !ok || nh < 0 || int(nh) > (end-pos)/2 {
		return hdrs, corruptf(ErrBadRecord, "record %d: bad header count: %s", i, describeLength(rec, at))
	}
	if keep && nh > 0 {
		hdrs = growHeaders(hdrs, int(nh))
	}
	first := len(hdrs)
	for h := range nh {
		var hk, hv []byte
		if hk, at, ok = readBytes(rec, pos); !ok || hk == nil {
			return hdrs, corruptf(ErrBadRecord, "record %d: bad key of header %d: %s", i, h, describeLength(rec, pos))
		}
		if hv, pos, ok = readBytes(rec, at); !ok {
			return hdrs, corruptf(ErrBadRecord, "record %d: bad value of header %d: %s", i, h, describeLength(rec, at))
		}
		if keep {
			hdrs = append(hdrs, Header{Key: d.headerKey(hk), Value: hv})
		}
	}
	if pos != end {
		return hdrs, corruptf(ErrBadRecord, "record %d: %d bytes left over", i, end-pos)
	}

	*r = Record{Offset: d.baseOffset + int64(offDelta), Key: key, Value: value}
	if d.logAppend {
		r.Timestamp = d.appendTime
	} else {
		r.Timestamp = d.baseTime + tsDelta
	}
	if keep && nh > 0 {
		r.Headers = hdrs[first:len(hdrs):len(hdrs)]
	}
	d.pos = end
	d.index++
	d.prevDelta = offDelta
	return hdrs, nil
}

// describeLength says, for an error message, what is wrong with the varint
// at b[pos:] that was to be a length, count or delta ending within b:
// "6-byte varint (at most 5)", "2147483648 out of range", "9 with 3 bytes
// after it". Only called on error paths.
func describeLength(b []byte, pos int) string {
	if pos >= len(b) {
		return "missing: the record ends first"
	}
	v, n := binary.Varint(b[pos:])
	switch {
	case n == 0:
		return fmt.Sprintf("varint cut off by the record's end after %d bytes", len(b)-pos)
	case n < 0:
		return "varint longer than 10 bytes"
	case n > binary.MaxVarintLen32:
		return fmt.Sprintf("%d-byte varint (at most %d)", n, binary.MaxVarintLen32)
	case v < -1 || v > math.MaxInt32:
		return fmt.Sprintf("%d out of range", v)
	case v == -1:
		return "-1 (null) where a value is required"
	}
	return fmt.Sprintf("%d with %d bytes after it", v, len(b)-pos-n)
}

// finish checks that nothing follows the last record.
func (d *recordDecoder) finish() error {
	if d.pos != len(d.data) {
		return corruptf(ErrBadCount, "%d bytes follow the last of %d records", len(d.data)-d.pos, d.count)
	}
	return nil
}

// readBytes reads a varint length and that many bytes at b[pos:]; -1 is
// null (nil). The slice's capacity is clipped so appending to a decoded key
// or value cannot overwrite the bytes after it.
func readBytes(b []byte, pos int) ([]byte, int, bool) {
	n, pos, ok := readVarint(b, pos)
	if !ok || n < -1 || int(n) > len(b)-pos {
		return nil, pos, false
	}
	if n == -1 {
		return nil, pos, true
	}
	end := pos + int(n)
	return b[pos:end:end], end, true
}

// growHeaders makes room for n more headers. When the backing array must be
// replaced, earlier records keep the old one: their windows stay valid.
func growHeaders(hdrs []Header, n int) []Header {
	if cap(hdrs)-len(hdrs) >= n {
		return hdrs
	}
	return make([]Header, 0, max(2*cap(hdrs), n, 8))
}
