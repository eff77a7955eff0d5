package console

// The record browser: one partition's records from a position (an offset,
// a time, the earliest or the latest), read through the broker's normal
// fetch path, so an offset in the cold tier is read through the chunk
// cache like any consumer's. Keys, values and headers show as text, JSON
// or hex, each cut at a byte limit, and a page stops at a record count
// and a byte budget. Everything shown is escaped by the template. With
// "latest" the page follows the partition: its fragment polls twice a
// second, so a new record shows within a second of being committed.

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/record"
	"github.com/strata-log/strata/security"
)

const (
	// defaultRecords and maxRecords: records on a page.
	defaultRecords = 20
	maxRecords     = 200
	// defaultFieldBytes and maxFieldBytes: bytes shown of one key, value
	// or header value.
	defaultFieldBytes = 1024
	maxFieldBytes     = 64 << 10
	// pageBytes bounds the bytes a page shows, all fields together, and
	// fetchBytes what one fetch reads.
	pageBytes  = 512 << 10
	fetchBytes = 1 << 20
	// fetchBudget bounds the reads of one page.
	fetchBudget = 5 * time.Second
	// followEvery is how often a page following the partition polls.
	followEvery = "500ms"
)

// seek is where a page starts, as the form asks it.
type seek struct {
	Mode       string // "latest", "earliest", "offset", "time"
	Offset     int64
	Time       string
	Format     string
	Records    int
	FieldBytes int
}

type recordsData struct {
	Topic     string
	Partition int32
	Seek      seek
	// From is the offset the page starts at; Next the one after its last
	// record, for the next page.
	From, Next int64
	// LogStart, LocalStart and HighWatermark place the page in the tiers.
	LogStart, LocalStart, HighWatermark int64
	Records                             []shownRecord
	// Stopped says why the page ended before its record count, if it did.
	Stopped string
	Error   string
	NextURL string
	Formats []string
	Modes   []string
}

type shownRecord struct {
	Offset    int64
	Time      string
	Tier      string
	Key       shownField
	Value     shownField
	Headers   []shownHeader
	Timestamp int64
}

type shownHeader struct {
	Key   string
	Value shownField
}

func parseSeek(q url.Values) (seek, error) {
	s := seek{Mode: q.Get("mode"), Format: q.Get("format"), Time: q.Get("time"), Records: defaultRecords, FieldBytes: defaultFieldBytes}
	if s.Mode == "" {
		s.Mode = "latest"
	}
	if s.Format == "" {
		s.Format = formatText
	}
	switch s.Format {
	case formatText, formatJSON, formatHex:
	default:
		return s, badRequest("format %q: want text, json or hex", s.Format)
	}
	var err error
	switch s.Mode {
	case "latest", "earliest":
	case "offset":
		if s.Offset, err = strconv.ParseInt(q.Get("offset"), 10, 64); err != nil || s.Offset < 0 {
			return s, badRequest("offset %q: want an offset, 0 or more", q.Get("offset"))
		}
	case "time":
		if _, err := parseTime(s.Time); err != nil {
			return s, err
		}
	default:
		return s, badRequest("mode %q: want latest, earliest, offset or time", s.Mode)
	}
	if v := q.Get("records"); v != "" {
		if s.Records, err = strconv.Atoi(v); err != nil || s.Records < 1 || s.Records > maxRecords {
			return s, badRequest("records %q: want 1 to %d", v, maxRecords)
		}
	}
	if v := q.Get("field_bytes"); v != "" {
		if s.FieldBytes, err = strconv.Atoi(v); err != nil || s.FieldBytes < 16 || s.FieldBytes > maxFieldBytes {
			return s, badRequest("field_bytes %q: want 16 to %d", v, maxFieldBytes)
		}
	}
	return s, nil
}

// parseTime reads a time as RFC 3339 (UTC when no zone is given, as the
// datetime-local input sends it) or milliseconds since the epoch.
func parseTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UnixMilli(), nil
		}
	}
	return 0, badRequest("time %q: want RFC 3339 (2026-01-02T15:04:05Z) or milliseconds since the epoch", s)
}

func (c *console) recordsView(r *http.Request, v *viewer) (view, error) {
	topic := r.PathValue("topic")
	part, err := partitionParam(r)
	if err != nil {
		return view{}, err
	}
	// Reading records needs what a fetch needs on the API.
	if err := v.may("console records", broker.Needs(broker.TopicNeed(topic, security.OpRead))); err != nil {
		return view{}, err
	}
	sk, err := parseSeek(r.URL.Query())
	if err != nil {
		return view{}, err
	}
	desc, err := c.src.DescribeTopic(topic)
	if err != nil {
		return view{}, err
	}
	p, err := partitionOf(topic, desc, part)
	if err != nil {
		return view{}, err
	}
	d := recordsData{Topic: topic, Partition: part, Seek: sk, LogStart: p.LogStartOffset, LocalStart: p.LocalStartOffset,
		HighWatermark: p.HighWatermark, Formats: []string{formatText, formatJSON, formatHex}, Modes: []string{"latest", "earliest", "offset", "time"}}
	ctx, cancel := context.WithTimeout(r.Context(), fetchBudget)
	defer cancel()
	if err := d.read(ctx, c.src); err != nil {
		d.Error = messageOf(err)
		if broker.ReasonOf(err) == broker.ReasonNotLeader && p.Leader >= 0 {
			d.Error += fmt.Sprintf(" (broker %d leads this partition: its console reads the local log)", p.Leader)
		}
	}
	if len(d.Records) > 0 || d.Seek.Mode != "latest" {
		q := url.Values{"mode": {"offset"}, "offset": {itoa(d.Next)}, "format": {sk.Format},
			"records": {strconv.Itoa(sk.Records)}, "field_bytes": {strconv.Itoa(sk.FieldBytes)}}
		d.NextURL = r.URL.Path + "?" + q.Encode()
	}
	res := view{Template: "records", Title: fmt.Sprintf("Records of %s/%d", topic, part), Nav: "topics", Live: true, Data: d}
	if sk.Mode == "latest" {
		res.PollEvery = followEvery
	}
	return res, nil
}

// read resolves the seek and reads the page's records.
func (d *recordsData) read(ctx context.Context, src Source) error {
	sk := d.Seek
	switch sk.Mode {
	case "latest":
		d.From = max(d.HighWatermark-int64(sk.Records), d.LogStart)
	case "earliest":
		d.From = d.LogStart
	case "offset":
		d.From = sk.Offset
	case "time":
		ms, _ := parseTime(sk.Time)
		a, err := src.ListOffsets(ctx, d.Topic, d.Partition, broker.OffsetQuery{TimestampMs: ms})
		if err != nil {
			return err
		}
		d.From, d.HighWatermark = a.Offset, a.HighWatermark
	}
	d.Next = d.From
	shownBytes := 0
	for d.Next < d.HighWatermark && len(d.Records) < sk.Records {
		res, err := src.Fetch(ctx, broker.FetchRequest{Topic: d.Topic, Partition: d.Partition, Offset: d.Next, MaxBytes: fetchBytes})
		if err != nil {
			return err
		}
		d.HighWatermark = max(d.HighWatermark, res.HighWatermark)
		progressed, stop, err := d.take(res.Batches, &shownBytes)
		res.Release()
		if err != nil {
			return err
		}
		if stop != "" {
			d.Stopped = stop
			return nil
		}
		if !progressed {
			if res.NextOffset > d.Next {
				d.Next = res.NextOffset
				continue
			}
			return nil
		}
	}
	return nil
}

// take adds the records of batches from d.Next on to the page, up to its
// record count and byte budget; it reports whether it moved d.Next, and
// why it stopped if the budget did.
func (d *recordsData) take(batches []byte, shownBytes *int) (bool, string, error) {
	moved := false
	sk := d.Seek
	for len(batches) > 0 {
		b, rest, err := record.Next(batches)
		if err != nil {
			return moved, "", fmt.Errorf("console: decode batch at offset %d: %w", d.Next, err)
		}
		batches = rest
		if b.NextOffset() <= d.Next {
			continue
		}
		if b.IsControl() { // a transaction marker: no record of the application
			d.Next, moved = b.NextOffset(), true
			continue
		}
		recs, err := b.Records()
		if err != nil {
			return moved, "", fmt.Errorf("console: decode batch at offset %d: %w", b.BaseOffset(), err)
		}
		for _, rec := range recs {
			if rec.Offset < d.Next {
				continue
			}
			if len(d.Records) >= sk.Records {
				return moved, "", nil
			}
			shown := d.show(rec)
			n := len(shown.Key.Text) + len(shown.Value.Text)
			for _, h := range shown.Headers {
				n += len(h.Key) + len(h.Value.Text)
			}
			if *shownBytes+n > pageBytes && len(d.Records) > 0 {
				return moved, fmt.Sprintf("the page stopped at %d KiB shown; the next page goes on", pageBytes>>10), nil
			}
			*shownBytes += n
			d.Records = append(d.Records, shown)
			d.Next, moved = rec.Offset+1, true
		}
		if b.NextOffset() > d.Next {
			d.Next, moved = b.NextOffset(), true // offsets compacted away or aborted
		}
	}
	return moved, "", nil
}

func (d *recordsData) show(rec record.Record) shownRecord {
	sk := d.Seek
	tier := "local"
	if rec.Offset < d.LocalStart {
		tier = "cold"
	}
	s := shownRecord{Offset: rec.Offset, Timestamp: rec.Timestamp, Tier: tier,
		Time:  time.UnixMilli(rec.Timestamp).UTC().Format("2006-01-02 15:04:05.000"),
		Key:   showField(rec.Key, sk.Format, sk.FieldBytes),
		Value: showField(rec.Value, sk.Format, sk.FieldBytes)}
	for _, h := range rec.Headers {
		s.Headers = append(s.Headers, shownHeader{Key: strings.ToValidUTF8(cutUTF8(h.Key, sk.FieldBytes), "\uFFFD"), Value: showField(h.Value, sk.Format, sk.FieldBytes)})
	}
	return s
}
