package broker

// Switching a topic's cold tier off. A topic whose history is in the
// bucket keeps it there: Strata cannot bring cold segments back to local
// disk, so remote.storage.enable=false on such a topic would leave every
// offset below the local start to the bucket alone. As Kafka does since
// KIP-950, an alter that would do that is refused with the reason and
// what to do (checkRemoteDisable). Settings that cannot be refused when
// they change (broker topic defaults read at start, an alter that races an
// upload) cannot strand the history either: a partition whose bucket holds
// records keeps its cold tier readable, and under retention, whatever the
// setting says (partition.remote); only its uploads stop.

import (
	"context"
	"fmt"
	"strings"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/tiering"
)

// checkRemoteDisable refuses an alter that turns remote storage off (next)
// for topic t while its cold tier holds records, or while the bucket
// cannot say whether it does. A broker without an object store has no
// cold tier to strand and cannot look, so it lets the change through.
func (b *Broker) checkRemoteDisable(ctx context.Context, t *cluster.TopicInfo, next config.Topic) error {
	prev, err := b.defaults.With(t.Config)
	if err != nil {
		prev = b.defaults
	}
	if !prev.RemoteStorageEnable || next.RemoteStorageEnable || b.store == nil {
		return nil
	}
	var held []string
	for _, info := range t.Partitions {
		ref := tiering.PartitionRef{Topic: t.Name, TopicID: t.ID, Partition: info.Partition}
		h, _, err := tiering.LoadHead(ctx, b.store, ref)
		if err != nil {
			return refuse(ReasonStorageError, err,
				"remote.storage.enable=false for topic %q: cannot tell whether the object store holds records of partition %d, and switching remote storage off would leave them unreadable: %v; retry once the store answers",
				t.Name, info.Partition, oneLine(err.Error(), 160)).with("key", "remote.storage.enable").with("value", "false")
		}
		if h != nil && !h.Empty() {
			held = append(held, fmt.Sprintf("%d (offsets %d to %d)", info.Partition, h.StartOffset(), h.EndOffset()-1))
		}
	}
	if len(held) == 0 {
		return nil
	}
	return refuse(ReasonInvalidConfig, nil,
		"remote.storage.enable=false refused for topic %q: the object store holds acknowledged records of partition %s, and a topic without remote storage would stop reading them (Strata cannot move them back to local disk). "+
			"Keep remote.storage.enable=true; to retire the cold tier, let retention.ms or retention.bytes remove that history first (`strata topic describe %s` shows no cold segments then), or delete the topic",
		t.Name, strings.Join(held, ", "), t.Name).
		with("key", "remote.storage.enable").with("value", "false").with("allowed", "true while the topic's cold tier holds records")
}
