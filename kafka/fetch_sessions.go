package kafka

// Fetch sessions (KIP-227), as Kafka keeps them (FetchSession.scala): a
// full fetch (session epoch 0) opens a session holding its partitions and
// the last answer's high watermark and log start of each, and the answer
// names the session id; the client then sends incremental fetches (the
// session id and the next epoch, 1, 2, ...) that carry only the partitions
// whose fetch position changed, plus the ones to add, and the ones to
// forget (forgotten topics). The broker reads every partition of the
// session and answers only those with records, a new high watermark or
// log start, an error, or a diverging epoch; partitions that had records
// move to the back of the session's order, so none starves the others
// under the byte limits.
//
// Rules:
//   - Epoch 0 with session id 0: a full fetch, a new session. With a
//     session id: that session is closed first, then as before.
//   - Epoch -1: a full fetch without a session (the session named, if any,
//     is closed); the answer's session id is 0.
//   - Epoch > 0: an incremental fetch. An unknown session id (never
//     opened, evicted, or opened on another connection: a session belongs
//     to the connection that opened it and ends with it) is
//     FETCH_SESSION_ID_NOT_FOUND; an epoch other than the session's next is
//     INVALID_FETCH_SESSION_EPOCH; a session opened with topic names (v7 to
//     v12) used with ids (v13+), or the other way round, is
//     FETCH_SESSION_TOPIC_ID_ERROR. Each answers with no partitions and
//     session id 0, and the session is left as it was; the client starts
//     over with a full fetch. An incremental fetch that forgets every
//     partition closes the session and is answered without one.
//   - Fetch v4 to v6 has no sessions.
//
// The cache is bounded (MaxFetchSessions, Kafka's
// max.incremental.fetch.session.cache.slots, 1000 by default). When full,
// a new session takes the slot of the least recently used one if that was
// unused for two minutes (Kafka's min.incremental.fetch.session.eviction.ms),
// else of the smallest session older than two minutes if the new one has
// at least as many partitions; else the full fetch is answered without a
// session (id 0), and the client goes on with full fetches. The sessions
// kept and evicted are in the metrics (strata_kafka_fetch_sessions,
// strata_kafka_fetch_session_evictions_total).

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
)

const (
	defaultMaxFetchSessions = 1000
	sessionEvictAfter       = 2 * time.Minute
)

// sessionKey names a partition in a session: by topic id (v13+) or name.
type sessionKey struct {
	topic     string
	id        [16]byte
	partition int32
}

// cachedPartition is a partition of a session: the fetch position the
// client last sent, and what the last answer told it.
type cachedPartition struct {
	key      sessionKey
	req      kmsg.FetchRequestTopicPartition
	hw       int64
	logStart int64
}

type fetchSession struct {
	id       int32
	owner    *conn
	usesIDs  bool
	epoch    int32 // the next incremental fetch's
	created  time.Time
	lastUsed time.Time
	parts    []*cachedPartition // in fetch order
	byKey    map[sessionKey]*cachedPartition
}

// sessionCache holds a server's fetch sessions.
type sessionCache struct {
	max        int
	evictAfter time.Duration
	now        func() time.Time
	metrics    *broker.KafkaMetrics // sessions kept and evicted
	mu         struct {
		sync.Mutex
		sessions map[int32]*fetchSession
	}
}

func newSessionCache(max int, m *broker.KafkaMetrics) *sessionCache {
	if max <= 0 {
		max = defaultMaxFetchSessions
	}
	sc := &sessionCache{max: max, evictAfter: sessionEvictAfter, now: time.Now, metrics: m}
	sc.mu.sessions = map[int32]*fetchSession{}
	return sc
}

// nextEpoch is the session epoch after e, as Kafka counts them.
func nextEpoch(e int32) int32 {
	switch {
	case e < 0:
		return -1
	case e == 1<<31-1:
		return 1
	}
	return e + 1
}

// fetchContext is one fetch's part in the session cache: the request to
// read (every partition of the session for an incremental fetch), and
// what to do with the answer.
type fetchContext struct {
	sc      *sessionCache
	c       *conn
	req     *kmsg.FetchRequest // what to read
	full    bool               // open a session with the answer
	session *fetchSession      // the incremental fetch's session
}

// begin resolves a fetch against the cache: the fetch context, or a
// session error code (nothing changed).
func (sc *sessionCache) begin(c *conn, req *kmsg.FetchRequest) (*fetchContext, int16) {
	fc := &fetchContext{sc: sc, c: c, req: req}
	if req.Version < 7 {
		return fc, 0
	}
	if req.SessionEpoch == 0 || req.SessionEpoch == -1 {
		if req.SessionID != 0 {
			sc.close(c, req.SessionID)
		}
		fc.full = req.SessionEpoch == 0
		return fc, 0
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	s, ok := sc.mu.sessions[req.SessionID]
	switch {
	case !ok || s.owner != c:
		return nil, kerr.FetchSessionIDNotFound.Code
	case s.epoch != req.SessionEpoch:
		return nil, kerr.InvalidFetchSessionEpoch.Code
	case s.usesIDs != (req.Version >= 13):
		return nil, kerr.FetchSessionTopicIDError.Code
	}
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := keyOf(req.Version, rt.Topic, rt.TopicID, rp.Partition)
			if cp, ok := s.byKey[k]; ok {
				cp.req = rp
				continue
			}
			cp := &cachedPartition{key: k, req: rp, hw: -1, logStart: -1}
			s.byKey[k] = cp
			s.parts = append(s.parts, cp)
		}
	}
	for _, ft := range req.ForgottenTopics {
		for _, p := range ft.Partitions {
			k := keyOf(req.Version, ft.Topic, ft.TopicID, p)
			if _, ok := s.byKey[k]; ok {
				delete(s.byKey, k)
				s.parts = removePart(s.parts, k)
			}
		}
	}
	if len(s.parts) == 0 {
		sc.removeLocked(s.id)
		return fc, 0 // sessionless: the request's own (empty) partitions
	}
	s.epoch = nextEpoch(s.epoch)
	s.lastUsed = sc.now()
	fc.session = s
	fc.req = s.requestLocked(req)
	return fc, 0
}

func keyOf(version int16, topic string, id [16]byte, partition int32) sessionKey {
	if version >= 13 {
		return sessionKey{id: id, partition: partition}
	}
	return sessionKey{topic: topic, partition: partition}
}

func removePart(parts []*cachedPartition, k sessionKey) []*cachedPartition {
	for i, cp := range parts {
		if cp.key == k {
			return append(parts[:i], parts[i+1:]...)
		}
	}
	return parts
}

// requestLocked is req with every partition of the session, in the
// session's order, grouped into topics as they come.
func (s *fetchSession) requestLocked(req *kmsg.FetchRequest) *kmsg.FetchRequest {
	out := *req
	out.Topics = nil
	out.ForgottenTopics = nil
	for _, cp := range s.parts {
		n := len(out.Topics)
		if n == 0 || out.Topics[n-1].Topic != cp.key.topic || out.Topics[n-1].TopicID != cp.key.id {
			t := kmsg.NewFetchRequestTopic()
			t.Topic, t.TopicID = cp.key.topic, cp.key.id
			out.Topics = append(out.Topics, t)
			n++
		}
		out.Topics[n-1].Partitions = append(out.Topics[n-1].Partitions, cp.req)
	}
	return &out
}

// finish sets the answer's session: opens one for a full fetch (if the
// cache has or makes room), or, for an incremental fetch, leaves out the
// partitions with nothing new and records what the answer told.
func (fc *fetchContext) finish(resp *kmsg.FetchResponse) {
	switch {
	case fc.session != nil:
		fc.sc.prune(fc.session, fc.req.Version, resp)
	case fc.full:
		resp.SessionID = fc.sc.open(fc.c, fc.req, resp)
	}
}

// open stores a new session of req's partitions with resp's answers and
// returns its id, or 0 when there is no room.
func (sc *sessionCache) open(c *conn, req *kmsg.FetchRequest, resp *kmsg.FetchResponse) int32 {
	s := &fetchSession{owner: c, usesIDs: req.Version >= 13, epoch: 1, byKey: map[sessionKey]*cachedPartition{}}
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			k := keyOf(req.Version, rt.Topic, rt.TopicID, rp.Partition)
			if _, dup := s.byKey[k]; dup {
				continue
			}
			cp := &cachedPartition{key: k, req: rp, hw: -1, logStart: -1}
			if i < len(resp.Topics) && j < len(resp.Topics[i].Partitions) {
				if p := resp.Topics[i].Partitions[j]; p.ErrorCode == 0 {
					cp.hw, cp.logStart = p.HighWatermark, p.LogStartOffset
				}
			}
			s.byKey[k] = cp
			s.parts = append(s.parts, cp)
		}
	}
	sc.mu.Lock()
	defer sc.mu.Unlock()
	now := sc.now()
	if len(sc.mu.sessions) >= sc.max && !sc.evictLocked(len(s.parts), now) {
		return 0
	}
	for s.id == 0 || sc.mu.sessions[s.id] != nil {
		s.id = rand.Int32N(1<<31-1) + 1
	}
	s.created, s.lastUsed = now, now
	sc.mu.sessions[s.id] = s
	sc.metrics.FetchSessions(1)
	return s.id
}

// evictLocked makes room for a session of size partitions, by Kafka's
// rules (see above), and reports whether it did.
func (sc *sessionCache) evictLocked(size int, now time.Time) bool {
	var lru, smallest *fetchSession
	for _, s := range sc.mu.sessions {
		if lru == nil || s.lastUsed.Before(lru.lastUsed) {
			lru = s
		}
		if now.Sub(s.created) > sc.evictAfter &&
			(smallest == nil || len(s.parts) < len(smallest.parts) || (len(s.parts) == len(smallest.parts) && s.id < smallest.id)) {
			smallest = s
		}
	}
	victim := (*fetchSession)(nil)
	switch {
	case lru != nil && now.Sub(lru.lastUsed) > sc.evictAfter:
		victim = lru
	case smallest != nil && size >= len(smallest.parts):
		victim = smallest
	default:
		return false
	}
	sc.removeLocked(victim.id)
	sc.metrics.FetchSessionEvicted()
	return true
}

// prune leaves out of an incremental answer the partitions with nothing
// new for the client (Kafka's CachedPartition.maybeUpdateResponseData),
// records the answer's high watermarks and log starts, and moves the
// partitions that had records to the back of the session's order.
func (sc *sessionCache) prune(s *fetchSession, version int16, resp *kmsg.FetchResponse) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	var moved []*cachedPartition
	topics := resp.Topics[:0]
	for _, t := range resp.Topics {
		kept := t.Partitions[:0]
		for _, p := range t.Partitions {
			cp := s.byKey[keyOf(version, t.Topic, t.TopicID, p.Partition)]
			if cp == nil {
				continue
			}
			must := len(p.RecordBatches) > 0 || p.ErrorCode != 0 || p.DivergingEpoch.Epoch >= 0 ||
				p.HighWatermark != cp.hw || p.LogStartOffset != cp.logStart
			cp.hw, cp.logStart = p.HighWatermark, p.LogStartOffset
			if p.ErrorCode != 0 {
				cp.hw = -1 // sent again once the error is gone
			}
			if len(p.RecordBatches) > 0 {
				moved = append(moved, cp)
			}
			if must {
				kept = append(kept, p)
			}
		}
		if len(kept) > 0 {
			t.Partitions = kept
			topics = append(topics, t)
		}
	}
	resp.Topics = topics
	for _, cp := range moved {
		s.parts = append(removePart(s.parts, cp.key), cp)
	}
	resp.SessionID = s.id
}

// close removes session id if c owns it.
func (sc *sessionCache) close(c *conn, id int32) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if s, ok := sc.mu.sessions[id]; ok && s.owner == c {
		sc.removeLocked(id)
	}
}

func (sc *sessionCache) removeLocked(id int32) {
	delete(sc.mu.sessions, id)
	sc.metrics.FetchSessions(-1)
}

// closeConn removes every session c opened: it has gone.
func (sc *sessionCache) closeConn(c *conn) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for id, s := range sc.mu.sessions {
		if s.owner == c {
			sc.removeLocked(id)
		}
	}
}

// size is the number of sessions and of partitions they hold.
func (sc *sessionCache) size() (sessions, partitions int) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	for _, s := range sc.mu.sessions {
		partitions += len(s.parts)
	}
	return len(sc.mu.sessions), partitions
}
