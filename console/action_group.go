package console

// Group offset reset: move a consumer group's committed offsets to the
// earliest, the latest, an offset or a time, in every partition of the
// topics it has committed (or of the topic named). A dry run shows the
// plan (current and new offset per partition) and changes nothing; apply
// computes the plan again and commits it with the API's ResetGroupOffsets,
// which refuses while the group has members, as `strata group reset`
// without --force does. It needs admin on the group and read on the
// topics.
//
// Positions come from this broker's replicas (log start and high
// watermark, either tier), so earliest, latest and an offset work on any
// broker holding a replica; a time is resolved by the partition's leader
// (ListOffsets) and is refused, with the reason, elsewhere.

import (
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

type resetData struct {
	Group   string
	Topic   string
	To      string
	Plan    []resetRow
	DryRun  bool
	Message string
}

type resetRow struct {
	Topic         string
	Partition     int32
	Current       int64 // -1: none committed
	New           int64
	LogStart, End int64
}

func (c *console) resetPage(r *http.Request, v *viewer) (view, error) {
	name := r.PathValue("group")
	if err := v.may("console reset group", broker.Needs(broker.GroupNeed(name, security.OpAdmin))); err != nil {
		return view{}, err
	}
	return view{Template: "group_reset", Title: "Reset group " + name, Nav: "groups", Data: resetData{Group: name, To: "earliest"}}, nil
}

func (c *console) resetGroup(r *http.Request, v *viewer) (view, string, error) {
	d := resetData{Group: r.PathValue("group"), Topic: strings.TrimSpace(r.PostFormValue("topic")), To: strings.TrimSpace(r.PostFormValue("to")),
		DryRun: r.PostFormValue("apply") == ""}
	page := func(err error) (view, string, error) {
		if err != nil {
			_, d.Message = refusal(err)
		}
		return view{Template: "group_reset", Title: "Reset group " + d.Group, Nav: "groups", Data: d}, "", err
	}
	if err := v.may("console reset group", broker.Needs(broker.GroupNeed(d.Group, security.OpAdmin))); err != nil {
		return page(err)
	}
	plan, err := c.resetPlan(r, v, d.Group, d.Topic, d.To)
	if err != nil {
		return page(err)
	}
	d.Plan = plan
	if d.DryRun {
		return page(nil)
	}
	offsets := make([]broker.CommittedOffset, 0, len(plan))
	for _, p := range plan {
		offsets = append(offsets, broker.CommittedOffset{Topic: p.Topic, Partition: p.Partition, Offset: p.New})
	}
	if _, err := c.src.ResetGroupOffsets(r.Context(), d.Group, offsets, false); err != nil {
		return page(err)
	}
	return view{}, Prefix + "/groups/" + url.PathEscape(d.Group), nil
}

// resetPlan is the move of every partition of topic (or of every topic
// the group has committed) to the position to.
func (c *console) resetPlan(r *http.Request, v *viewer, group, topic, to string) ([]resetRow, error) {
	var toOffset, toTime int64 = -1, -1
	switch to {
	case "earliest", "latest":
	case "":
		return nil, badRequest("say where to: earliest, latest, an offset, or a time")
	default:
		if n, err := strconv.ParseInt(to, 10, 64); err == nil && n >= 0 && !strings.Contains(to, "-") && len(to) < 13 {
			toOffset = n // an offset; 13 digits and more are milliseconds since the epoch
			break
		}
		ms, err := parseTime(to)
		if err != nil {
			return nil, badRequest("to %q: want earliest, latest, an offset, or a time (RFC 3339, or milliseconds since the epoch)", to)
		}
		if ms > time.Now().UnixMilli() {
			return nil, badRequest("to %s is in the future: no record can be there yet", to)
		}
		toTime = ms
	}
	committed := map[broker.TopicPartition]int64{}
	desc, err := c.src.DescribeGroup(r.Context(), group)
	if err == nil {
		for _, o := range desc.Offsets {
			committed[broker.TopicPartition{Topic: o.Topic, Partition: o.Partition}] = o.Offset
		}
	} else if broker.ReasonOf(err) != broker.ReasonGroupNotFound {
		return nil, err
	}
	topics := []string{topic}
	if topic == "" {
		seen := map[string]bool{}
		for tp := range committed {
			seen[tp.Topic] = true
		}
		topics = topics[:0]
		for t := range seen {
			topics = append(topics, t)
		}
		sort.Strings(topics)
		if len(topics) == 0 {
			return nil, badRequest("group %s has no committed offsets: name the topic to reset", group)
		}
	}
	var plan []resetRow
	for _, t := range topics {
		if err := v.may("console reset group", broker.Needs(broker.TopicNeed(t, security.OpRead))); err != nil {
			return nil, err
		}
		td, err := c.src.DescribeTopic(t)
		if err != nil {
			return nil, err
		}
		for _, p := range td.Partitions {
			if !p.Hosted || p.ColdLoading {
				return nil, &statusError{http.StatusServiceUnavailable, "broker " + itoa(int64(c.brokerID())) + " holds no loaded replica of " + t + "/" + itoa(int64(p.Partition)) + ": use the console of a broker that does (its leader is broker " + itoa(int64(p.Leader)) + ")"}
			}
			row := resetRow{Topic: t, Partition: p.Partition, Current: -1, LogStart: p.LogStartOffset, End: p.HighWatermark}
			if off, ok := committed[broker.TopicPartition{Topic: t, Partition: p.Partition}]; ok {
				row.Current = off
			}
			switch {
			case to == "earliest":
				row.New = row.LogStart
			case to == "latest":
				row.New = row.End
			case toOffset >= 0:
				if toOffset < row.LogStart || toOffset > row.End {
					return nil, badRequest("offset %d is outside %s/%d, which holds offsets %d to %d", toOffset, t, p.Partition, row.LogStart, row.End)
				}
				row.New = toOffset
			default:
				a, err := c.src.ListOffsets(r.Context(), t, p.Partition, broker.OffsetQuery{TimestampMs: toTime})
				if err != nil {
					return nil, err
				}
				row.New = a.Offset
			}
			plan = append(plan, row)
		}
	}
	return plan, nil
}
