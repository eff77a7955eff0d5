package console

// The topics views: the list, with each topic's bytes in both tiers, and
// one topic's partitions: hot and cold bytes as bars, segment counts,
// upload lag and recovery point, under its retention tiers. The figures
// are the serving broker's (partitions it holds no replica of show the
// metadata alone), as `strata topic describe` shows them.

import (
	"net/http"
	"sort"

	"github.com/strata-log/strata/broker"
)

type topicsData struct {
	Topics []topicRow
	// MaxBytes is the largest topic's bytes in both tiers: the bars' full
	// width.
	MaxBytes int64
}

type topicRow struct {
	Name              string
	Partitions        int32
	ReplicationFactor int32
	HotBytes          int64
	ColdBytes         int64
	HotSegments       int64
	ColdSegments      int64
	UploadLagBytes    int64
	UnderReplicated   int
	Offline           int
}

func (c *console) topicsView(r *http.Request, v *viewer) (view, error) {
	var d topicsData
	for _, t := range c.src.ListTopics() {
		if !v.seesTopic(t.Name) {
			continue
		}
		row := topicRow{Name: t.Name, Partitions: t.Partitions, ReplicationFactor: t.ReplicationFactor}
		if desc, err := c.src.DescribeTopic(t.Name); err == nil {
			for _, p := range desc.Partitions {
				row.HotBytes += p.LocalBytes
				row.ColdBytes += p.ColdBytes
				row.HotSegments += int64(p.LocalSegments)
				row.ColdSegments += int64(p.ColdSegments)
				row.UploadLagBytes += p.UploadLagBytes
				switch {
				case p.Leader < 0:
					row.Offline++
				case len(p.ISR) < len(p.Replicas):
					row.UnderReplicated++
				}
			}
		}
		d.MaxBytes = max(d.MaxBytes, row.HotBytes+row.ColdBytes)
		d.Topics = append(d.Topics, row)
	}
	sort.Slice(d.Topics, func(i, j int) bool { return d.Topics[i].Name < d.Topics[j].Name })
	return view{Template: "topics", Title: "Topics", Nav: "topics", Live: true, Data: d}, nil
}

// retentionKeys are the settings of the tiers, in the order shown.
var retentionKeys = []string{"remote.storage.enable", "local.retention.ms", "local.retention.bytes", "retention.ms", "retention.bytes", "segment.bytes", "remote.max.lag.ms"}

type topicData struct {
	Name      string
	ID        string
	BrokerID  int32
	Retention []setting
	Other     []setting
	Parts     []partitionRow
	// MaxBytes is the largest partition's bytes in both tiers.
	MaxBytes int64
}

type setting struct {
	Key, Value string
	Override   bool
}

type partitionRow struct {
	broker.PartitionDescription
	// RecoveryPoint is where the cold tier ends: the offset a restore from
	// the bucket alone brings back.
	RecoveryPoint string
}

func (c *console) topicView(r *http.Request, v *viewer) (view, error) {
	name := r.PathValue("topic")
	desc, err := c.describeTopic(v, name)
	if err != nil {
		return view{}, err
	}
	d := topicData{Name: desc.Name, ID: desc.ID}
	shown := map[string]bool{}
	for _, k := range retentionKeys {
		if val, ok := desc.Config[k]; ok {
			_, over := desc.Overrides[k]
			d.Retention = append(d.Retention, setting{k, val, over})
			shown[k] = true
		}
	}
	for k, val := range desc.Config {
		if !shown[k] {
			_, over := desc.Overrides[k]
			d.Other = append(d.Other, setting{k, val, over})
		}
	}
	sort.Slice(d.Other, func(i, j int) bool { return d.Other[i].Key < d.Other[j].Key })
	for _, p := range desc.Partitions {
		row := partitionRow{PartitionDescription: p, RecoveryPoint: recoveryPoint(p)}
		d.MaxBytes = max(d.MaxBytes, p.LocalBytes+p.ColdBytes)
		d.Parts = append(d.Parts, row)
	}
	sort.Slice(d.Parts, func(i, j int) bool { return d.Parts[i].Partition < d.Parts[j].Partition })
	return view{Template: "topic", Title: "Topic " + name, Nav: "topics", Live: true, Data: d}, nil
}

// describeTopic is DescribeTopic as the API allows it: the viewer needs
// to see the topic (any permission on it), else 403, even if it does not
// exist.
func (c *console) describeTopic(v *viewer, name string) (broker.TopicDescription, error) {
	if err := v.may("console topic "+name, broker.Needs(broker.TopicNeed(name, broker.OpSee))); err != nil {
		return broker.TopicDescription{}, err
	}
	return c.src.DescribeTopic(name)
}

// recoveryPoint is where the cold tier ends and, on the leader, how long
// the oldest record not yet there has waited.
func recoveryPoint(p broker.PartitionDescription) string {
	switch {
	case !p.Hosted:
		return "not held here"
	case p.ColdLoading:
		return "loading"
	}
	at := "none"
	if p.ColdEndOffset >= 0 {
		at = itoa(p.ColdEndOffset)
	}
	switch {
	case p.UploadLagMs == 0:
		return at + " (current)"
	case p.UploadLagMs > 0:
		return at + " (" + humanMillis(p.UploadLagMs) + " behind)"
	case p.ColdEndOffset >= 0:
		return at
	}
	return "-"
}
