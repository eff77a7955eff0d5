package tiering

// Reading a bucket's cold tier as a whole, without a broker: which
// partitions it holds and what their manifests say (strata bucket ls), and
// the walk VerifyBucket starts from. Nothing here writes: the functions take
// an objstore.Reader.
//
// The bucket is found by listing, not from cluster metadata: a tool run
// beside a cluster that lost its disks, or against a copy of a bucket, has
// only the keys (see doc.go for the layout).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
)

// partitionDir is one partition's place in the bucket as a listing found
// it: its manifest head (if any) and every other object under it.
type partitionDir struct {
	ref      PartitionRef
	manifest *objstore.ObjectInfo
	objects  []objstore.ObjectInfo // segments, parts and anything else, in key order
}

// bucketScan is a listing of the bucket (or of one topic's keys) sorted
// into partitions.
type bucketScan struct {
	dirs []*partitionDir // in key order
	// stray are keys under the listed prefix that fit no partition of the
	// layout: not <topic>/<topic id>/<partition>/....
	stray []objstore.ObjectInfo
	// listed counts every object the listing returned.
	listed int
}

// scanBucket lists every key under topic's prefix ("<topic>/"), or the
// whole store when topic is empty, and sorts them into partitions.
func scanBucket(ctx context.Context, r objstore.Reader, topic string) (*bucketScan, error) {
	prefix := ""
	if topic != "" {
		prefix = topic + "/"
	}
	s := &bucketScan{}
	byDir := map[PartitionRef]*partitionDir{}
	err := r.List(ctx, prefix, func(o objstore.ObjectInfo) error {
		s.listed++
		ref, rest, ok := splitKey(o.Key)
		if !ok {
			s.stray = append(s.stray, o)
			return nil
		}
		d := byDir[ref]
		if d == nil {
			d = &partitionDir{ref: ref}
			byDir[ref] = d
			s.dirs = append(s.dirs, d)
		}
		if rest == "manifest" {
			info := o
			d.manifest = &info
		} else {
			d.objects = append(d.objects, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tiering: list %q: %w", prefix, err)
	}
	// Listings come in key order, but "t/id/10/..." sorts before
	// "t/id/2/...": order partitions by number within a topic id.
	sort.SliceStable(s.dirs, func(i, j int) bool {
		a, b := s.dirs[i].ref, s.dirs[j].ref
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.TopicID != b.TopicID {
			return a.TopicID < b.TopicID
		}
		return a.Partition < b.Partition
	})
	return s, nil
}

// splitKey splits a key of the layout into its partition and the rest
// ("manifest", "segments/...", "parts/..."). The partition must be written
// as PartitionRef.dir writes it (decimal, no sign or leading zero), so
// that one partition has one directory.
func splitKey(key string) (ref PartitionRef, rest string, ok bool) {
	fields := strings.SplitN(key, "/", 4)
	if len(fields) != 4 || fields[0] == "" || fields[1] == "" || fields[3] == "" {
		return PartitionRef{}, "", false
	}
	p, err := strconv.ParseInt(fields[2], 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != fields[2] {
		return PartitionRef{}, "", false
	}
	return PartitionRef{Topic: fields[0], TopicID: fields[1], Partition: int32(p)}, fields[3], true
}

// readHead reads a manifest head checking only its frame (magic, version,
// length, CRC) and JSON, not that its segments follow on, as DecodeHead
// also does: a verifier reports each segment that does not, rather than
// stopping at the first. It returns the ETag too, to tell later whether
// the head changed.
func readHead(ctx context.Context, r objstore.Reader, key string) (*Head, string, error) {
	data, info, err := r.Get(ctx, key)
	if err != nil {
		return nil, "", err
	}
	h := &Head{}
	if err := decodeFrame("manifest head", headMagic, data, h); err != nil {
		return nil, "", err
	}
	return h, info.ETag, nil
}

// readPart reads a closed part, like readHead without the order check.
func readPart(ctx context.Context, r objstore.Reader, key string) (*Part, error) {
	data, _, err := r.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	p := &Part{}
	if err := decodeFrame("manifest part", partMagic, data, p); err != nil {
		return nil, err
	}
	return p, nil
}

// isDataProblem tells an error that is about what the bucket holds (an
// object missing or failing its checks) from one of reaching it, which
// makes a tool stop rather than report the bucket as damaged.
func isDataProblem(err error) bool {
	return errors.Is(err, ErrCorrupt) || errors.Is(err, objstore.ErrNotFound)
}

// PartitionSummary is a partition's cold tier as its manifest describes it.
type PartitionSummary struct {
	Ref PartitionRef
	// Generation and LeaderEpoch are the head's: commits so far, and the
	// epoch of the leader that wrote it last.
	Generation  uint64
	LeaderEpoch int32
	// Segments and Bytes count the live segments and their objects' bytes.
	Segments int
	Bytes    int64
	// StartOffset and EndOffset bound the offsets held: from StartOffset up
	// to, not including, EndOffset; both -1 when the cold tier is empty.
	StartOffset, EndOffset int64
	// MinTs and MaxTs are the smallest and largest record timestamps (ms)
	// the segments hold, as far as batch headers tell; meaningless when
	// Segments is 0.
	MinTs, MaxTs int64
	// Err says why the manifest (head or a closed part) could not be read
	// or decoded; the fields above hold what could be.
	Err error
}

// ListBucket summarises every partition whose manifest head the bucket
// holds, or only topic's when it is not empty, in topic, topic id and
// partition order. It reads each head and its closed parts (the time range
// needs every segment's), never a segment object. A manifest that is
// missing or damaged is reported in its summary's Err; an error reaching
// the store is returned.
func ListBucket(ctx context.Context, r objstore.Reader, topic string) ([]PartitionSummary, error) {
	scan, err := scanBucket(ctx, r, topic)
	if err != nil {
		return nil, err
	}
	var out []PartitionSummary
	for _, d := range scan.dirs {
		if d.manifest == nil {
			continue
		}
		s, err := summarise(ctx, r, d)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func summarise(ctx context.Context, r objstore.Reader, d *partitionDir) (PartitionSummary, error) {
	s := PartitionSummary{Ref: d.ref, StartOffset: -1, EndOffset: -1, MinTs: -1, MaxTs: -1}
	h, _, err := readHead(ctx, r, d.manifest.Key)
	if err != nil {
		if !isDataProblem(err) {
			return s, fmt.Errorf("tiering: read manifest %s: %w", d.manifest.Key, err)
		}
		s.Err = fmt.Errorf("manifest head: %w", err)
		return s, nil
	}
	s.Generation, s.LeaderEpoch = h.Generation, h.LeaderEpoch
	s.Segments, s.Bytes = h.Stats()
	if h.Empty() {
		return s, nil
	}
	s.StartOffset, s.EndOffset = h.StartOffset(), h.EndOffset()
	first := true
	add := func(seg SegmentRef) {
		if first || seg.MinTs < s.MinTs {
			s.MinTs = seg.MinTs
		}
		if first || seg.MaxTs > s.MaxTs {
			s.MaxTs = seg.MaxTs
		}
		first = false
	}
	for _, ref := range h.Parts {
		p, err := readPart(ctx, r, ref.Key)
		if err != nil {
			if !isDataProblem(err) {
				return s, fmt.Errorf("tiering: read manifest part %s: %w", ref.Key, err)
			}
			s.Err = fmt.Errorf("manifest part %s: %w", ref.Key, err)
			continue
		}
		if ref.Skip >= 0 && ref.Skip < len(p.Segments) {
			for _, seg := range p.Segments[ref.Skip:] {
				add(seg)
			}
		}
	}
	for _, seg := range h.Tail {
		add(seg)
	}
	return s, nil
}

// HeadListing is one partition's manifest head as a listing of the bucket
// found it.
type HeadListing struct {
	Ref PartitionRef
	// Head is nil when Err says why it could not be read or decoded.
	Head *Head
	// ModTime is when the head was last written, to tell which of two
	// topic ids under one name is the live one.
	ModTime time.Time
	Err     error
}

// ListHeads lists the bucket (or only topic's keys, when it is not empty)
// and reads every partition's manifest head, in topic, topic id and
// partition order: the catalog of a reader that serves the bucket without
// cluster metadata (a read-only replica broker). It reads no closed part
// and no segment. A head that is damaged is reported in its Err (leniently,
// as strata bucket ls does: one bad partition hides no other); an error
// reaching the store is returned.
func ListHeads(ctx context.Context, r objstore.Reader, topic string) ([]HeadListing, error) {
	scan, err := scanBucket(ctx, r, topic)
	if err != nil {
		return nil, err
	}
	var out []HeadListing
	for _, d := range scan.dirs {
		if d.manifest == nil {
			continue
		}
		l := HeadListing{Ref: d.ref, ModTime: d.manifest.ModTime}
		h, _, err := readHead(ctx, r, d.manifest.Key)
		switch {
		case err == nil:
			l.Head = h
		case isDataProblem(err):
			l.Err = fmt.Errorf("manifest head %s: %w", d.manifest.Key, err)
		default:
			return nil, fmt.Errorf("tiering: read manifest %s: %w", d.manifest.Key, err)
		}
		out = append(out, l)
	}
	return out, nil
}
