package tiering

// The manifest is a partition's cold tier commit point: what is listed is in
// the cold tier, what is not is not, whatever objects the bucket holds.
//
// Its cost stays bounded under unbounded retention: a head object lists the
// closed parts (immutable objects of up to partSegments segments each) and
// holds the newest segments itself, so a commit is one conditional write of
// the head, plus, every partSegments segments, one write of a new closed
// part. The head carries a generation (one more per commit) and the leader
// epoch of its writer: a writer whose epoch is older than the head's has
// been deposed and stops.
//
// Both objects are framed the same way:
//
//	magic [8] | version u16 | length u32 | JSON body | CRC-32C u32
//
// JSON keeps them readable by an operator with any S3 tool; the frame makes
// a torn or damaged object an error, never a short manifest.

import (
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"sort"
)

const (
	manifestVersion = 1
	// partSegments is how many segments a closed part lists.
	partSegments = 1000
	frameHead    = 14 // magic, version, length
)

var (
	headMagic = [8]byte{'S', 'T', 'R', 'A', 'T', 'M', 'A', 'N'}
	partMagic = [8]byte{'S', 'T', 'R', 'A', 'T', 'P', 'R', 'T'}
)

// SegmentRef is one segment in the cold tier.
type SegmentRef struct {
	Key        string `json:"key"`
	BaseOffset int64  `json:"base"`
	LastOffset int64  `json:"last"`
	MinTs      int64  `json:"minTs"`
	MaxTs      int64  `json:"maxTs"`
	Size       int64  `json:"size"`   // the whole object
	LogLen     int64  `json:"logLen"` // its log bytes
	Epoch      int32  `json:"epoch"`  // leader epoch of the uploader
	LogCRC     uint32 `json:"logCrc"`
	// Epochs is the leader-epoch lineage of the offsets it holds (see
	// lineage.go); empty in segments uploaded before it was recorded.
	Epochs []EpochStart `json:"epochs,omitempty"`
}

// PartRef points at a closed part from the head.
type PartRef struct {
	Key        string `json:"key"`
	Seq        uint64 `json:"seq"`
	Count      int    `json:"count"` // segments in the part
	Skip       int    `json:"skip"`  // leading segments already expired
	BaseOffset int64  `json:"base"`  // of its first live segment
	LastOffset int64  `json:"last"`
	MaxTs      int64  `json:"maxTs"`
	Bytes      int64  `json:"bytes"` // of its live segments
}

// Part is a closed part: segments in offset order.
type Part struct {
	Seq      uint64       `json:"seq"`
	Segments []SegmentRef `json:"segments"`
}

// Head is the manifest head of one partition.
type Head struct {
	Topic       string `json:"topic"`
	TopicID     string `json:"topicId"`
	Partition   int32  `json:"partition"`
	Generation  uint64 `json:"generation"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	// Parts are the closed parts, oldest first; Tail are the newest segments,
	// not yet in a closed part.
	Parts   []PartRef    `json:"parts"`
	Tail    []SegmentRef `json:"tail"`
	NextSeq uint64       `json:"nextSeq"`
	// Topic settings and partition count at the last commit, so a topic can
	// be restored from the bucket alone.
	Config     map[string]string `json:"config,omitempty"`
	Partitions int32             `json:"partitions"`
	// CleanedTo is the offset the cold cleaner has compacted the cold tier
	// up to: segments ending below it hold no record superseded by another
	// below it (see coldclean.go). 0 for a cold tier never cleaned.
	CleanedTo int64 `json:"cleanedTo,omitempty"`
	// Retired are objects (segments and parts) a cleaning replaced: no
	// longer named by the manifest, kept until their grace period ends so
	// readers that loaded an older head finish (CollectRetired).
	Retired []RetiredObject `json:"retired,omitempty"`
	// CleanPasses are the cold cleaner's recent passes: where each ended
	// and when, from which the tombstone horizon follows (CleanPass).
	CleanPasses []CleanPass `json:"cleanPasses,omitempty"`
	// CleanScan is a cleaning under way over several rounds (each bounded
	// in the bytes it reads), absent when none is.
	CleanScan *CleanScan `json:"cleanScan,omitempty"`
}

// CleanScan is a cold cleaning under way: its key map covers the dirty
// offsets from CleanedTo to End, and the objects below Next have been
// filtered by it. The next round builds the same key map and goes on from
// Next; once it reaches End, CleanedTo moves to End and the scan ends.
type CleanScan struct {
	End  int64 `json:"end"`
	Next int64 `json:"next"`
}

// CleanPass says a cleaning of the cold tier covered every offset below
// End at At (Unix ms). A tombstone stays readable for delete.retention.ms
// after a cleaning first covered it (Kafka's rule), so once a pass is that
// old the tombstones below its End may go.
type CleanPass struct {
	End int64 `json:"end"`
	At  int64 `json:"at"`
}

// maxCleanPasses bounds the head's pass history. Forgetting the oldest
// attributes its offsets to a later pass: tombstones stay longer, never
// shorter.
const maxCleanPasses = 64

// TombstoneHorizon is the offset below which the cold tier's tombstones
// may be removed at nowMs: the furthest end of a pass at least retentionMs
// old. A negative retention (unbounded) keeps every tombstone.
func (h *Head) TombstoneHorizon(nowMs, retentionMs int64) int64 {
	var horizon int64
	if retentionMs < 0 {
		return 0
	}
	for _, p := range h.CleanPasses {
		if p.At <= nowMs-retentionMs {
			horizon = max(horizon, p.End)
		}
	}
	return horizon
}

// RetiredObject is an object the manifest stopped naming at At (Unix ms).
type RetiredObject struct {
	Key string `json:"key"`
	At  int64  `json:"at"`
}

// Empty reports whether the cold tier holds no segment.
func (h *Head) Empty() bool { return len(h.Parts) == 0 && len(h.Tail) == 0 }

// StartOffset is the first offset in the cold tier (valid when not Empty).
func (h *Head) StartOffset() int64 {
	if len(h.Parts) > 0 {
		return h.Parts[0].BaseOffset
	}
	return h.Tail[0].BaseOffset
}

// EndOffset is the offset after the last one in the cold tier, or -1 when
// it is empty.
func (h *Head) EndOffset() int64 {
	if n := len(h.Tail); n > 0 {
		return h.Tail[n-1].LastOffset + 1
	}
	if n := len(h.Parts); n > 0 {
		return h.Parts[n-1].LastOffset + 1
	}
	return -1
}

// Stats sums the live segments: count and bytes.
func (h *Head) Stats() (segments int, bytes int64) {
	for _, p := range h.Parts {
		segments += p.Count - p.Skip
		bytes += p.Bytes
	}
	for _, s := range h.Tail {
		segments++
		bytes += s.Size
	}
	return segments, bytes
}

// partFor returns the index of the closed part holding offset, or -1 if it
// is in the tail (or nowhere).
func (h *Head) partFor(offset int64) int {
	i := sort.Search(len(h.Parts), func(i int) bool { return h.Parts[i].LastOffset >= offset })
	if i < len(h.Parts) && h.Parts[i].BaseOffset <= offset {
		return i
	}
	return -1
}

// tailFor returns the index in Tail of the segment holding offset, or -1.
func (h *Head) tailFor(offset int64) int {
	i := sort.Search(len(h.Tail), func(i int) bool { return h.Tail[i].LastOffset >= offset })
	if i < len(h.Tail) && h.Tail[i].BaseOffset <= offset {
		return i
	}
	return -1
}

func encodeFrame(magic [8]byte, v any) ([]byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, frameHead+len(body)+4)
	b = append(b, magic[:]...)
	b = binary.BigEndian.AppendUint16(b, manifestVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

func decodeFrame(what string, magic [8]byte, b []byte, v any) error {
	if len(b) < frameHead+4 {
		return corruptf("%s of %d bytes is too short", what, len(b))
	}
	if [8]byte(b[:8]) != magic {
		return corruptf("%s has bad magic %q", what, b[:8])
	}
	if ver := binary.BigEndian.Uint16(b[8:]); ver != manifestVersion {
		return corruptf("%s has unknown version %d", what, ver)
	}
	if n := binary.BigEndian.Uint32(b[10:]); int64(n) != int64(len(b)-frameHead-4) {
		return corruptf("%s says %d body bytes, has %d", what, n, len(b)-frameHead-4)
	}
	if sum, want := crc32.Checksum(b[:len(b)-4], castagnoli), binary.BigEndian.Uint32(b[len(b)-4:]); sum != want {
		return corruptf("%s crc %#08x, stored %#08x", what, sum, want)
	}
	if err := json.Unmarshal(b[frameHead:len(b)-4], v); err != nil {
		return corruptf("%s body: %v", what, err)
	}
	return nil
}

// EncodeHead and DecodeHead frame a manifest head. DecodeHead also checks
// that the segments follow on from each other.
func EncodeHead(h *Head) ([]byte, error) { return encodeFrame(headMagic, h) }

func DecodeHead(b []byte) (*Head, error) {
	h := &Head{}
	if err := decodeFrame("manifest head", headMagic, b, h); err != nil {
		return nil, err
	}
	next := int64(-1)
	check := func(base, last int64) error {
		if last < base || (next >= 0 && base != next) {
			return corruptf("manifest head: segment %d..%d does not follow %d", base, last, next-1)
		}
		next = last + 1
		return nil
	}
	for _, p := range h.Parts {
		if p.Count <= 0 || p.Skip < 0 || p.Skip >= p.Count {
			return nil, corruptf("manifest head: part %d counts %d skipping %d", p.Seq, p.Count, p.Skip)
		}
		if err := check(p.BaseOffset, p.LastOffset); err != nil {
			return nil, err
		}
	}
	for _, s := range h.Tail {
		if err := check(s.BaseOffset, s.LastOffset); err != nil {
			return nil, err
		}
	}
	if s := h.CleanScan; s != nil && (s.End <= h.CleanedTo || s.Next < 0 || s.Next > s.End) {
		return nil, corruptf("manifest head: cleaning scan to %d at %d, cleaned to %d", s.End, s.Next, h.CleanedTo)
	}
	return h, nil
}

// EncodePart and DecodePart frame a closed part.
func EncodePart(p *Part) ([]byte, error) { return encodeFrame(partMagic, p) }

func DecodePart(b []byte) (*Part, error) {
	p := &Part{}
	if err := decodeFrame("manifest part", partMagic, b, p); err != nil {
		return nil, err
	}
	for i := 1; i < len(p.Segments); i++ {
		if p.Segments[i].BaseOffset != p.Segments[i-1].LastOffset+1 {
			return nil, corruptf("manifest part %d: segment %d does not follow %d", p.Seq, p.Segments[i].BaseOffset, p.Segments[i-1].LastOffset)
		}
	}
	return p, nil
}
