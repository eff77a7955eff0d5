package tiering

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
)

// ErrFenced: the manifest was committed by a leader with a newer epoch; this
// writer has been deposed and must stop.
var ErrFenced = errors.New("tiering: fenced by a newer leader epoch")

// ErrOutcomeUnknown: a write of the manifest head failed without saying
// whether it landed (its answer was lost), and the head could not be read
// back to tell. The change may be in the cold tier or not; the committer
// reads the head again before its next change.
var ErrOutcomeUnknown = errors.New("tiering: manifest commit outcome unknown")

// errAlreadyCommitted tells commit that the change is in the head already.
var errAlreadyCommitted = errors.New("tiering: already committed")

// PartitionRef names a partition's place in the bucket.
type PartitionRef struct {
	Topic     string
	TopicID   string
	Partition int32
}

func (p PartitionRef) dir() string {
	return fmt.Sprintf("%s/%s/%d", p.Topic, p.TopicID, p.Partition)
}

// ManifestKey is the key of the partition's manifest head.
func (p PartitionRef) ManifestKey() string { return p.dir() + "/manifest" }

// SegmentPrefix and PartPrefix hold the partition's segment and part objects.
func (p PartitionRef) SegmentPrefix() string { return p.dir() + "/segments/" }
func (p PartitionRef) PartPrefix() string    { return p.dir() + "/parts/" }

func (p PartitionRef) newSegmentKey(base int64, epoch int32) string {
	return fmt.Sprintf("%s%020d-%d-%s.seg", p.SegmentPrefix(), base, epoch, randomSuffix())
}

func (p PartitionRef) newPartKey(seq uint64) string {
	return fmt.Sprintf("%s%020d-%s.part", p.PartPrefix(), seq, randomSuffix())
}

func randomSuffix() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LoadHead reads a partition's manifest head and its ETag; a partition with
// no cold tier yet gives (nil, "", nil).
func LoadHead(ctx context.Context, r objstore.Reader, p PartitionRef) (*Head, string, error) {
	data, info, err := r.Get(ctx, p.ManifestKey())
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, "", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("tiering: read manifest of %s: %w", p.dir(), err)
	}
	h, err := DecodeHead(data)
	if err != nil {
		return nil, "", fmt.Errorf("tiering: manifest of %s: %w", p.dir(), err)
	}
	return h, info.ETag, nil
}

// LoadPart reads a closed part.
func LoadPart(ctx context.Context, r objstore.Reader, key string) (*Part, error) {
	data, _, err := r.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("tiering: read manifest part %s: %w", key, err)
	}
	p, err := DecodePart(data)
	if err != nil {
		return nil, fmt.Errorf("tiering: manifest part %s: %w", key, err)
	}
	return p, nil
}

// Committer changes one partition's manifest on behalf of its leader in one
// leader epoch. Every commit is a conditional write of the head against the
// version this committer last saw, so two writers can never both succeed on
// the same version, and a head written under a newer epoch fences it
// (ErrFenced). It is not safe for concurrent use: the leader's uploader
// owns it.
type Committer struct {
	store objstore.Bucket
	ref   PartitionRef
	epoch int32
	head  *Head
	etag  string
	parts *partCache
	// unsure: the last commit may have landed unseen, so head may be
	// stale until it is read again.
	unsure bool
	// topic is what every commit records of the topic (SetConfig); nil
	// until the leader has said, and commits then keep the head's.
	topic *topicRecord
}

// topicRecord is what a manifest head records of its topic, so the topic
// can be restored from the bucket alone.
type topicRecord struct {
	config     map[string]string
	partitions int32
}

// carriedBy reports whether h records t already.
func (t *topicRecord) carriedBy(h *Head) bool {
	return maps.Equal(h.Config, t.config) && h.Partitions == t.partitions
}

// NewCommitter takes over the partition's manifest for a leader in epoch.
// From a fresh read of the head it writes the head back stamped with epoch
// (a conditional write, retried on a lost race), unless it carries epoch
// already: from then on every commit of an older leader fails its
// condition, finds the newer epoch and stops with ErrFenced. A deposed
// leader that can still reach the bucket therefore cannot change the cold
// tier once its successor holds a committer, and the successor starts from
// everything its predecessor committed. A head with a newer epoch fences
// this one at once.
func NewCommitter(ctx context.Context, store objstore.Bucket, ref PartitionRef, epoch int32) (*Committer, error) {
	c := &Committer{store: store, ref: ref, epoch: epoch, parts: newPartCache()}
	if err := c.reload(ctx); err != nil {
		return nil, err
	}
	if c.head.LeaderEpoch == epoch && c.etag != "" {
		return c, nil
	}
	if err := c.commit(ctx, func(*Head) error { return nil }); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Committer) reload(ctx context.Context) error {
	h, etag, err := LoadHead(ctx, c.store, c.ref)
	if err != nil {
		return err
	}
	if h == nil {
		h = &Head{Topic: c.ref.Topic, TopicID: c.ref.TopicID, Partition: c.ref.Partition}
	}
	if h.TopicID != c.ref.TopicID || h.Partition != c.ref.Partition {
		return fmt.Errorf("tiering: manifest at %s belongs to topic id %s partition %d", c.ref.ManifestKey(), h.TopicID, h.Partition)
	}
	if h.LeaderEpoch > c.epoch {
		return fmt.Errorf("%w: manifest of %s written in epoch %d, this leader is in %d", ErrFenced, c.ref.dir(), h.LeaderEpoch, c.epoch)
	}
	c.head, c.etag, c.unsure = h, etag, false
	return nil
}

// settle reads the head again if the last commit's outcome is unknown.
func (c *Committer) settle(ctx context.Context) error {
	if !c.unsure {
		return nil
	}
	return c.reload(ctx)
}

// Head returns the last committed head. The caller must not modify it.
func (c *Committer) Head() *Head { return c.head }

// Ref is the partition this committer writes.
func (c *Committer) Ref() PartitionRef { return c.ref }

// Store is the bucket this committer writes.
func (c *Committer) Store() objstore.Bucket { return c.store }

// Epoch is the leader epoch this committer writes in.
func (c *Committer) Epoch() int32 { return c.epoch }

// SetConfig makes the topic's settings (its overrides) and partition count
// what this and every later commit records, and commits a head carrying
// them now unless the head carries them already. A topic's settings thus
// reach the bucket when they change, not with the next upload, and no
// later commit (an upload, retention) writes older ones back. The commit
// is fenced and settled like every other: a deposed leader's fails with
// ErrFenced, and one whose answer was lost is found landed or not by
// reading the head back (ErrOutcomeUnknown until that is possible).
func (c *Committer) SetConfig(ctx context.Context, config map[string]string, partitions int32) error {
	c.topic = &topicRecord{config: maps.Clone(config), partitions: partitions}
	return c.commit(ctx, func(h *Head) error {
		if c.topic.carriedBy(h) {
			return errAlreadyCommitted
		}
		return nil // commit stamps the settings
	})
}

// Append commits an uploaded segment: it must start where the cold tier
// ends (or anywhere, when it is empty). config and partitions are the
// topic's, recorded for restore as SetConfig records them; partitions 0
// leaves what the committer records as it is.
func (c *Committer) Append(ctx context.Context, seg SegmentRef, config map[string]string, partitions int32) error {
	if partitions > 0 {
		c.topic = &topicRecord{config: maps.Clone(config), partitions: partitions}
	}
	return c.commit(ctx, func(h *Head) error {
		if landed, err := c.holds(ctx, h, seg); err != nil {
			return err
		} else if landed {
			return errAlreadyCommitted // an earlier attempt landed; its answer was lost
		}
		if end := h.EndOffset(); end >= 0 && seg.BaseOffset != end {
			return fmt.Errorf("tiering: segment %d..%d does not start at the cold tier's end %d", seg.BaseOffset, seg.LastOffset, end)
		}
		h.Tail = append(h.Tail, seg)
		if len(h.Tail) < partSegments {
			return nil
		}
		// The tail is full: it becomes a closed part of its own.
		if err := c.closePart(ctx, h, h.Tail); err != nil {
			return err
		}
		h.Tail = nil
		return nil
	})
}

// closePart writes segs as the head's next closed part (a new object,
// never overwritten) and names it in h; the head's commit publishes it.
func (c *Committer) closePart(ctx context.Context, h *Head, segs []SegmentRef) error {
	part := &Part{Seq: h.NextSeq, Segments: segs}
	key := c.ref.newPartKey(part.Seq)
	data, err := EncodePart(part)
	if err != nil {
		return err
	}
	if _, err := c.store.Put(ctx, key, data, objstore.WriteOptions{IfAbsent: true}); err != nil {
		return fmt.Errorf("tiering: write manifest part: %w", err)
	}
	c.parts.put(key, part)
	h.Parts = append(h.Parts, partRef(key, part, 0))
	h.NextSeq++
	return nil
}

// holds reports whether h lists seg as its last segment.
func (c *Committer) holds(ctx context.Context, h *Head, seg SegmentRef) (bool, error) {
	if h.EndOffset() != seg.LastOffset+1 {
		return false, nil
	}
	if n := len(h.Tail); n > 0 {
		return h.Tail[n-1].Key == seg.Key, nil
	}
	last := h.Parts[len(h.Parts)-1]
	p, err := c.part(ctx, last.Key)
	if err != nil {
		return false, err
	}
	return p.Segments[len(p.Segments)-1].Key == seg.Key, nil
}

func partRef(key string, p *Part, skip int) PartRef {
	live := p.Segments[skip:]
	r := PartRef{Key: key, Seq: p.Seq, Count: len(p.Segments), Skip: skip, BaseOffset: live[0].BaseOffset, LastOffset: live[len(live)-1].LastOffset, MaxTs: live[0].MaxTs}
	for _, s := range live {
		r.MaxTs = max(r.MaxTs, s.MaxTs)
		r.Bytes += s.Size
	}
	return r
}

// TrimBefore commits the removal of every segment that ends below offset,
// oldest first, and returns them; their objects (and parts that emptied)
// are for the caller to delete once this returns, as the manifest no longer
// names them.
func (c *Committer) TrimBefore(ctx context.Context, offset int64) (removed []SegmentRef, orphanParts []string, err error) {
	err = c.commit(ctx, func(h *Head) error {
		removed, orphanParts = nil, nil
		for len(h.Parts) > 0 && h.Parts[0].BaseOffset < offset {
			ref := h.Parts[0]
			part, err := c.part(ctx, ref.Key)
			if err != nil {
				return err
			}
			skip := ref.Skip
			for skip < len(part.Segments) && part.Segments[skip].LastOffset < offset {
				removed = append(removed, part.Segments[skip])
				skip++
			}
			if skip < len(part.Segments) {
				h.Parts[0] = partRef(ref.Key, part, skip)
				return nil
			}
			orphanParts = append(orphanParts, ref.Key)
			h.Parts = h.Parts[1:]
		}
		for len(h.Tail) > 0 && h.Tail[0].LastOffset < offset {
			removed = append(removed, h.Tail[0])
			h.Tail = h.Tail[1:]
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return removed, orphanParts, nil
}

// commit applies change to a copy of the head and writes it conditionally,
// with the topic's settings as SetConfig last gave them. A failed write
// reloads the head: a newer epoch fences this committer; the same epoch
// means an earlier attempt of ours landed after all (its answer was lost)
// or a retry is due, so the change is applied again to the fresh head, at
// most a few times. A write whose answer was lost and whose head cannot be
// read back leaves the outcome unknown (ErrOutcomeUnknown).
func (c *Committer) commit(ctx context.Context, change func(h *Head) error) error {
	if err := c.settle(ctx); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		next := cloneHead(c.head)
		if err := change(next); errors.Is(err, errAlreadyCommitted) {
			return nil
		} else if err != nil {
			return err
		}
		if t := c.topic; t != nil {
			next.Config, next.Partitions = maps.Clone(t.config), t.partitions
		}
		next.Generation++
		next.LeaderEpoch = c.epoch
		data, err := EncodeHead(next)
		if err != nil {
			return err
		}
		opts := objstore.WriteOptions{IfMatch: c.etag}
		if c.etag == "" {
			opts = objstore.WriteOptions{IfAbsent: true}
		}
		info, err := c.store.Put(ctx, c.ref.ManifestKey(), data, opts)
		if err == nil {
			c.head, c.etag = next, info.ETag
			return nil
		}
		// A refused write changed nothing; any other failure may have
		// landed with its answer lost, until a read of the head tells.
		c.unsure = !errors.Is(err, objstore.ErrPreconditionFailed)
		if attempt >= 3 {
			return c.commitError(err)
		}
		if rerr := c.reload(ctx); rerr != nil {
			if c.unsure {
				return c.commitError(errors.Join(err, rerr))
			}
			return rerr
		}
	}
}

func (c *Committer) commitError(err error) error {
	if c.unsure {
		return fmt.Errorf("tiering: commit manifest of %s: %w: %w", c.ref.dir(), ErrOutcomeUnknown, err)
	}
	return fmt.Errorf("tiering: commit manifest of %s: %w", c.ref.dir(), err)
}

func (c *Committer) part(ctx context.Context, key string) (*Part, error) {
	if p, ok := c.parts.get(key); ok {
		return p, nil
	}
	p, err := LoadPart(ctx, c.store, key)
	if err != nil {
		return nil, err
	}
	c.parts.put(key, p)
	return p, nil
}

// Segments calls fn for every live segment, oldest first, until it returns
// false.
func (c *Committer) Segments(ctx context.Context, fn func(SegmentRef) bool) error {
	return forEachSegment(ctx, c.head, c.part, fn)
}

// ForEachSegment calls fn for every live segment h lists, oldest first,
// until it returns false, reading the closed parts from r: for readers of a
// manifest that hold no committer (tools, tests).
func ForEachSegment(ctx context.Context, r objstore.Reader, h *Head, fn func(SegmentRef) bool) error {
	return forEachSegment(ctx, h, func(ctx context.Context, key string) (*Part, error) { return LoadPart(ctx, r, key) }, fn)
}

func forEachSegment(ctx context.Context, h *Head, load func(context.Context, string) (*Part, error), fn func(SegmentRef) bool) error {
	for _, ref := range h.Parts {
		p, err := load(ctx, ref.Key)
		if err != nil {
			return err
		}
		for _, s := range p.Segments[ref.Skip:] {
			if !fn(s) {
				return nil
			}
		}
	}
	for _, s := range h.Tail {
		if !fn(s) {
			return nil
		}
	}
	return nil
}

func cloneHead(h *Head) *Head {
	c := *h
	c.Parts = slices.Clone(h.Parts)
	c.Tail = slices.Clone(h.Tail)
	c.Retired = slices.Clone(h.Retired)
	c.CleanPasses = slices.Clone(h.CleanPasses)
	if h.CleanScan != nil {
		s := *h.CleanScan
		c.CleanScan = &s
	}
	c.Config = maps.Clone(h.Config)
	return &c
}

// partCache keeps closed parts, which never change, by key.
type partCache struct {
	mu    sync.Mutex
	parts map[string]*Part
}

func newPartCache() *partCache { return &partCache{parts: map[string]*Part{}} }

func (pc *partCache) get(key string) (*Part, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	p, ok := pc.parts[key]
	return p, ok
}

func (pc *partCache) put(key string, p *Part) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.parts[key] = p
}

// deleteTimeout bounds a best-effort delete done on the way out of a failed
// operation.
const deleteTimeout = 10 * time.Second
