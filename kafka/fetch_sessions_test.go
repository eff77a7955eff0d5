package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/internal/testutil"
)

// sessionFetch is a Fetch v12 of topic's partitions at the offsets given
// (-1 leaves a partition out), in session id at epoch, forgetting the
// partitions in forget.
func sessionFetch(c *rawConn, topic string, id, epoch int32, offsets map[int32]int64, forget ...int32) *kmsg.FetchResponse {
	req := kmsg.NewPtrFetchRequest()
	req.MaxBytes, req.MaxWaitMillis, req.SessionID, req.SessionEpoch = 1<<20, 50, id, epoch
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	for p := int32(0); p < 16; p++ {
		off, ok := offsets[p]
		if !ok {
			continue
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	if len(rt.Partitions) > 0 {
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = topic, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	return c.ask(req, 12).(*kmsg.FetchResponse)
}

// answered is what a fetch answered: partition → bytes of records.
func answered(resp *kmsg.FetchResponse) map[int32]int {
	out := map[int32]int{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = len(p.RecordBatches)
		}
	}
	return out
}

func produceTo(t *testing.T, cl *kgo.Client, topic string, p int32, value string) {
	t.Helper()
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// waitSessions waits until the server holds n fetch sessions.
func waitSessions(t *testing.T, tb *testBroker, n int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("%d fetch sessions", n), func() error {
		if got, _ := tb.srv.sessions.size(); got != n {
			return fmt.Errorf("%d fetch sessions, want %d", got, n)
		}
		return nil
	})
}

// TestFetchSessions: a full fetch opens a session; incremental fetches
// carry only changed partitions and are answered with only the partitions
// that have something new; forgotten partitions leave the session; a
// wrong epoch, an unknown id or another connection's session are refused
// without harm; epoch -1 fetches without a session; closing the
// connection ends its sessions.
func TestFetchSessions(t *testing.T) {
	tb := startBroker(t)
	const topic = "sessions"
	tb.createTopic(t, topic, 3)
	cl := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produceTo(t, cl, topic, 0, "a")
	produceTo(t, cl, topic, 1, "b")

	c := dialRaw(t, tb.addr)
	full := sessionFetch(c, topic, 0, 0, map[int32]int64{0: 0, 1: 0, 2: 0})
	if full.ErrorCode != 0 || full.SessionID == 0 {
		t.Fatalf("full fetch: error %d, session %d; want a session", full.ErrorCode, full.SessionID)
	}
	if got := answered(full); len(got) != 3 || got[0] == 0 || got[1] == 0 || got[2] != 0 {
		t.Fatalf("full fetch answered %v, want all three, records in 0 and 1", got)
	}
	id := full.SessionID

	// Positions move on; nothing new anywhere: an empty answer.
	if r := sessionFetch(c, topic, id, 1, map[int32]int64{0: 1, 1: 1}); r.ErrorCode != 0 || r.SessionID != id || len(answered(r)) != 0 {
		t.Fatalf("incremental 1: error %d, session %d, answered %v; want nothing", r.ErrorCode, r.SessionID, answered(r))
	}
	// A record in partition 2, which the request does not name: the
	// session still reads it.
	produceTo(t, cl, topic, 2, "c")
	if r := sessionFetch(c, topic, id, 2, nil); r.ErrorCode != 0 || fmt.Sprint(answered(r)) != fmt.Sprint(map[int32]int{2: answered(r)[2]}) || answered(r)[2] == 0 {
		t.Fatalf("incremental 2: error %d, answered %v; want only partition 2, with records", r.ErrorCode, answered(r))
	}
	// Partition 2 forgotten: its new record is not answered; partition 0's is.
	produceTo(t, cl, topic, 2, "d")
	produceTo(t, cl, topic, 0, "e")
	if r := sessionFetch(c, topic, id, 3, nil, 2); r.ErrorCode != 0 || len(answered(r)) != 1 || answered(r)[0] == 0 {
		t.Fatalf("incremental 3 forgetting 2: error %d, answered %v; want only partition 0", r.ErrorCode, answered(r))
	}
	// A wrong epoch changes nothing; the right one still works.
	if r := sessionFetch(c, topic, id, 9, nil); r.ErrorCode != kerr.InvalidFetchSessionEpoch.Code || r.SessionID != 0 || len(r.Topics) != 0 {
		t.Fatalf("wrong epoch: error %d, session %d, %d topics; want INVALID_FETCH_SESSION_EPOCH", r.ErrorCode, r.SessionID, len(r.Topics))
	}
	if r := sessionFetch(c, topic, id, 4, map[int32]int64{0: 2}); r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("incremental 4 after a wrong epoch: error %d, session %d", r.ErrorCode, r.SessionID)
	}
	// Unknown ids, and this session from another connection.
	if r := sessionFetch(c, topic, id+1, 1, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	other := dialRaw(t, tb.addr)
	if r := sessionFetch(other, topic, id, 5, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("another connection's session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	if r := sessionFetch(c, topic, id, 5, nil); r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("incremental 5 after another connection tried: error %d, session %d", r.ErrorCode, r.SessionID)
	}
	// A session opened with topic names, used with ids (v13+): refused,
	// and left as it was.
	byID := kmsg.NewPtrFetchRequest()
	byID.MaxBytes, byID.SessionID, byID.SessionEpoch = 1<<20, id, 6
	if r := c.ask(byID, 13).(*kmsg.FetchResponse); r.ErrorCode != kerr.FetchSessionTopicIDError.Code || r.SessionID != 0 {
		t.Fatalf("names then ids: error %d, session %d; want FETCH_SESSION_TOPIC_ID_ERROR", r.ErrorCode, r.SessionID)
	}
	if r := sessionFetch(c, topic, id, 6, nil); r.ErrorCode != 0 || r.SessionID != id {
		t.Fatalf("incremental 6 after ids were refused: error %d, session %d", r.ErrorCode, r.SessionID)
	}
	// Epoch -1: closes the session, answers without one.
	if r := sessionFetch(c, topic, id, -1, map[int32]int64{0: 0}); r.ErrorCode != 0 || r.SessionID != 0 || answered(r)[0] == 0 {
		t.Fatalf("final epoch: error %d, session %d, answered %v", r.ErrorCode, r.SessionID, answered(r))
	}
	waitSessions(t, tb, 0)
	// A new session ends with its connection.
	if r := sessionFetch(other, topic, 0, 0, map[int32]int64{0: 0}); r.SessionID == 0 {
		t.Fatal("no session opened")
	}
	waitSessions(t, tb, 1)
	other.nc.Close()
	waitSessions(t, tb, 0)
	// Forgetting every partition closes the session.
	r := sessionFetch(c, topic, 0, 0, map[int32]int64{1: 0})
	if r := sessionFetch(c, topic, r.SessionID, 1, nil, 1); r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("forgetting all: error %d, session %d; want none", r.ErrorCode, r.SessionID)
	}
	waitSessions(t, tb, 0)
}

// TestFetchSessionEviction: the cache holds MaxFetchSessions; a full
// fetch when it is full gets no session while the others are young, and
// takes the least recently used one's slot once it has been idle long
// enough; the evicted session's next fetch is FETCH_SESSION_ID_NOT_FOUND.
func TestFetchSessionEviction(t *testing.T) {
	tb := startBroker(t, func(c *Config) { c.MaxFetchSessions = 2 })
	const topic = "evict"
	tb.createTopic(t, topic, 1)
	a, b, c := dialRaw(t, tb.addr), dialRaw(t, tb.addr), dialRaw(t, tb.addr)
	ra := sessionFetch(a, topic, 0, 0, map[int32]int64{0: 0})
	rb := sessionFetch(b, topic, 0, 0, map[int32]int64{0: 0})
	if ra.SessionID == 0 || rb.SessionID == 0 {
		t.Fatalf("sessions %d, %d; want two", ra.SessionID, rb.SessionID)
	}
	if r := sessionFetch(b, topic, rb.SessionID, 1, nil); r.ErrorCode != 0 { // b used after a
		t.Fatalf("b incremental: %d", r.ErrorCode)
	}
	if r := sessionFetch(c, topic, 0, 0, map[int32]int64{0: 0}); r.ErrorCode != 0 || r.SessionID != 0 {
		t.Fatalf("third session while the cache is full of young ones: session %d, want none", r.SessionID)
	}
	sc := tb.srv.sessions
	sc.mu.Lock()
	sc.evictAfter = 0 // every session counts as idle for long
	sc.mu.Unlock()
	rc := sessionFetch(c, topic, 0, 0, map[int32]int64{0: 0})
	if rc.SessionID == 0 {
		t.Fatal("no session after the idle one could be evicted")
	}
	if r := sessionFetch(a, topic, ra.SessionID, 1, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("evicted session: error %d, want FETCH_SESSION_ID_NOT_FOUND", r.ErrorCode)
	}
	if r := sessionFetch(b, topic, rb.SessionID, 2, nil); r.ErrorCode != 0 || r.SessionID != rb.SessionID {
		t.Fatalf("b after the eviction: error %d, session %d", r.ErrorCode, r.SessionID)
	}
	m := tb.scrape(t)
	if n := m["strata_kafka_fetch_session_evictions_total"]; n != 1 {
		t.Errorf("%v evictions counted, want 1", n)
	}
	if n := m["strata_kafka_fetch_sessions"]; n != 2 {
		t.Errorf("%v fetch sessions in the metrics, want 2", n)
	}
}

// TestKgoFetchSession: kgo consuming many partitions uses a fetch session
// (incremental fetches) and reads every record.
func TestKgoFetchSession(t *testing.T) {
	tb := startBroker(t)
	const topic, partitions = "many", 24
	tb.createTopic(t, topic, partitions)
	cl := tb.client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(partitions) {
		produceTo(t, cl, topic, p, fmt.Sprint("first-", p))
	}
	consumer := tb.client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx := testCtx(t)
	seen := map[string]bool{}
	read := func(want int) {
		for len(seen) < want {
			fs := consumer.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("read %d of %d records", len(seen), want)
			}
			fs.EachError(func(_ string, p int32, err error) { t.Errorf("partition %d: %v", p, err) })
			fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
		}
	}
	read(partitions)
	// The consumer's session holds every partition and has moved past its
	// first incremental fetch.
	testutil.Eventually(t, 10*time.Second, "the consumer's session past its first incremental fetch", func() error {
		sessions, parts := tb.srv.sessions.size()
		if epoch := maxSessionEpoch(tb.srv.sessions); sessions != 1 || parts != partitions || epoch <= 2 {
			return fmt.Errorf("%d sessions holding %d partitions, epoch %d; want one holding %d, past epoch 2", sessions, parts, epoch, partitions)
		}
		return nil
	})
	// Records produced now arrive through incremental fetches.
	for p := range int32(partitions) {
		produceTo(t, cl, topic, p, fmt.Sprint("second-", p))
	}
	read(2 * partitions)
}

func maxSessionEpoch(sc *sessionCache) int32 {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	e := int32(0)
	for _, s := range sc.mu.sessions {
		e = max(e, s.epoch)
	}
	return e
}
