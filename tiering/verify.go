package tiering

// VerifyBucket: an offline check of a bucket's cold tier against everything
// the format promises (tiering/FORMAT.md), for strata bucket verify. It
// walks every manifest it finds and reads every object the manifests name,
// whole:
//
//   - the head: its frame and CRC, that it sits where its topic, topic id
//     and partition say, a generation of at least 1, the part list (counts,
//     sequence numbers below nextSeq, keys of the layout);
//   - each closed part: there, framed and checked, agreeing with what the
//     head says of it (sequence, count, offsets, bytes, newest timestamp);
//   - the live segments in manifest order: offsets that follow on with no
//     gap or overlap, sane fields, keys of the layout naming the segment's
//     base offset and epoch, no key twice, and leader epochs that never go
//     back (the uploaders' epochs, not above the head's; each segment's
//     epoch lineage; the epochs stamped in the batches);
//   - each segment object (verify_object.go): present with the size the
//     manifest says, trailer, footer (index) and producer snapshot CRCs,
//     the trailer agreeing with the manifest, and every batch: length, magic,
//     CRC, offsets that follow on from the trailer's base to its last
//     offset, the index entries naming batch starts, the log CRC and the
//     time range;
//   - every other object under a partition, and every key under the listed
//     prefix outside the layout, is an orphan: not a problem (brokers
//     delete orphans once tiering.orphan_grace has passed, and an upload in
//     flight is one until its commit), but listed with its size.
//
// A bucket a cluster is writing changes while it is read. Objects are
// immutable and a head is replaced whole, so what is read is consistent,
// but retention may delete a segment between the read of its head and of
// its object: an object found missing is a problem only if the head, read
// again, still names it.

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-log/strata/tiering/objstore"
)

// VerifyOptions tune VerifyBucket.
type VerifyOptions struct {
	// Topic limits the check to the keys under "<Topic>/"; empty checks
	// the whole store.
	Topic string
	// Records also decodes every record of every batch (decompressing
	// compressed ones), beyond the length, magic and CRC checks every
	// batch gets: it proves that a consumer can decode them, at the cost
	// of CPU.
	Records bool
	// Parallel is how many segment objects are read at once; 0 means
	// DefaultVerifyParallel.
	Parallel int
	// Progress, when set, is called as the check advances, from one
	// goroutine at a time.
	Progress func(VerifyProgress)
}

// DefaultVerifyParallel is VerifyOptions.Parallel's default: enough reads
// in flight to hide an object store's latency, few enough to leave a
// shared machine usable.
const DefaultVerifyParallel = 4

// VerifyProgress is how far a check has come. The totals are known once
// every manifest is read; until then they are 0.
type VerifyProgress struct {
	Objects, ObjectsTotal int   // segment objects
	Bytes, BytesTotal     int64 // of segment objects
}

// Problem is one thing wrong with the bucket.
type Problem struct {
	// Key is the object the problem is in or about: a segment object, a
	// closed part, or the partition's manifest head for what concerns the
	// partition as a whole (the order of its segments).
	Key string
	// What says what is wrong, in one line.
	What string
}

func (p Problem) String() string { return p.Key + ": " + p.What }

// Orphan is an object no manifest names.
type Orphan struct {
	objstore.ObjectInfo
	// Why it is an orphan.
	Why string
}

// VerifyReport is what VerifyBucket found.
type VerifyReport struct {
	// Listed counts the objects under the listed prefix.
	Listed int
	// Partitions counts the manifest heads read; Parts the closed parts.
	Partitions, Parts int
	// Segments, Bytes and Batches count the segment objects read whole,
	// their bytes and their batches.
	Segments int
	Bytes    int64
	Batches  int64
	// Problems, partition by partition (in topic, topic id and partition
	// order), each partition's in manifest order as far as it goes. The
	// bucket is sound when there is none.
	Problems []Problem
	// Orphans, in key order, and their bytes.
	Orphans     []Orphan
	OrphanBytes int64
	// Vanished counts segments that retention removed while the check ran
	// (missing, and no longer named by their head read again).
	Vanished int
}

// Sound reports whether no problem was found. Orphans do not count.
func (r *VerifyReport) Sound() bool { return len(r.Problems) == 0 }

// maxProblemsPerObject bounds the lines one damaged object adds: past it,
// one more line says how many were left out.
const maxProblemsPerObject = 10

// VerifyBucket checks the cold tier in r, as the top of this file says.
// Problems found in the bucket are in the report; the error is for a
// failure to read it (the store unreachable, the context ended), which
// leaves the check unfinished.
func VerifyBucket(ctx context.Context, r objstore.Reader, opts VerifyOptions) (*VerifyReport, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultVerifyParallel
	}
	scan, err := scanBucket(ctx, r, opts.Topic)
	if err != nil {
		return nil, err
	}
	rep := &VerifyReport{Listed: scan.listed}
	// The manifests first, all of them: they are small, and they give the
	// totals the progress shows.
	var checks []*partitionCheck
	var tasks []objectTask
	for _, d := range scan.dirs {
		pc, err := checkManifest(ctx, r, d)
		if err != nil {
			return nil, err
		}
		checks = append(checks, pc)
		if pc.head != nil {
			rep.Partitions++
			rep.Parts += pc.partsRead
		}
		for i := range pc.segs {
			tasks = append(tasks, objectTask{pc: pc, idx: i})
		}
	}
	if err := checkObjects(ctx, r, opts, tasks); err != nil {
		return nil, err
	}
	for _, pc := range checks {
		pc.finish(ctx, r)
		rep.Problems = append(rep.Problems, pc.problems...)
		rep.Orphans = append(rep.Orphans, pc.orphans...)
		rep.Vanished += pc.vanished
		for _, s := range pc.segs {
			if s.result != nil && !s.result.missing {
				rep.Segments++
				rep.Bytes += s.result.size
				rep.Batches += s.result.batches
			}
		}
	}
	for _, o := range scan.stray {
		rep.Orphans = append(rep.Orphans, Orphan{ObjectInfo: o, Why: "not a key of the layout <topic>/<topic id>/<partition>/..."})
	}
	sort.Slice(rep.Orphans, func(i, j int) bool { return rep.Orphans[i].Key < rep.Orphans[j].Key })
	for _, o := range rep.Orphans {
		rep.OrphanBytes += o.Size
	}
	return rep, nil
}

// partitionCheck is the check of one partition.
type partitionCheck struct {
	dir  *partitionDir
	head *Head // nil: no head, or one that could not be read
	etag string
	// headKey is where problems about the partition as a whole go.
	headKey string
	// named are the keys the manifest names: parts and segments.
	named map[string]bool
	// unjudged: the head could not be read, so which of the partition's
	// objects are orphans cannot be told.
	unjudged bool
	// segmentsUnjudged: a closed part could not be read, so which segment
	// objects are orphans cannot be told.
	segmentsUnjudged bool
	partsRead        int
	segs             []segCheck
	problems         []Problem
	orphans          []Orphan
	vanished         int
	// reread is the head read again after an object was found missing
	// (once per partition), and whether that was done.
	reread     *Head
	rereadDone bool
}

// segCheck is one live segment, in manifest order, and what reading its
// object found.
type segCheck struct {
	ref    SegmentRef
	result *objectResult
}

func (pc *partitionCheck) problemf(key, format string, args ...any) {
	pc.problems = append(pc.problems, Problem{Key: key, What: fmt.Sprintf(format, args...)})
}

var (
	segmentKeyRE = regexp.MustCompile(`^(\d{20})-(\d+)-([0-9a-f]+)\.seg$`)
	partKeyRE    = regexp.MustCompile(`^(\d{20})-([0-9a-f]+)\.part$`)
)

// checkManifest reads and checks a partition's head and closed parts and
// the order of its segments, without reading a segment object.
func checkManifest(ctx context.Context, r objstore.Reader, d *partitionDir) (*partitionCheck, error) {
	pc := &partitionCheck{dir: d, headKey: d.ref.ManifestKey(), named: map[string]bool{}}
	if d.manifest == nil {
		return pc, nil
	}
	h, etag, err := readHead(ctx, r, pc.headKey)
	switch {
	case err == nil:
	case !isDataProblem(err):
		return nil, fmt.Errorf("tiering: read manifest %s: %w", pc.headKey, err)
	case isNotFound(err):
		// Deleted since the listing (the topic was deleted): its objects
		// are orphans now, or gone too.
		return pc, nil
	default:
		pc.unjudged = true
		pc.problemf(pc.headKey, "unreadable manifest head, so its %d objects are not checked: %v", len(d.objects), trimErr(err))
		return pc, nil
	}
	pc.head, pc.etag = h, etag
	pc.checkHeadFields()
	for _, r := range h.Retired {
		pc.named[r.Key] = true // replaced by a cleaning, deleted after their grace
	}
	var spans []segSpan
	for _, ref := range h.Parts {
		pc.named[ref.Key] = true
		segs, err := pc.readPart(ctx, r, ref)
		if err != nil {
			if !isDataProblem(err) {
				return nil, err
			}
			if isNotFound(err) && pc.goneSince(ctx, r, ref.LastOffset) {
				continue
			}
			// Its segments cannot be named: keep the offsets the head
			// says it holds, so the order check still covers the rest.
			pc.problemf(ref.Key, "%s, so its %d segments are not checked, nor the partition's segment objects for orphans", describeReadError("closed part", err), ref.Count-ref.Skip)
			pc.segmentsUnjudged = true
			spans = append(spans, segSpan{base: ref.BaseOffset, last: ref.LastOffset, key: ref.Key, what: "closed part"})
			continue
		}
		pc.partsRead++
		for _, s := range segs {
			pc.segs = append(pc.segs, segCheck{ref: s})
			spans = append(spans, segSpan{base: s.BaseOffset, last: s.LastOffset, key: s.Key, what: "segment"})
		}
	}
	for _, s := range h.Tail {
		pc.segs = append(pc.segs, segCheck{ref: s})
		spans = append(spans, segSpan{base: s.BaseOffset, last: s.LastOffset, key: s.Key, what: "segment"})
	}
	pc.checkOrder(spans)
	return pc, nil
}

// checkHeadFields checks the head's own fields and its list of parts.
func (pc *partitionCheck) checkHeadFields() {
	h, ref, key := pc.head, pc.dir.ref, pc.headKey
	if h.Topic != ref.Topic || h.TopicID != ref.TopicID || h.Partition != ref.Partition {
		pc.problemf(key, "the head is of topic %q id %s partition %d, but sits under %s", h.Topic, h.TopicID, h.Partition, ref.dir())
	}
	if h.Generation == 0 {
		pc.problemf(key, "generation 0: every write of a head is a commit, which counts from 1")
	}
	if h.LeaderEpoch < 0 {
		pc.problemf(key, "leader epoch %d is negative", h.LeaderEpoch)
	}
	if h.Partitions < 0 || (h.Partitions > 0 && h.Partition >= h.Partitions) {
		pc.problemf(key, "the topic has %d partitions by the head, which does not include partition %d", h.Partitions, h.Partition)
	}
	if len(h.Tail) >= partSegments {
		pc.problemf(key, "the tail lists %d segments; a commit closes a part at %d", len(h.Tail), partSegments)
	}
	seen := map[string]bool{}
	for i, p := range h.Parts {
		switch {
		case p.Count <= 0 || p.Skip < 0 || p.Skip >= p.Count:
			pc.problemf(key, "part %d (%s) counts %d segments skipping %d", p.Seq, p.Key, p.Count, p.Skip)
		case p.LastOffset < p.BaseOffset:
			pc.problemf(key, "part %d (%s) holds offsets %d..%d, which end before they start", p.Seq, p.Key, p.BaseOffset, p.LastOffset)
		}
		if p.Seq >= h.NextSeq {
			pc.problemf(key, "part %d (%s) is not below the head's next part number %d", p.Seq, p.Key, h.NextSeq)
		}
		if i > 0 && p.Seq <= h.Parts[i-1].Seq {
			pc.problemf(key, "part %d (%s) follows part %d: part numbers must grow", p.Seq, p.Key, h.Parts[i-1].Seq)
		}
		if seen[p.Key] {
			pc.problemf(key, "part %s is listed twice", p.Key)
		}
		seen[p.Key] = true
		name, ok := strings.CutPrefix(p.Key, pc.dir.ref.PartPrefix())
		m := partKeyRE.FindStringSubmatch(name)
		switch {
		case !ok || m == nil:
			pc.problemf(key, "part %d has key %s, outside the layout %s<20-digit seq>-<hex>.part", p.Seq, p.Key, pc.dir.ref.PartPrefix())
		case mustUint(m[1]) != p.Seq:
			pc.problemf(key, "part %d has key %s, which names part %d", p.Seq, p.Key, mustUint(m[1]))
		}
	}
}

// readPart reads a closed part and checks it against the head's PartRef,
// returning its live segments.
func (pc *partitionCheck) readPart(ctx context.Context, r objstore.Reader, ref PartRef) ([]SegmentRef, error) {
	p, err := readPart(ctx, r, ref.Key)
	if err != nil {
		if !isDataProblem(err) {
			return nil, fmt.Errorf("tiering: read manifest part %s: %w", ref.Key, err)
		}
		return nil, err
	}
	if p.Seq != ref.Seq {
		pc.problemf(ref.Key, "the part says it is number %d, the head %d", p.Seq, ref.Seq)
	}
	if len(p.Segments) != ref.Count {
		pc.problemf(ref.Key, "the part lists %d segments, the head says %d", len(p.Segments), ref.Count)
	}
	if ref.Skip < 0 || ref.Skip >= len(p.Segments) {
		return nil, corruptf("the head skips %d of its %d segments", ref.Skip, len(p.Segments))
	}
	live := p.Segments[ref.Skip:]
	maxTs, bytes := live[0].MaxTs, int64(0)
	for _, s := range live {
		maxTs = max(maxTs, s.MaxTs)
		bytes += s.Size
	}
	if first, last := live[0].BaseOffset, live[len(live)-1].LastOffset; first != ref.BaseOffset || last != ref.LastOffset {
		pc.problemf(ref.Key, "the part's live segments hold offsets %d..%d, the head says %d..%d", first, last, ref.BaseOffset, ref.LastOffset)
	}
	if maxTs != ref.MaxTs {
		pc.problemf(ref.Key, "the part's newest timestamp is %d, the head says %d", maxTs, ref.MaxTs)
	}
	if bytes != ref.Bytes {
		pc.problemf(ref.Key, "the part's live segments have %d bytes, the head says %d", bytes, ref.Bytes)
	}
	return live, nil
}

// segSpan is a run of offsets the manifest lists: a segment, or a closed
// part that could not be read (only its range is known).
type segSpan struct {
	base, last int64
	key        string
	what       string // "segment" or "closed part"
}

// checkOrder checks the segments in manifest order: offsets that follow
// on, keys, fields, and leader epochs that never go back.
func (pc *partitionCheck) checkOrder(spans []segSpan) {
	h, key := pc.head, pc.headKey
	for i := 1; i < len(spans); i++ {
		prev, cur := spans[i-1], spans[i]
		switch {
		case cur.base > prev.last+1:
			pc.problemf(key, "gap: offsets %d..%d are in no segment, between %s %s (%d..%d) and %s %s (%d..%d)",
				prev.last+1, cur.base-1, prev.what, prev.key, prev.base, prev.last, cur.what, cur.key, cur.base, cur.last)
		case cur.base <= prev.last:
			pc.problemf(key, "overlap: %s %s (%d..%d) starts inside %s %s (%d..%d)",
				cur.what, cur.key, cur.base, cur.last, prev.what, prev.key, prev.base, prev.last)
		}
	}
	seen := map[string]bool{}
	var prev *SegmentRef
	lastLineage := int32(-1) // the newest lineage epoch so far
	for i := range pc.segs {
		s := &pc.segs[i].ref
		pc.named[s.Key] = true
		if seen[s.Key] {
			pc.problemf(key, "segment %s is listed twice", s.Key)
		}
		seen[s.Key] = true
		pc.checkSegmentRef(s)
		if s.Epoch > h.LeaderEpoch {
			pc.problemf(s.Key, "uploaded in leader epoch %d, above the head's %d", s.Epoch, h.LeaderEpoch)
		}
		if prev != nil && s.Epoch < prev.Epoch {
			pc.problemf(s.Key, "uploaded in leader epoch %d after %s in epoch %d: epochs went back", s.Epoch, prev.Key, prev.Epoch)
		}
		for j, e := range s.Epochs {
			switch {
			case e.Start < s.BaseOffset || e.Start > s.LastOffset:
				pc.problemf(s.Key, "epoch lineage: epoch %d starts at %d, outside the segment's %d..%d", e.Epoch, e.Start, s.BaseOffset, s.LastOffset)
			case j > 0 && (e.Epoch <= s.Epochs[j-1].Epoch || e.Start < s.Epochs[j-1].Start):
				pc.problemf(s.Key, "epoch lineage: epoch %d at %d follows epoch %d at %d: epochs went back", e.Epoch, e.Start, s.Epochs[j-1].Epoch, s.Epochs[j-1].Start)
			case j == 0 && e.Epoch < lastLineage:
				pc.problemf(s.Key, "epoch lineage starts with epoch %d, after epoch %d in the segments before: epochs went back", e.Epoch, lastLineage)
			}
			if e.Epoch > s.Epoch {
				pc.problemf(s.Key, "epoch lineage names epoch %d, above the uploader's %d", e.Epoch, s.Epoch)
			}
		}
		if n := len(s.Epochs); n > 0 {
			lastLineage = max(lastLineage, s.Epochs[n-1].Epoch)
		}
		prev = s
	}
}

// checkSegmentRef checks one segment's fields and key.
func (pc *partitionCheck) checkSegmentRef(s *SegmentRef) {
	switch {
	case s.BaseOffset < 0 || s.LastOffset < s.BaseOffset:
		pc.problemf(s.Key, "the manifest says offsets %d..%d", s.BaseOffset, s.LastOffset)
	case s.Size <= 0 || s.LogLen < 0 || s.LogLen > s.Size:
		pc.problemf(s.Key, "the manifest says %d log bytes in an object of %d", s.LogLen, s.Size)
	case s.MinTs > s.MaxTs:
		pc.problemf(s.Key, "the manifest says timestamps %d..%d, which end before they start", s.MinTs, s.MaxTs)
	}
	name, ok := strings.CutPrefix(s.Key, pc.dir.ref.SegmentPrefix())
	m := segmentKeyRE.FindStringSubmatch(name)
	switch {
	case !ok || m == nil:
		pc.problemf(s.Key, "key outside the layout %s<20-digit base>-<epoch>-<hex>.seg", pc.dir.ref.SegmentPrefix())
	case mustUint(m[1]) != uint64(s.BaseOffset):
		pc.problemf(s.Key, "the key names base offset %d, the manifest says %d", mustUint(m[1]), s.BaseOffset)
	case m[2] != strconv.Itoa(int(s.Epoch)):
		pc.problemf(s.Key, "the key names epoch %s, the manifest says %d", m[2], s.Epoch)
	}
}

// goneSince reports whether the partition's head, read again, starts
// after last: retention removed what was being read. The head is read
// again at most once per partition check.
func (pc *partitionCheck) goneSince(ctx context.Context, r objstore.Reader, last int64) bool {
	if !pc.rereadDone {
		pc.rereadDone = true
		h, etag, err := readHead(ctx, r, pc.headKey)
		switch {
		case isNotFound(err):
			pc.reread = &Head{} // the partition's cold tier was deleted meanwhile
		case err == nil && etag != pc.etag:
			pc.reread = h
		}
	}
	if pc.reread == nil || (!pc.reread.Empty() && pc.reread.StartOffset() <= last) {
		return false
	}
	pc.vanished++
	return true
}

// finish turns the object results into problems, in manifest order, checks
// that batch epochs never go back from one segment to the next, and finds
// the partition's orphans.
func (pc *partitionCheck) finish(ctx context.Context, r objstore.Reader) {
	var prevEpoch int32 = -1
	var prevKey string
	var prevOffset int64
	for i := range pc.segs {
		s := &pc.segs[i]
		res := s.result
		if res == nil {
			continue
		}
		if res.missing {
			if !pc.goneSince(ctx, r, s.ref.LastOffset) {
				pc.problemf(s.ref.Key, "missing: the manifest names it, the bucket has no such object")
			}
			continue
		}
		pc.problems = append(pc.problems, res.problems...)
		if res.batches == 0 {
			continue
		}
		if prevKey != "" && res.firstEpoch < prevEpoch {
			pc.problemf(s.ref.Key, "its first batch (offset %d) has leader epoch %d, after epoch %d at offset %d in %s: epochs went back",
				res.firstOffset, res.firstEpoch, prevEpoch, prevOffset, prevKey)
		}
		prevEpoch, prevKey, prevOffset = res.lastEpoch, s.ref.Key, res.lastOffset
	}
	for _, o := range pc.dir.objects {
		if pc.named[o.Key] || pc.unjudged || (pc.segmentsUnjudged && strings.HasPrefix(o.Key, pc.dir.ref.SegmentPrefix())) {
			continue
		}
		why := "the manifest does not name it"
		if pc.head == nil {
			why = "its partition has no manifest"
		}
		pc.orphans = append(pc.orphans, Orphan{ObjectInfo: o, Why: why})
	}
}

// objectTask is a segment object to read: pc.segs[idx].
type objectTask struct {
	pc  *partitionCheck
	idx int
}

// checkObjects reads the objects of tasks, opts.Parallel at a time,
// storing each result in its segCheck. The first failure to read the store
// stops them all.
func checkObjects(ctx context.Context, r objstore.Reader, opts VerifyOptions, tasks []objectTask) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		prog     VerifyProgress
	)
	prog.ObjectsTotal = len(tasks)
	for _, t := range tasks {
		prog.BytesTotal += t.pc.segs[t.idx].ref.Size
	}
	report := func(objects int, bytes int64) {
		if opts.Progress == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		prog.Objects += objects
		prog.Bytes += bytes
		opts.Progress(prog)
	}
	report(0, 0)
	next := make(chan objectTask)
	var wg sync.WaitGroup
	for range min(opts.Parallel, max(len(tasks), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range next {
				s := &t.pc.segs[t.idx]
				res, err := checkObject(ctx, r, s.ref, opts.Records, func(n int64) { report(0, n) })
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					cancel()
					continue
				}
				s.result = res
				report(1, 0)
			}
		}()
	}
feed:
	for _, t := range tasks {
		select {
		case next <- t:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	return ctx.Err()
}

func isNotFound(err error) bool { return errors.Is(err, objstore.ErrNotFound) }

func mustUint(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// describeReadError words a data problem met reading an object.
func describeReadError(what string, err error) string {
	if isNotFound(err) {
		return what + " missing: the head names it, the bucket has no such object"
	}
	return "unreadable " + what + ": " + trimErr(err)
}

// trimErr drops the package prefix a corruption error carries, which says
// nothing to the reader of a report.
func trimErr(err error) string {
	return strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": ")
}
