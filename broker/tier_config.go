package broker

// A topic's settings in the bucket. A restore from the bucket alone takes
// a topic's settings from its manifests, so an alter is not done until
// they are there: a restore that brought back an older retention.ms would
// delete history the user meant to keep. Each partition's leader writes
// them to its manifest (tierPassErr, tiering.Committer.SetConfig); the
// broker answering the alter reads the heads back from the bucket, which
// any broker can, and answers success only once every one carries them.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/tiering"
)

const (
	// configWaitDefault bounds the wait for the bucket when the request
	// carries no deadline.
	configWaitDefault = 30 * time.Second
	// configWaitPoll is how often the heads still lacking the settings
	// are read again; a leader writes them within one tiering pass.
	configWaitPoll = 100 * time.Millisecond
	// configReads bounds the heads read at once.
	configReads = 16
)

// configAnswerBy is when a wait inside a request must end so that its
// answer still reaches the caller before the request's deadline: a tenth
// of the time left is kept for that, at most a second.
func configAnswerBy(ctx context.Context, now time.Time) time.Time {
	deadline, ok := ctx.Deadline()
	if !ok {
		return now.Add(configWaitDefault)
	}
	left := deadline.Sub(now)
	return deadline.Add(-min(left/10, time.Second))
}

// awaitConfigInBucket waits until the manifest head of every partition of
// the topic (name, with id) records its settings as this broker's
// metadata holds them (after the alter), and its partition count, in a
// head written in the partition's current leader epoch. The epoch
// matters: a leader of that epoch that wrote these settings had applied
// the alter, and every later manifest write carries settings at least as
// new (a leader's metadata only moves forward, a later leader is elected
// after the alter, and deposed leaders are fenced), so once seen they
// stay. A topic without a cold tier, or a broker without an object store,
// has nothing to wait for.
func (b *Broker) awaitConfigInBucket(ctx context.Context, name, id string) error {
	if b.store == nil {
		return nil
	}
	wctx, cancel := context.WithDeadline(ctx, configAnswerBy(ctx, time.Now()))
	defer cancel()
	var pending []int32 // nil: every partition
	for {
		t, ok := b.meta.Metadata().Topic(name)
		if !ok || t.ID != id {
			return refuse(ReasonTopicNotFound, nil, "topic %q was deleted while its settings were being written to the bucket", name)
		}
		if cfg, err := b.defaults.With(t.Config); err == nil && !cfg.RemoteStorageEnable {
			return nil
		}
		if pending == nil {
			for _, info := range t.Partitions {
				pending = append(pending, info.Partition)
			}
		}
		why := b.configMissing(wctx, t, pending)
		if len(why) == 0 {
			return nil
		}
		pending = slices.Sorted(maps.Keys(why))
		select {
		case <-wctx.Done():
			return configNotInBucket(name, pending, why)
		case <-time.After(configWaitPoll):
		}
	}
}

// configMissing reads the heads of the given partitions of t and returns,
// for those that do not carry t's settings yet, why.
func (b *Broker) configMissing(ctx context.Context, t *cluster.TopicInfo, partitions []int32) map[int32]string {
	var (
		mu  sync.Mutex
		out = map[int32]string{}
		wg  sync.WaitGroup
		sem = make(chan struct{}, configReads)
	)
	for _, id := range partitions {
		info, ok := t.Partition(id)
		if !ok {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if why := b.headLacksConfig(ctx, t, info); why != "" {
				mu.Lock()
				out[info.Partition] = why
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return out
}

// headLacksConfig says why a partition's manifest head in the bucket does
// not (yet) carry t's settings, or "" when it does.
func (b *Broker) headLacksConfig(ctx context.Context, t *cluster.TopicInfo, info cluster.PartitionInfo) string {
	if info.Leader == cluster.NoLeader {
		return "no leader"
	}
	ref := tiering.PartitionRef{Topic: t.Name, TopicID: t.ID, Partition: info.Partition}
	h, _, err := tiering.LoadHead(ctx, b.store, ref)
	switch {
	case err != nil:
		return "its manifest could not be read: " + oneLine(err.Error(), 160)
	case h == nil || h.LeaderEpoch != info.LeaderEpoch:
		return fmt.Sprintf("its leader, broker %d, has not taken its manifest over yet", info.Leader)
	case !maps.Equal(h.Config, t.Config) || h.Partitions != int32(len(t.Partitions)):
		return fmt.Sprintf("its leader, broker %d, has not written them yet", info.Leader)
	}
	return ""
}

// configNotInBucket is the answer to an alter whose settings are in force
// but not yet in every manifest.
func configNotInBucket(name string, partitions []int32, why map[int32]string) *Error {
	parts := make([]string, len(partitions))
	ids := make([]string, len(partitions))
	for i, p := range partitions {
		parts[i] = fmt.Sprintf("%d (%s)", p, why[p])
		ids[i] = strconv.Itoa(int(p))
	}
	return refuse(ReasonTimeout, nil,
		"the new settings of topic %q are in the cluster metadata and in force, but not yet in the bucket for partition %s: a restore from the bucket now would bring back the old ones. "+
			"Each partition's leader writes them to its manifest as soon as it can reach the object store; retry the alter to wait for that (it changes nothing twice), and see `strata topic describe %s` for tiering errors",
		name, strings.Join(parts, ", "), name).with("partitions", strings.Join(ids, ","))
}

// oneLine folds msg (a store's error can run over lines) into one line of
// at most n bytes, for a message that names several of them.
func oneLine(msg string, n int) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) <= n {
		return msg
	}
	cut := 0
	for i := range msg { // at a rune's start, never inside one
		if i > n {
			break
		}
		cut = i
	}
	return msg[:cut] + "..."
}

// awaitTierLoaded waits, at most for within, until the tiered partitions
// of topic id this broker leads have read their cold tiers (a new
// leader's tiering pass takes its manifest over at once, see reconcile),
// so that the description a create answers with shows figures rather than
// "loading". A store that does not answer only leaves them loading.
func (b *Broker) awaitTierLoaded(ctx context.Context, id string, within time.Duration) {
	if b.store == nil {
		return
	}
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		loading := false
		for _, p := range b.partitions() {
			if p.topicID == id && p.isLeader() && p.remote(b) && !p.tier.Load().loaded {
				loading = true
				break
			}
		}
		if !loading {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}
