package tiering

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/strata-log/strata/tiering/objstore"
)

// Retention is a topic's total retention: how long and how much to keep,
// both tiers together. -1 means unbounded.
type Retention struct {
	Ms    int64
	Bytes int64
}

// RetentionCut decides where total retention cuts the cold tier: the offset
// before which every segment goes. A segment goes when its newest record is
// older than Ms, or while the bytes of both tiers exceed Bytes (localBytes
// are the local bytes the cold tier does not hold); oldest first, stopping
// at the first segment that stays. It returns -1 when nothing goes.
func RetentionCut(ctx context.Context, c *Committer, r Retention, localBytes int64, now time.Time) (int64, error) {
	_, coldBytes := c.Head().Stats()
	total := coldBytes + localBytes
	cut := int64(-1)
	err := c.Segments(ctx, func(s SegmentRef) bool {
		expired := r.Ms >= 0 && s.MaxTs < now.UnixMilli()-r.Ms
		tooBig := r.Bytes >= 0 && total > r.Bytes
		if !expired && !tooBig {
			return false
		}
		total -= s.Size
		cut = s.LastOffset + 1
		return true
	})
	return cut, err
}

// ApplyRetention commits the removal of the cold segments below cut and then
// deletes their objects (and closed parts left empty). Objects whose delete
// fails are left for CollectOrphans; the manifest no longer names them.
func ApplyRetention(ctx context.Context, c *Committer, cut int64) ([]SegmentRef, error) {
	removed, parts, err := c.TrimBefore(ctx, cut)
	if err != nil {
		return nil, err
	}
	for _, s := range removed {
		c.store.Delete(ctx, s.Key)
	}
	for _, key := range parts {
		c.store.Delete(ctx, key)
	}
	return removed, nil
}

// CollectOrphans deletes the partition's segment and part objects that the
// manifest does not name and that are older than grace: uploads whose
// commit never happened (a crash, a lost race, a deposed leader) and
// deletes that failed. The grace period spares uploads still in flight.
// It judges by the head read afresh, not the one c last saw, which may be
// missing a commit whose answer was lost or a successor's (which fences c).
func CollectOrphans(ctx context.Context, c *Committer, grace time.Duration, now time.Time) ([]string, error) {
	if err := c.reload(ctx); err != nil {
		return nil, err
	}
	named := map[string]bool{}
	for _, p := range c.Head().Parts {
		named[p.Key] = true
	}
	for _, r := range c.Head().Retired {
		named[r.Key] = true // CollectRetired's, after their own grace
	}
	if err := c.Segments(ctx, func(s SegmentRef) bool { named[s.Key] = true; return true }); err != nil {
		return nil, err
	}
	var orphans []string
	for _, prefix := range []string{c.ref.SegmentPrefix(), c.ref.PartPrefix()} {
		err := c.store.List(ctx, prefix, func(o objstore.ObjectInfo) error {
			if !named[o.Key] && now.Sub(o.ModTime) > grace {
				orphans = append(orphans, o.Key)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("tiering: list %s: %w", prefix, err)
		}
	}
	var deleted []string
	for _, key := range orphans {
		if err := c.store.Delete(ctx, key); err == nil {
			deleted = append(deleted, key)
		}
	}
	return deleted, nil
}

// DeletePartition removes a partition's cold tier: the head first (so the
// cold tier is gone at once), then every object under it.
func DeletePartition(ctx context.Context, store objstore.Bucket, ref PartitionRef) error {
	if err := store.Delete(ctx, ref.ManifestKey()); err != nil {
		return fmt.Errorf("tiering: delete manifest of %s: %w", ref.dir(), err)
	}
	return deletePrefix(ctx, store, ref.dir()+"/")
}

// DeleteTopic removes every partition's cold tier of one topic id.
func DeleteTopic(ctx context.Context, store objstore.Bucket, topic, topicID string) error {
	prefix := topic + "/" + topicID + "/"
	// Heads first, so no partition looks alive while its objects go.
	var heads []string
	err := store.List(ctx, prefix, func(o objstore.ObjectInfo) error {
		if strings.HasSuffix(o.Key, "/manifest") {
			heads = append(heads, o.Key)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tiering: list %s: %w", prefix, err)
	}
	for _, k := range heads {
		if err := store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return deletePrefix(ctx, store, prefix)
}

func deletePrefix(ctx context.Context, store objstore.Bucket, prefix string) error {
	var keys []string
	if err := store.List(ctx, prefix, func(o objstore.ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
		return fmt.Errorf("tiering: list %s: %w", prefix, err)
	}
	for _, k := range keys {
		if err := store.Delete(ctx, k); err != nil {
			return fmt.Errorf("tiering: delete %s: %w", k, err)
		}
	}
	return nil
}
