package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
)

// TestKafkaIdempotentProducerUnderFaults: an unmodified Kafka client (franz-go's
// kgo, idempotent, acks=all) writes to a topic of three replicas on three
// broker processes, each with its Kafka listener, while the leaders it
// writes to are killed with SIGKILL and restarted, or paused with SIGSTOP
// until the cluster has moved their partitions, and then resumed. Read back
// by kgo from every partition's start, every acknowledged record is there
// exactly once, at the partition and offset it was acknowledged with, and
// no record at all is there twice: the broker's producer state dedupes the
// retries kgo sends after each fault.
func TestKafkaIdempotentProducerUnderFaults(t *testing.T) {
	const (
		topic      = "kfaults"
		partitions = 3
		rate       = 400 // records per second, paced
	)
	tc := &testCluster{t: t}
	kafkaAddrs := make([]string, 3)
	for i := range 3 {
		tc.gossip = append(tc.gossip, freeport.Loopback(t))
		kafkaAddrs[i] = freeport.Loopback(t)
	}
	for i := range 3 {
		tc.brokers = append(tc.brokers, tc.newMember(i+1, tc.gossip[i], "--kafka-listen", kafkaAddrs[i]))
	}
	tc.start()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTopic(ctx, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	tc.waitInSync(ctx, time.Minute, "every partition led, with all three replicas in sync")

	cl, err := kgo.NewClient(
		kgo.SeedBrokers(kafkaAddrs...),
		kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RequestTimeoutOverhead(5*time.Second),
		kgo.RecordPartitioner(kgo.StickyKeyPartitioner(nil)),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	type position struct {
		partition int32
		offset    int64
	}
	var (
		mu     sync.Mutex
		acked  = map[string]position{}
		failed = map[string]error{}
	)
	ackedCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	stop := make(chan struct{})
	loadDone := make(chan int)
	go func() { // paced, keyed records numbered in order
		tick := time.NewTicker(time.Second / rate)
		defer tick.Stop()
		n := 0
		for {
			select {
			case <-stop:
				loadDone <- n
				return
			case <-tick.C:
			}
			v := "r" + strconv.Itoa(n)
			r := &kgo.Record{Key: []byte("k" + strconv.Itoa(n%30)), Value: []byte(v)}
			cl.Produce(ctx, r, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed[v] = err
					return
				}
				acked[v] = position{r.Partition, r.Offset}
			})
			n++
		}
	}()
	// progress waits for more records to be acknowledged: writes go on.
	progress := func(what string) {
		t.Helper()
		from := ackedCount()
		testutil.WaitFor(t, 2*time.Minute, fmt.Sprintf("200 more acknowledged writes %s", what), func() bool { return ackedCount() >= from+200 })
	}
	progress("before any fault")

	for round := range 2 {
		// kill -9 a leader, write on without it, restart it.
		victim := tc.byID(tc.leaderOf(ctx, topic, int32(round)))
		victim.kill9()
		progress(fmt.Sprintf("after broker %d was killed", victim.id))
		victim.start()
		tc.waitInSync(ctx, 2*time.Minute, fmt.Sprintf("broker %d back in every ISR", victim.id))

		// pause a leader until its partition has moved, then resume it.
		p := int32(round + 1)
		paused := tc.byID(tc.leaderOf(ctx, topic, p))
		if err := paused.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		testutil.WaitFor(t, 2*time.Minute, fmt.Sprintf("%s/%d led by another broker than paused %d", topic, p, paused.id), func() bool {
			l := tc.agreedLeader(ctx, topic, p, int32(paused.id))
			return l > 0 && l != int32(paused.id)
		})
		progress(fmt.Sprintf("while broker %d is paused", paused.id))
		paused.cmd.Process.Signal(syscall.SIGCONT)
		tc.waitInSync(ctx, 2*time.Minute, fmt.Sprintf("broker %d back in every ISR", paused.id))
	}
	progress("after the last fault")
	close(stop)
	sent := <-loadDone
	fctx, fcancel := context.WithTimeout(ctx, 2*time.Minute)
	if err := cl.Flush(fctx); err != nil {
		t.Errorf("records unanswered two minutes after the load stopped: %v", err)
	}
	fcancel()

	// Read everything back with a fresh Kafka client.
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end of %s/%d: %v", topic, o.Partition, o.Err)
		}
		want[o.Partition] = o.Offset
	})
	rd, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddrs...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart(), 2: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	found := map[string][]position{}
	read := map[int32]int64{}
	done := func() bool {
		for p, end := range want {
			if read[p] < end {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := rd.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read back %v of %v: %v", read, want, ctx.Err())
		}
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s/%d: %v (retried)", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			found[string(r.Value)] = append(found[string(r.Value)], position{r.Partition, r.Offset})
			read[r.Partition] = r.Offset + 1
		})
	}

	mu.Lock()
	defer mu.Unlock()
	for v, at := range found {
		if len(at) > 1 {
			t.Errorf("record %s stored %d times, at %v", v, len(at), at)
		}
	}
	for v, pos := range acked {
		at := found[v]
		if len(at) == 0 {
			t.Errorf("acknowledged record %s (%s/%d@%d) lost", v, topic, pos.partition, pos.offset)
		} else if at[0] != pos {
			t.Errorf("acknowledged record %s at %s/%d@%d, read back at %d@%d", v, topic, pos.partition, pos.offset, at[0].partition, at[0].offset)
		}
	}
	t.Logf("%d records sent, %d acknowledged, %d failed, %d stored; ends %v", sent, len(acked), len(failed), len(found), want)
	if len(acked) < sent/2 {
		t.Errorf("only %d of %d records acknowledged", len(acked), sent)
	}
	for v, err := range failed {
		t.Logf("record %s failed: %v", v, err)
		break
	}
}
