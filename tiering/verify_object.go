package tiering

// The check of one cold segment object, for VerifyBucket: its trailer
// first, then the footer and producer snapshot it locates, then the log
// bytes front to back, so that every byte of the object is read once and
// covered by a check (the log by each batch's CRC and by the log CRC, the
// footer, the snapshot and the trailer by their own CRCs).

import (
	"bufio"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"strings"

	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/tiering/objstore"
)

const (
	// scanBuffer is how much of an object's log one read fetches: with an
	// S3 store each read is a GET, so it is large, as the cold reader's
	// chunks are.
	scanBuffer = 4 << 20
	// progressStep is how many bytes an object check reads between two
	// progress reports, so that a large object moves the bar and a small
	// batch does not take a lock.
	progressStep = 1 << 20
)

// objectResult is what the check of one segment object found.
type objectResult struct {
	// missing: the store has no object under the key.
	missing bool
	// size is the object's size; batches how many were read.
	size    int64
	batches int64
	// The offset and leader epoch of the first and last batch read, for
	// the check that epochs never go back from one segment to the next.
	firstOffset, lastOffset int64
	firstEpoch, lastEpoch   int32
	problems                []Problem
	dropped                 int // problems past maxProblemsPerObject
}

// objectCheck is the state of one object's check.
type objectCheck struct {
	ctx     context.Context
	rd      objstore.ObjectReader
	seg     SegmentRef
	res     *objectResult
	records bool
	// advance reports bytes read; pending holds those not yet reported.
	advance func(int64)
	pending int64
	counted int64
}

// checkObject reads seg's object whole and checks it (see the top of the
// file). The error is for a failure to read the store; what is wrong with
// the object is in the result.
func checkObject(ctx context.Context, r objstore.Reader, seg SegmentRef, records bool, advance func(int64)) (*objectResult, error) {
	res := &objectResult{}
	rd, err := r.Open(ctx, seg.Key)
	if isNotFound(err) {
		res.missing = true
		advance(seg.Size) // done with it, as far as the progress goes
		return res, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tiering: open cold segment %s: %w", seg.Key, err)
	}
	defer rd.Close()
	oc := &objectCheck{ctx: ctx, rd: rd, seg: seg, res: res, records: records, advance: advance}
	res.size = rd.Size()
	err = oc.run()
	// The progress counts the object as the manifest sizes it (the totals
	// do), however much of it a problem left unread.
	oc.advance(max(seg.Size-oc.counted, 0))
	if err != nil {
		return nil, err
	}
	if res.dropped > 0 {
		res.problems = append(res.problems, Problem{Key: seg.Key, What: fmt.Sprintf("and %d more problems in this object", res.dropped)})
	}
	return res, nil
}

func (oc *objectCheck) problemf(format string, args ...any) {
	if len(oc.res.problems) >= maxProblemsPerObject {
		oc.res.dropped++
		return
	}
	oc.res.problems = append(oc.res.problems, Problem{Key: oc.seg.Key, What: fmt.Sprintf(format, args...)})
}

// read reads n bytes at off: the trailer, the footer, the snapshot.
func (oc *objectCheck) read(off, n int64) ([]byte, error) {
	b := make([]byte, n)
	if _, err := oc.rd.ReadAt(oc.ctx, b, off); err != nil {
		return nil, fmt.Errorf("tiering: read cold segment %s at %d: %w", oc.seg.Key, off, err)
	}
	return b, nil
}

// count counts n more bytes read for the progress.
func (oc *objectCheck) count(n int64) {
	oc.pending += n
	if oc.pending >= progressStep {
		oc.advance(oc.pending)
		oc.counted += oc.pending
		oc.pending = 0
	}
}

func (oc *objectCheck) run() error {
	seg, size := oc.seg, oc.res.size
	if size != seg.Size {
		oc.problemf("the object has %d bytes, the manifest says %d", size, seg.Size)
	}
	if size < trailerSizeV1+record.HeaderSize {
		oc.problemf("an object of %d bytes is too small to be a segment", size)
		return nil
	}
	tailLen := min(size, maxTrailerSize)
	tail, err := oc.read(size-tailLen, tailLen)
	if err != nil {
		return err
	}
	t, err := DecodeTrailer(tail, size)
	if err != nil {
		oc.problemf("trailer: %s; the rest of the object is not checked", trimErr(err))
		return nil
	}
	if t.BaseOffset != seg.BaseOffset || t.LastOffset != seg.LastOffset {
		oc.problemf("the trailer says offsets %d..%d, the manifest %d..%d", t.BaseOffset, t.LastOffset, seg.BaseOffset, seg.LastOffset)
	}
	// Manifests written before LogLen and LogCRC were recorded carry 0 in
	// both, as the cold reader allows.
	if seg.LogLen != 0 && (t.LogLen != seg.LogLen || t.LogCRC != seg.LogCRC) {
		oc.problemf("the trailer says %d log bytes with crc %#08x, the manifest %d with %#08x", t.LogLen, t.LogCRC, seg.LogLen, seg.LogCRC)
	}
	if t.MinTs != seg.MinTs || t.MaxTs != seg.MaxTs {
		oc.problemf("the trailer says timestamps %d..%d, the manifest %d..%d", t.MinTs, t.MaxTs, seg.MinTs, seg.MaxTs)
	}
	var footer *Footer
	if t.FooterLen() > maxFooterLen(t.LogLen) {
		oc.problemf("the trailer says %d index entries for %d log bytes, more than it has batches", t.Entries, t.LogLen)
	} else {
		b, err := oc.read(t.LogLen, t.FooterLen())
		if err != nil {
			return err
		}
		if footer, err = DecodeFooter(b, t); err != nil {
			oc.problemf("footer (index): %s", trimErr(err))
			footer = nil
		}
	}
	if t.ProducersLen > 0 {
		b, err := oc.read(t.ProducersPos(), int64(t.ProducersLen))
		if err != nil {
			return err
		}
		if err := CheckProducerSnapshot(b, t); err != nil {
			oc.problemf("producer snapshot: %s", trimErr(err))
		}
	}
	return oc.scanLog(t, footer)
}

// readerAt adapts an ObjectReader to io.ReaderAt for io.SectionReader.
type readerAt struct {
	ctx context.Context
	rd  objstore.ObjectReader
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) { return r.rd.ReadAt(r.ctx, p, off) }

// scanLog reads the log bytes batch by batch, checking each one and what
// the trailer and footer say of them. A batch whose length cannot be
// trusted ends the scan: where the next one starts is then unknown.
func (oc *objectCheck) scanLog(t Trailer, footer *Footer) error {
	seg := oc.seg
	br := bufio.NewReaderSize(io.NewSectionReader(readerAt{oc.ctx, oc.rd}, 0, t.LogLen), int(min(scanBuffer, t.LogLen)))
	logCRC := crc32.New(castagnoli)
	var entries []IndexEntry
	if footer != nil {
		entries = footer.Entries
	}
	var (
		buf          []byte
		pos          int64
		next         = t.BaseOffset
		minTs, maxTs int64
		k            int // the next index entry to match
	)
	for pos < t.LogLen {
		if t.LogLen-pos < record.HeaderSize {
			oc.problemf("the log ends %d bytes into the header of a batch at position %d", t.LogLen-pos, pos)
			return nil
		}
		head, err := br.Peek(record.LengthOffset)
		if err != nil {
			return fmt.Errorf("tiering: read cold segment %s at %d: %w", seg.Key, pos, err)
		}
		n, err := record.PeekSize(head)
		if err != nil {
			oc.problemf("batch at position %d: %s; the %d log bytes from there are not checked", pos, recordErr(err), t.LogLen-pos)
			return nil
		}
		if pos+int64(n) > t.LogLen {
			oc.problemf("batch at position %d of %d bytes runs past the end of the log at %d", pos, n, t.LogLen)
			return nil
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf); err != nil {
			return fmt.Errorf("tiering: read cold segment %s at %d: %w", seg.Key, pos, err)
		}
		logCRC.Write(buf)
		oc.count(int64(n))

		// PeekSize made the batch at least a header long, so its fields
		// can be read even when it fails its checks.
		b := record.Batch(buf)
		base, epoch := b.BaseOffset(), b.LeaderEpoch()
		if _, _, err := record.Next(buf); err != nil {
			oc.problemf("batch at position %d (offset %d): %s", pos, base, recordErr(err))
		} else if oc.records {
			// ValidateRecordsLimit, not the produce path's dense check: a
			// compacted topic's objects hold batches with gaps.
			if err := b.ValidateRecordsLimit(record.MaxDecompressedSize); err != nil {
				oc.problemf("batch at position %d (offset %d): records: %s", pos, base, recordErr(err))
			}
		}
		if base != next {
			// The base offset is outside the batch's CRC: a damaged one is
			// reported once, and the scan goes on from where the batch
			// should have started, so that one bad field is one line.
			oc.problemf("batch at position %d starts at offset %d, want %d", pos, base, next)
			base = next
		}
		last := base + int64(max(b.LastOffsetDelta(), 0))
		next = last + 1
		res := oc.res
		if res.batches == 0 {
			res.firstOffset, res.firstEpoch = base, epoch
		} else if epoch < res.lastEpoch {
			oc.problemf("batch at offset %d has leader epoch %d, after epoch %d at offset %d: epochs went back", base, epoch, res.lastEpoch, res.lastOffset)
		}
		if want := epochAt(seg.Epochs, base); want >= 0 && want != epoch {
			oc.problemf("batch at offset %d has leader epoch %d, the manifest's epoch lineage says %d", base, epoch, want)
		}
		res.lastOffset, res.lastEpoch = last, epoch
		lo, hi := batchTimes(b)
		if res.batches == 0 {
			minTs, maxTs = lo, hi
		} else {
			minTs, maxTs = min(minTs, lo), max(maxTs, hi)
		}
		for ; k < len(entries) && int64(entries[k].Pos) < pos; k++ {
			oc.problemf("index entry %d names position %d, where no batch starts", k, entries[k].Pos)
		}
		if k < len(entries) && int64(entries[k].Pos) == pos {
			if e := entries[k]; int64(e.Rel) != base-t.BaseOffset || e.MaxTs != maxTs {
				oc.problemf("index entry %d says offset %d and newest timestamp %d at position %d; the batches say %d and %d",
					k, t.BaseOffset+int64(e.Rel), e.MaxTs, pos, base, maxTs)
			}
			k++
		}
		res.batches++
		pos += int64(n)
	}
	for ; k < len(entries); k++ {
		oc.problemf("index entry %d names position %d, where no batch starts", k, entries[k].Pos)
	}
	if next != t.LastOffset+1 {
		oc.problemf("the batches end at offset %d, the trailer says %d", next-1, t.LastOffset)
	}
	if sum := logCRC.Sum32(); sum != t.LogCRC {
		oc.problemf("log crc %#08x, the trailer says %#08x", sum, t.LogCRC)
	}
	if minTs != t.MinTs || maxTs != t.MaxTs {
		oc.problemf("the batches' timestamps span %d..%d, the trailer says %d..%d", minTs, maxTs, t.MinTs, t.MaxTs)
	}
	return nil
}

// recordErr is a batch's error without the package prefix: "crc mismatch:
// stored ... computed ...".
func recordErr(err error) string { return strings.TrimPrefix(err.Error(), "record: ") }
