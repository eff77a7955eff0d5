package kafka

// Fetch, v4 to v17: each partition's batches as stored (broker.Fetch: the
// hot tier, or the cold tier below it, bytes never decoded), up to the
// high watermark.
//
// Sessions (KIP-227, v7+) are in fetch_sessions.go: a full fetch opens
// one, an incremental fetch reads every partition of its session and is
// answered with those that have something new. Topics are named (v4 to
// v12) or by id (v13+, UNKNOWN_TOPIC_ID when no topic has it).
//
// Sizes: each partition gets at most its PartitionMaxBytes and what is left
// of the request's MaxBytes (the broker's limits.max_fetch_bytes caps
// both); as in Kafka, the first batch that has data is sent whole even
// when larger, and partitions after the request's bytes run out are
// answered with their watermarks and no records.
//
// Waiting, simply: if nothing at all is found and no partition has an
// error, the request waits up to MaxWaitMillis for any of its partitions
// to get a record, then reads once more; any bytes (even fewer than
// MinBytes) are answered at once. With no transactions, the last stable
// offset is the high watermark and no aborted transactions are listed;
// isolation level makes no difference. Leader epochs (KIP-320: the
// current leader epoch checked, the diverging epoch answered) are in
// epochs.go; KIP-951's leader hints on NOT_LEADER_OR_FOLLOWER in
// brokers.go. No preferred read replica is named (-1). A partition
// without records has an empty record set, never a null one (librdkafka
// refuses null). Errors per partition come from errors.go, offsets -1;
// over the fetch quota the wait is the response's ThrottleMillis.
// With authentication each topic needs read (auth.go):
// TOPIC_AUTHORIZATION_FAILED for its partitions otherwise.
//
// A read below the hot tier starts read-ahead of the cold chunks after it;
// that lives as long as the connection (conn.ctx), not the request, so the
// consumer's next fetch finds them cached rather than cancelled.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleFetch(ctx context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FetchRequest)
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	fc, code := c.s.sessions.begin(c, req) // fetch_sessions.go
	if code != 0 {
		resp.ErrorCode = code
		return resp, nil
	}
	req = fc.req // an incremental fetch reads its whole session
	var names map[[16]byte]string
	if req.Version >= 13 {
		names = topicNames(c.s.b)
	}
	found, failed := fetchOnce(ctx, c, req, resp, names)
	if found == 0 && !failed && req.MaxWaitMillis > 0 {
		waitAny(ctx, c.s.b, req, resp, names, time.Duration(req.MaxWaitMillis)*time.Millisecond)
		resp.Topics = nil
		resp.ThrottleMillis = 0
		fetchOnce(ctx, c, req, resp, names)
	}
	c.s.fetchLeaderHints(resp, names) // brokers.go
	fc.finish(resp)
	return resp, nil
}

// fetchOnce reads every partition of req without waiting into resp, and
// returns the bytes found and whether any partition failed.
func fetchOnce(ctx context.Context, c *conn, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, names map[[16]byte]string) (int, bool) {
	b := c.s.b
	left := int(req.MaxBytes)
	if left <= 0 {
		left = 1 << 31 / 2
	}
	total, failed := 0, false
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name, known := rt.Topic, true
		if req.Version >= 13 {
			name, known = names[rt.TopicID]
		}
		var denied error
		if known {
			denied = c.allowTopic("Fetch", name, security.OpRead) // auth.go
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = -1, -1, -1
			// Empty, not null: librdkafka refuses a null record set.
			p.RecordBatches = []byte{}
			if !known {
				p.ErrorCode = kerr.UnknownTopicID.Code
				failed = true
				t.Partitions = append(t.Partitions, p)
				continue
			}
			if denied != nil {
				p.ErrorCode = codeOf(denied)
				failed = true
				t.Partitions = append(t.Partitions, p)
				continue
			}
			if fetchEpochs(ctx, b, req.Version, name, rp, &p) { // epochs.go
				failed = true // answered at once: an error or a diverging epoch
				t.Partitions = append(t.Partitions, p)
				continue
			}
			maxBytes := max(int(rp.PartitionMaxBytes), 1)
			if total > 0 {
				maxBytes = min(maxBytes, max(left, 1))
			}
			// Read-ahead of the cold tier outlives this request: the
			// consumer's next fetch is on its way.
			res, err := b.Fetch(ctx, broker.FetchRequest{Topic: name, Partition: rp.Partition, Offset: rp.FetchOffset, MaxBytes: maxBytes,
				ReadAhead: c.ctx, Buffer: c.lend}) // conn.go: reused once the answer is written
			c.hold(res) // a cold read's chunk: released once the answer is written
			if err != nil {
				p.ErrorCode = codeOf(err)
				resp.ThrottleMillis = max(resp.ThrottleMillis, throttleOf(err))
				failed = true
				t.Partitions = append(t.Partitions, p)
				continue
			}
			p.HighWatermark, p.LastStableOffset, p.LogStartOffset = res.HighWatermark, res.HighWatermark, res.LogStartOffset
			if len(res.Batches) > 0 && (total == 0 || len(res.Batches) <= left) {
				p.RecordBatches = res.Batches
				total += len(res.Batches)
				left -= len(res.Batches)
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return total, failed
}

// waitAny returns once any partition of req (as resp answered it, without
// error) has a record past its fetch offset, wait has passed, or ctx ends.
func waitAny(ctx context.Context, b *broker.Broker, req *kmsg.FetchRequest, resp *kmsg.FetchResponse, names map[[16]byte]string, wait time.Duration) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	done := make(chan struct{}, 1)
	n := 0
	for i, rt := range req.Topics {
		if i >= len(resp.Topics) {
			break
		}
		name := rt.Topic
		if req.Version >= 13 {
			name = names[rt.TopicID]
		}
		for j, rp := range rt.Partitions {
			if j >= len(resp.Topics[i].Partitions) || resp.Topics[i].Partitions[j].ErrorCode != 0 {
				continue
			}
			n++
			go func() {
				res, _ := b.Fetch(wctx, broker.FetchRequest{Topic: name, Partition: rp.Partition, Offset: rp.FetchOffset, MaxBytes: 1, MaxWait: wait})
				res.Release() // only its arrival counts
				select {
				case done <- struct{}{}:
				default:
				}
			}()
		}
	}
	if n == 0 {
		<-wctx.Done()
		return
	}
	select {
	case <-done:
	case <-wctx.Done():
	}
}
