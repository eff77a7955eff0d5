package console

// The partition timeline: offsets (up) against time (across), drawn as an
// SVG on the server. The curve is the offset the partition had reached at
// each moment (ListOffsets by time, across both tiers, sampled from the
// first record to now); behind it, as bands, the offsets the cold tier
// holds and those the local log holds; across it, the high watermark; and
// upright, the moments before which local retention and total retention
// cut. Times need the partition's leader (ListOffsets is the leader's):
// elsewhere the page draws the offsets alone and says so.

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/config"
)

const (
	// timelineSamples is how many moments the curve is drawn through.
	timelineSamples = 24
	// timelineBudget bounds the lookups of one drawing.
	timelineBudget = 2 * time.Second
	// The drawing's size and the plot inside it, in SVG units.
	svgW, svgH             = 860, 340
	plotL, plotR           = 80, 840
	plotT, plotB           = 20, 290
	timelineRefreshSeconds = "5s"
)

type timelineData struct {
	Topic     string
	Partition int32
	P         broker.PartitionDescription
	// Timed: the curve and the retention cuts could be placed in time
	// (this broker leads the partition).
	Timed    bool
	Untimed  string
	Points   []timelinePoint
	SVG      timelineSVG
	Settings config.Topic
}

// timelinePoint is one labelled position for the table under the drawing.
type timelinePoint struct {
	Name   string
	Offset string
	Time   string
}

// timelineSVG is the drawing, in coordinates ready for the template.
type timelineSVG struct {
	W, H, L, R, T, B int
	PW, PH           int // the plot's width and height
	Cold, Hot        *band
	HW               *hline
	Curve            string // polyline points
	Cuts             []vline
	XLabels          []axisLabel
	YLabels          []axisLabel
}

type band struct {
	Y, Height int
	Label     string
}

type hline struct {
	Y     int
	Label string
}

type vline struct {
	X      int
	Class  string
	Label  string
	LabelY int // stacked, so that two cuts at one place stay readable
}

type axisLabel struct {
	X, Y   int
	Text   string
	Anchor string
}

func (c *console) timelineView(r *http.Request, v *viewer) (view, error) {
	topic := r.PathValue("topic")
	part, err := partitionParam(r)
	if err != nil {
		return view{}, err
	}
	desc, err := c.describeTopic(v, topic)
	if err != nil {
		return view{}, err
	}
	p, err := partitionOf(topic, desc, part)
	if err != nil {
		return view{}, err
	}
	settings, err := config.DefaultTopic().With(desc.Config)
	if err != nil {
		return view{}, err
	}
	d := timelineData{Topic: topic, Partition: p.Partition, P: *p, Settings: settings}
	if !p.Hosted {
		d.Untimed = fmt.Sprintf("broker %d holds no replica of this partition: its leader is broker %d", c.brokerID(), p.Leader)
		return view{Template: "timeline", Title: fmt.Sprintf("%s/%d", topic, part), Nav: "topics", Live: true, Data: d}, nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), timelineBudget)
	defer cancel()
	d.draw(ctx, c.src, c.now())
	return view{Template: "timeline", Title: fmt.Sprintf("%s/%d", topic, part), Nav: "topics", Live: true, Data: d}, nil
}

func (c *console) brokerID() int32 { return c.src.ClusterStatus().BrokerID }

// draw fills the drawing and the table of points.
func (d *timelineData) draw(ctx context.Context, src Source, now time.Time) {
	p := d.P
	lo, hi := p.LogStartOffset, max(p.LogEndOffset, p.HighWatermark, p.LogStartOffset+1)
	s := &d.SVG
	*s = timelineSVG{W: svgW, H: svgH, L: plotL, R: plotR, T: plotT, B: plotB, PW: plotR - plotL, PH: plotB - plotT}
	y := func(o int64) int {
		o = min(max(o, lo), hi)
		return plotB - int((o-lo)*(plotB-plotT)/(hi-lo))
	}
	if p.ColdEndOffset >= 0 && !p.ColdLoading {
		top, bottom := y(p.ColdEndOffset+1), y(p.LogStartOffset)
		s.Cold = &band{Y: top, Height: max(bottom-top, 1), Label: fmt.Sprintf("cold tier %d-%d", p.LogStartOffset, p.ColdEndOffset)}
	}
	if p.LogEndOffset > p.LocalStartOffset {
		top, bottom := y(p.LogEndOffset), y(p.LocalStartOffset)
		s.Hot = &band{Y: top, Height: max(bottom-top, 1), Label: fmt.Sprintf("local log %d-%d", p.LocalStartOffset, p.LogEndOffset-1)}
	}
	s.HW = &hline{Y: y(p.HighWatermark), Label: fmt.Sprintf("high watermark %d", p.HighWatermark)}
	for _, o := range []int64{lo, (lo + hi) / 2, hi} {
		l := axisLabel{X: plotL - 6, Y: y(o) + 4, Text: itoa(o), Anchor: "end"}
		if n := len(s.YLabels); n == 0 || s.YLabels[n-1].Y != l.Y {
			s.YLabels = append(s.YLabels, l)
		}
	}
	d.Points = []timelinePoint{
		{Name: "log start (first readable, either tier)", Offset: itoa(p.LogStartOffset)},
		{Name: "cold tier end (recovery point)", Offset: coldEnd(p)},
		{Name: "local log start", Offset: itoa(p.LocalStartOffset)},
		{Name: "high watermark", Offset: itoa(p.HighWatermark)},
		{Name: "log end", Offset: itoa(p.LogEndOffset)},
	}

	first, err := src.ListOffsets(ctx, d.Topic, d.Partition, broker.OffsetQuery{TimestampMs: 0})
	if err != nil {
		d.Untimed = "no time axis: " + messageOf(err)
		return
	}
	if first.TimestampMs < 0 || first.Offset >= first.HighWatermark {
		d.Untimed = "no time axis: the partition holds no records"
		return
	}
	d.Timed = true
	t0, t1 := first.TimestampMs, max(now.UnixMilli(), first.TimestampMs+1)
	x := func(ms int64) int {
		ms = min(max(ms, t0), t1)
		return plotL + int((ms-t0)*(plotR-plotL)/(t1-t0))
	}
	pts := ""
	for i := range timelineSamples {
		at := t0 + (t1-t0)*int64(i)/int64(timelineSamples-1)
		off := p.HighWatermark
		if i < timelineSamples-1 {
			a, err := src.ListOffsets(ctx, d.Topic, d.Partition, broker.OffsetQuery{TimestampMs: at})
			if err != nil {
				break
			}
			off = a.Offset
		}
		pts += fmt.Sprintf("%d,%d ", x(at), y(off))
	}
	s.Curve = pts
	for i, ms := range []int64{t0, (t0 + t1) / 2, t1} {
		s.XLabels = append(s.XLabels, axisLabel{X: x(ms), Y: plotB + 18, Text: time.UnixMilli(ms).UTC().Format("01-02 15:04:05"),
			Anchor: []string{"start", "middle", "end"}[i]})
	}
	d.Points[0].Time = time.UnixMilli(t0).UTC().Format(time.RFC3339)
	cut := func(name, class string, retentionMs int64) {
		if retentionMs == config.Unbounded {
			d.Points = append(d.Points, timelinePoint{Name: name, Offset: "none", Time: "unbounded"})
			return
		}
		at := now.UnixMilli() - retentionMs
		label := name + " " + humanMillis(retentionMs) + " ago"
		if at < t0 {
			label += " (before the first record)"
		}
		s.Cuts = append(s.Cuts, vline{X: x(at), Class: class, Label: label, LabelY: plotB - 8 - 14*len(s.Cuts)})
		off := "-"
		if a, err := src.ListOffsets(ctx, d.Topic, d.Partition, broker.OffsetQuery{TimestampMs: at}); err == nil {
			off = itoa(a.Offset)
		}
		d.Points = append(d.Points, timelinePoint{Name: name + " (records before it may go)", Offset: off, Time: time.UnixMilli(at).UTC().Format(time.RFC3339)})
	}
	if d.Settings.RemoteStorageEnable {
		local := d.Settings.LocalRetentionMs
		if local == config.Unbounded {
			local = d.Settings.RetentionMs
		}
		cut("local retention cut", "cut-local", local)
	}
	cut("total retention cut", "cut-total", d.Settings.RetentionMs)
}

func coldEnd(p broker.PartitionDescription) string {
	switch {
	case p.ColdLoading:
		return "loading"
	case p.ColdEndOffset < 0:
		return "none"
	}
	return itoa(p.ColdEndOffset)
}

// partitionParam is the request's {partition}, a partition number.
func partitionParam(r *http.Request) (int32, error) {
	part, err := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	if err != nil || part < 0 {
		return 0, badRequest("partition %q is not a partition number", r.PathValue("partition"))
	}
	return int32(part), nil
}

// partitionOf finds partition part in desc, topic's description; a
// partition the topic does not have is not found.
func partitionOf(topic string, desc broker.TopicDescription, part int32) (*broker.PartitionDescription, error) {
	for i := range desc.Partitions {
		if desc.Partitions[i].Partition == part {
			return &desc.Partitions[i], nil
		}
	}
	return nil, notFound("topic %s has no partition %d", topic, part)
}
