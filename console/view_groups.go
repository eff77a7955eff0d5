package console

// The consumer groups views: the list, and one group's members, their
// assignment, and per partition its committed offset and lag behind the
// high watermark, refreshed live.

import (
	"net/http"
	"sort"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

type groupsData struct {
	Groups []broker.GroupSummary
	// Error is why the list could not be read (no group coordinator).
	Error string
}

func (c *console) groupsView(r *http.Request, v *viewer) (view, error) {
	var d groupsData
	groups, err := c.src.ListGroups(r.Context())
	if err != nil {
		d.Error = messageOf(err)
	}
	for _, g := range groups {
		if v.seesGroup(g.Group) {
			d.Groups = append(d.Groups, g)
		}
	}
	sort.Slice(d.Groups, func(i, j int) bool { return d.Groups[i].Group < d.Groups[j].Group })
	return view{Template: "groups", Title: "Consumer groups", Nav: "groups", Live: true, Data: d}, nil
}

type groupData struct {
	broker.GroupDescription
	Lags []lagRow
	// MaxLag is the largest lag: the bars' full width.
	MaxLag   int64
	TotalLag int64
}

// lagRow is one partition's committed offset and how far it is behind.
type lagRow struct {
	Topic     string
	Partition int32
	Committed int64
	// HighWatermark is -1 where this broker holds no replica of the
	// partition, and Lag is then unknown (-1).
	HighWatermark int64
	Lag           int64
	Owner         string
	CommitTimeMs  int64
}

func (c *console) groupView(r *http.Request, v *viewer) (view, error) {
	name := r.PathValue("group")
	if err := v.may("console group", broker.Needs(broker.GroupNeed(name, security.OpRead))); err != nil {
		return view{}, err
	}
	desc, err := c.src.DescribeGroup(r.Context(), name)
	if err != nil {
		return view{}, err
	}
	d := groupData{GroupDescription: desc}
	owner := map[broker.TopicPartition]string{}
	for _, m := range desc.Members {
		for _, tp := range m.Owned {
			owner[broker.TopicPartition{Topic: tp.Topic, Partition: tp.Partition}] = m.ID
		}
	}
	hw := map[string]map[int32]int64{}
	for _, o := range desc.Offsets {
		if !v.seesOffset(o.Topic) {
			continue
		}
		if _, ok := hw[o.Topic]; !ok {
			hw[o.Topic] = highWatermarks(c.src, o.Topic)
		}
		row := lagRow{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, HighWatermark: -1, Lag: -1,
			Owner: owner[broker.TopicPartition{Topic: o.Topic, Partition: o.Partition}], CommitTimeMs: o.CommitTimeMs}
		if h, ok := hw[o.Topic][o.Partition]; ok {
			row.HighWatermark, row.Lag = h, max(h-o.Offset, 0)
			d.MaxLag = max(d.MaxLag, row.Lag)
			d.TotalLag += row.Lag
		}
		d.Lags = append(d.Lags, row)
	}
	sort.Slice(d.Lags, func(i, j int) bool {
		if d.Lags[i].Topic != d.Lags[j].Topic {
			return d.Lags[i].Topic < d.Lags[j].Topic
		}
		return d.Lags[i].Partition < d.Lags[j].Partition
	})
	d.Offsets = nil // shown as Lags, filtered
	return view{Template: "group", Title: "Group " + name, Nav: "groups", Live: true, Data: d}, nil
}

// highWatermarks are the high watermarks of topic's partitions that the
// broker holds.
func highWatermarks(src Source, topic string) map[int32]int64 {
	out := map[int32]int64{}
	desc, err := src.DescribeTopic(topic)
	if err != nil {
		return out
	}
	for _, p := range desc.Partitions {
		if p.Hosted {
			out[p.Partition] = p.HighWatermark
		}
	}
	return out
}
