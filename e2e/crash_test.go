package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/strata-log/strata/client"
)

// TestKill9KeepsEveryAcknowledgedRecord produces 100,000 keyed records with
// acks=all across 8 partitions to a broker process, kills it with SIGKILL
// (no shutdown, no final fsync), restarts it on the same data dir and reads
// everything back: every acknowledged record exactly once, in produce order
// within its partition, on the partition its key hashes to. A second wave is
// then produced while the broker is killed again, and every record
// acknowledged before the kill must survive that too.
func TestKill9KeepsEveryAcknowledgedRecord(t *testing.T) {
	const (
		partitions = 8
		total      = 100_000
		keys       = 5_000
	)
	b := newBroker(t, 1)
	b.start()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, []string{b.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, "crash", partitions, 1, map[string]string{"segment.bytes": "1MiB"}); err != nil {
		t.Fatal(err)
	}

	acked := newAckLog()
	p := c.NewProducer(client.WithLinger(2 * time.Millisecond))
	produceWave(ctx, t, p, acked, 0, total, keys)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, failed := acked.counts(); n != total || failed != 0 {
		t.Fatalf("%d acknowledged, %d failed; want all %d acknowledged", n, failed, total)
	}
	b.kill9()
	b.start()
	checkLog(ctx, t, c, acked, partitions, true)

	// Wave two: kill the broker while records are in flight. Records whose
	// acknowledgement arrived before the kill must survive; the producer's
	// retries after the restart may write others twice (it has no producer
	// identity yet), which the check allows for unacknowledged records only.
	acked2 := newAckLog()
	wave := make(chan struct{})
	go func() {
		defer close(wave)
		produceWave(ctx, t, p, acked2, total, 60_000, keys)
	}()
	deadline := time.Now().Add(time.Minute)
	for {
		if n, _ := acked2.counts(); n >= 20_000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("wave two made no progress")
		}
		<-time.After(time.Millisecond)
	}
	ackedBeforeKill := acked2.snapshot()
	b.kill9()
	b.start()
	<-wave
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	p.Close()
	all := newAckLog()
	all.merge(acked)
	all.mergeMap(ackedBeforeKill)
	checkLog(ctx, t, c, all, partitions, false)
	t.Logf("wave two: %d acknowledged before the kill, all present after restart", len(ackedBeforeKill))
}

// ackLog records which sequence numbers were acknowledged, and where.
type ackLog struct {
	mu     sync.Mutex
	where  map[int]position
	failed int
}

type position struct {
	partition int32
	offset    int64
}

func newAckLog() *ackLog { return &ackLog{where: map[int]position{}} }

func (a *ackLog) counts() (int, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.where), a.failed
}

func (a *ackLog) snapshot() map[int]position {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[int]position, len(a.where))
	for k, v := range a.where {
		out[k] = v
	}
	return out
}

func (a *ackLog) merge(b *ackLog) { a.mergeMap(b.snapshot()) }

func (a *ackLog) mergeMap(m map[int]position) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, v := range m {
		a.where[k] = v
	}
}

func keyOf(seq, keys int) []byte { return []byte(fmt.Sprintf("key-%05d", seq%keys)) }

// produceWave produces records seq0..seq0+n-1; each value holds its sequence
// number and 100 bytes of padding.
func produceWave(ctx context.Context, t *testing.T, p *client.Producer, acked *ackLog, seq0, n, keys int) {
	for seq := seq0; seq < seq0+n; seq++ {
		v := make([]byte, 108)
		binary.BigEndian.PutUint64(v, uint64(seq))
		r := &client.Record{Topic: "crash", Partition: client.AnyPartition, Key: keyOf(seq, keys), Value: v}
		p.Produce(ctx, r, func(r *client.Record, err error) {
			acked.mu.Lock()
			defer acked.mu.Unlock()
			if err != nil {
				acked.failed++
				return
			}
			acked.where[int(binary.BigEndian.Uint64(r.Value))] = position{r.Partition, r.Offset}
		})
	}
}

// checkLog reads every partition to its end and checks it against the
// acknowledged records: each is present at the offset it was acknowledged
// with, on the partition its key hashes to; records of a key appear in
// produce order; offsets are dense. With exact, nothing else is in the log.
func checkLog(ctx context.Context, t *testing.T, c *client.Client, acked *ackLog, partitions int32, exact bool) {
	t.Helper()
	k := c.NewConsumer(client.WithStopAtEnd(true))
	defer k.Close()
	for p := range partitions {
		if err := k.Assign("crash", p, client.Earliest()); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int]position{}
	next := map[int32]int64{}
	lastSeqOfKey := map[string]int{}
	records := 0
	for {
		recs, err := k.Poll(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			records++
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d after %d: offsets must be dense", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			seq := int(binary.BigEndian.Uint64(r.Value))
			if want := client.KeyPartition(r.Key, partitions); r.Partition != want {
				t.Fatalf("key %s on partition %d, its hash names %d", r.Key, r.Partition, want)
			}
			if last, ok := lastSeqOfKey[string(r.Key)]; ok && seq <= last && exact {
				t.Fatalf("key %s: record %d after %d", r.Key, seq, last)
			}
			lastSeqOfKey[string(r.Key)] = seq
			if _, dup := seen[seq]; dup && exact {
				t.Fatalf("record %d appears twice", seq)
			}
			if _, dup := seen[seq]; !dup {
				seen[seq] = position{r.Partition, r.Offset}
			}
		}
	}
	want := acked.snapshot()
	for seq, at := range want {
		got, ok := seen[seq]
		if !ok {
			t.Fatalf("acknowledged record %d (partition %d offset %d) is missing", seq, at.partition, at.offset)
		}
		if got != at {
			t.Fatalf("record %d acknowledged at %v, read at %v", seq, at, got)
		}
	}
	if exact && records != len(want) {
		t.Fatalf("read %d records, %d were acknowledged", records, len(want))
	}
}
