package broker

// The leader's checks of a producer's batch (validate.go), through the
// function Produce calls, on a partition with a clock the test sets: each
// refusal carries its reason and leaves the log, and the request's bytes,
// as they were; what passes is appended as Produce appends it.

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/record"
)

// checkedLeader is broker 1 leading a partition alone, with its clock.
type checkedLeader struct {
	*testReplica
	info cluster.PartitionInfo
}

func newCheckedLeader(t *testing.T) *checkedLeader {
	t.Helper()
	info := cluster.PartitionInfo{Partition: 0, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}}
	return &checkedLeader{testReplica: newTestReplica(t, 1, info, 1), info: info}
}

// alter publishes new topic settings as a reconcile after an alter does.
func (l *checkedLeader) alter(set map[string]string) {
	l.t.Helper()
	cfg, err := config.DefaultTopic().With(set)
	if err != nil {
		l.t.Fatal(err)
	}
	cfg.FlushPolicy = config.FlushNever
	l.cfg = cfg
	l.apply(l.info)
}

// logBytes is everything the partition's log holds.
func (l *checkedLeader) logBytes() []byte {
	l.t.Helper()
	res, err := l.p.log.Read(0, 1<<30, l.p.log.LogEndOffset())
	if err != nil {
		l.t.Fatal(err)
	}
	return res.Data
}

// produce runs Produce's checks of b under the partition's current
// settings and, when they pass, appends b as Produce does. A refusal must
// leave the log and b's bytes untouched.
func (l *checkedLeader) produce(b record.Batch) (ProduceResult, error) {
	l.t.Helper()
	logBefore, sent := l.logBytes(), bytes.Clone(b)
	if err := checkBatch(l.p, l.p.cfg.Load(), b, (&Broker{}).producerOwner(context.Background())); err != nil {
		if !bytes.Equal(l.logBytes(), logBefore) {
			l.t.Fatalf("refused with %v, and the log changed", err)
		}
		if !bytes.Equal(b, sent) {
			l.t.Fatalf("refused with %v, and the batch was rewritten", err)
		}
		return ProduceResult{}, err
	}
	res, _, err := l.p.appendAsLeader(b, AcksLeader)
	if err != nil {
		l.t.Fatalf("append after the checks passed: %v", err)
	}
	return res, nil
}

// refused asserts that b is refused with reason, its message containing
// every one of words.
func (l *checkedLeader) refused(name string, b record.Batch, reason Reason, words ...string) {
	l.t.Helper()
	_, err := l.produce(b)
	if ReasonOf(err) != reason {
		l.t.Errorf("%s: %v, want %s", name, err, reason)
		return
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			l.t.Errorf("%s: %q does not say %q", name, err, w)
		}
	}
}

// accepted asserts that b is appended, and returns the stored batch.
func (l *checkedLeader) accepted(name string, b record.Batch) record.Batch {
	l.t.Helper()
	res, err := l.produce(b)
	if err != nil {
		l.t.Fatalf("%s: %v", name, err)
	}
	got, err := l.p.log.Read(res.BaseOffset, 1, l.p.log.LogEndOffset())
	if err != nil {
		l.t.Fatal(err)
	}
	stored, _, err := record.Next(got.Data)
	if err != nil {
		l.t.Fatal(err)
	}
	return stored
}

// stampedBatch encodes one record per timestamp, with codec c.
func stampedBatch(t *testing.T, c record.Compression, ts ...int64) record.Batch {
	t.Helper()
	opts := record.DefaultBatchOptions()
	opts.Compression = c
	bl := record.NewBuilder(opts)
	for i, at := range ts {
		bl.Add(record.Record{Timestamp: at, Value: []byte{byte(i)}})
	}
	b, err := bl.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rewritten is b with its header changed by edit and its CRC made right
// again, as a producer would have sent it.
func rewritten(b record.Batch, edit func(h []byte)) record.Batch {
	c := bytes.Clone(b)
	edit(c)
	binary.BigEndian.PutUint32(c[17:], crc32.Checksum(c[21:], crc32.MakeTable(crc32.Castagnoli)))
	return c
}

func withAttributes(b record.Batch, bits uint16) record.Batch {
	return rewritten(b, func(h []byte) { binary.BigEndian.PutUint16(h[21:], binary.BigEndian.Uint16(h[21:])|bits) })
}

func yearMs(y int) int64 { return time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli() }

var codecs = []record.Compression{record.CompressionNone, record.CompressionGzip, record.CompressionZstd}

// TestProducedTimestampsAreBounded: under the default settings any past
// time is accepted and one more than an hour ahead is refused, as is a
// negative one; the bounds follow an alter at once; -1 (no timestamp)
// passes whatever the bounds. Compressed batches are held to the same
// rules from the records check's one pass.
func TestProducedTimestampsAreBounded(t *testing.T) {
	l := newCheckedLeader(t)
	now := l.now.UnixMilli()
	hour := int64(time.Hour / time.Millisecond)
	for _, c := range codecs {
		// Backfills of history: old times are allowed by default.
		l.accepted("a record of 1971", stampedBatch(t, c, yearMs(1971), now))
		l.accepted("the epoch", stampedBatch(t, c, 0))
		l.accepted("no timestamps", stampedBatch(t, c, -1, -1))
		l.accepted("exactly message.timestamp.after.max.ms ahead", stampedBatch(t, c, now, now+hour))

		l.refused("a millisecond further ahead", stampedBatch(t, c, now, now+hour+1), ReasonInvalidTimestamp,
			"message.timestamp.after.max.ms", "1h", "ahead")
		l.refused("the year 3000", stampedBatch(t, c, yearMs(3000)), ReasonInvalidTimestamp, "3000-01-01")
		l.refused("the largest int64", stampedBatch(t, c, now, math.MaxInt64, now), ReasonInvalidTimestamp, "9223372036854775807")
		l.refused("just before 1970", stampedBatch(t, c, now, -2), ReasonInvalidTimestamp, "-2", "before 1970")
		l.refused("the year -1000", stampedBatch(t, c, yearMs(-1000)), ReasonInvalidTimestamp, "before 1970")
		l.refused("the smallest int64", stampedBatch(t, c, math.MinInt64), ReasonInvalidTimestamp, "before 1970")
	}

	// Bounds are live settings: an alter applies to the next batch.
	l.alter(map[string]string{"message.timestamp.before.max.ms": "7d", "message.timestamp.after.max.ms": "0"})
	week := 7 * 24 * hour
	for _, c := range codecs {
		l.accepted("exactly a week old", stampedBatch(t, c, now-week, now))
		l.accepted("no timestamp beside a bounded one", stampedBatch(t, c, -1, now, -1))
		l.refused("a week and a millisecond old", stampedBatch(t, c, now, now-week-1), ReasonInvalidTimestamp,
			"message.timestamp.before.max.ms", "7d", "behind")
		l.refused("a record of 1971 after the alter", stampedBatch(t, c, yearMs(1971)), ReasonInvalidTimestamp, "1971-01-01")
		l.refused("a millisecond ahead under after.max.ms 0", stampedBatch(t, c, now+1), ReasonInvalidTimestamp, "ahead")
	}
	l.alter(map[string]string{"message.timestamp.before.max.ms": "-1", "message.timestamp.after.max.ms": "-1"})
	l.accepted("the year 3000, unbounded", stampedBatch(t, record.CompressionNone, yearMs(3000)))
	l.refused("negative, unbounded", stampedBatch(t, record.CompressionNone, -5), ReasonInvalidTimestamp, "before 1970")

	// The refusal says where the window ends, for programs.
	l.alter(nil)
	_, err := l.produce(stampedBatch(t, record.CompressionNone, now+2*hour))
	if e, ok := err.(*Error); !ok || e.Meta["timestamp"] != itoa(now+2*hour) || e.Meta["latest"] != itoa(now+hour) || e.Retriable() {
		t.Errorf("refusal %#v: want timestamp and latest, not retriable", err)
	}
}

// TestBatchHeaderTimestampsMatchTheRecords: under CreateTime the header's
// first timestamp is the first record's and its max timestamp the largest
// record's; a batch whose header says otherwise is CORRUPT_BATCH, whatever
// its codec, and records in any time order are fine.
func TestBatchHeaderTimestampsMatchTheRecords(t *testing.T) {
	l := newCheckedLeader(t)
	now := l.now.UnixMilli()
	for _, c := range codecs {
		good := stampedBatch(t, c, now-10, now, now-20)
		l.refused("max timestamp 0", rewritten(good, func(h []byte) { binary.BigEndian.PutUint64(h[35:], 0) }),
			ReasonCorruptBatch, "max timestamp 0", "largest")
		l.refused("max timestamp of the last record", rewritten(good, func(h []byte) { binary.BigEndian.PutUint64(h[35:], uint64(now-20)) }),
			ReasonCorruptBatch, "max timestamp")
		l.refused("max timestamp past the records", rewritten(good, func(h []byte) { binary.BigEndian.PutUint64(h[35:], uint64(now+1)) }),
			ReasonCorruptBatch, "max timestamp")
		stored := l.accepted("records out of time order", good)
		if stored.FirstTimestamp() != now-10 || stored.MaxTimestamp() != now || stored.TimestampType() != record.CreateTime {
			t.Errorf("stored first %d max %d %v", stored.FirstTimestamp(), stored.MaxTimestamp(), stored.TimestampType())
		}
	}
}

// TestBatchFirstTimestampIsTheFirstRecords: records carry their times as
// deltas from the header's first timestamp, so the header is the first
// record's time exactly when that record's delta is 0. A first record
// with another delta is CORRUPT_BATCH, even when the max timestamp agrees.
func TestBatchFirstTimestampIsTheFirstRecords(t *testing.T) {
	l := newCheckedLeader(t)
	now := l.now.UnixMilli()
	good := stampedBatch(t, record.CompressionNone, now-10, now, now-20)
	// The first record: a 1-byte length, its attributes, then its
	// timestamp delta, zigzag 0 in one byte; zigzag 4 is a delta of 2.
	if good[record.HeaderSize+2] != 0 {
		t.Fatalf("first record's delta byte is %#x, want 0", good[record.HeaderSize+2])
	}
	moved := rewritten(good, func(h []byte) { h[record.HeaderSize+2] = 4 })
	if recs, err := moved.Records(); err != nil || recs[0].Timestamp != now-8 || moved.FirstTimestamp() != now-10 || moved.MaxTimestamp() != now {
		t.Fatalf("the crafted batch: %v, %v", recs, err)
	}
	l.refused("first record 2ms after the header's first timestamp", moved, ReasonCorruptBatch, "first timestamp", "first record")
	l.accepted("the batch as built", good)
}

// TestBrokerOnlyAttributes: a producer's batch may not be a control batch,
// transactional, or LogAppendTime, on either kind of topic; a
// LogAppendTime topic stamps what it accepts with the leader's clock.
func TestBrokerOnlyAttributes(t *testing.T) {
	l := newCheckedLeader(t)
	now := l.now.UnixMilli()
	b := stampedBatch(t, record.CompressionNone, now, now+1)
	lat := record.DefaultBatchOptions()
	lat.TimestampType = record.LogAppendTime
	claimed, err := record.Encode(lat, record.Record{Timestamp: now, Value: []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"CreateTime", "LogAppendTime"} {
		l.alter(map[string]string{"message.timestamp.type": typ})
		l.refused(typ+": control", withAttributes(b, 0x20), ReasonInvalidRecord, "control")
		l.refused(typ+": transactional control", withAttributes(b, 0x30), ReasonInvalidRecord, "control")
		l.refused(typ+": transactional", withAttributes(b, 0x10), ReasonTransactionsNotSupported, "transactions are not supported")
		l.refused(typ+": LogAppendTime", claimed, ReasonInvalidTimestamp, "LogAppendTime", "only the broker sets", typ)
	}

	// Under LogAppendTime the producer's times are never read: no bound,
	// sign or header rule applies, and the leader stamps the batch.
	l.now = l.now.Add(time.Minute)
	for name, b := range map[string]record.Batch{
		"the year 3000":     stampedBatch(t, record.CompressionZstd, yearMs(3000)),
		"before 1970":       stampedBatch(t, record.CompressionNone, -1000),
		"max timestamp 0":   rewritten(stampedBatch(t, record.CompressionNone, now), func(h []byte) { binary.BigEndian.PutUint64(h[35:], 0) }),
		"in range, as sent": stampedBatch(t, record.CompressionNone, now),
	} {
		stored := l.accepted(name, b)
		if stored.TimestampType() != record.LogAppendTime || stored.MaxTimestamp() != l.now.UnixMilli() {
			t.Errorf("%s: stored as %v at %d, want LogAppendTime at %d", name, stored.TimestampType(), stored.MaxTimestamp(), l.now.UnixMilli())
		}
		if err := stored.Validate(); err != nil {
			t.Errorf("%s: stored batch: %v", name, err)
		}
	}
}
