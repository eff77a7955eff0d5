package e2e

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
)

// TestKafkaGroupFollowsTheController: on three `strata serve` processes
// with Kafka listeners, FindCoordinator asked of any broker names the
// controller, where groups are coordinated. Two kgo members of a classic
// consumer group (cooperative-sticky), seeded with a broker that is not the
// controller, consume a topic; the controller is then killed with SIGKILL.
// The members find the new controller (NOT_COORDINATOR, FindCoordinator
// again), the group goes on, and every record produced before and after the
// kill is consumed by the group, none skipped.
func TestKafkaGroupFollowsTheController(t *testing.T) {
	tc := &testCluster{t: t}
	kafkaAddrs := map[int32]string{}
	for i := range 3 {
		tc.gossip = append(tc.gossip, freeport.Loopback(t))
		kafkaAddrs[int32(i+1)] = freeport.Loopback(t)
	}
	for i := range 3 {
		tc.brokers = append(tc.brokers, tc.newMember(i+1, tc.gossip[i], "--kafka-listen", kafkaAddrs[int32(i+1)]))
	}
	tc.start()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := client.New(ctx, tc.addrs())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const topic, partitions = "kgroup", 4
	if _, err := c.CreateTopic(ctx, topic, partitions, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	tc.waitInSync(ctx, time.Minute, "every partition led, with all three replicas in sync")
	ctrl := tc.controllerOf(ctx)
	other := int32(1)
	if other == ctrl {
		other = 2
	}

	// Any broker names the controller.
	for id, addr := range kafkaAddrs {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKeys = []string{"billing"}
		resp, err := req.RequestWith(ctx, cl) // only the seed is known yet
		cl.Close()
		if err != nil || len(resp.Coordinators) != 1 || resp.Coordinators[0].ErrorCode != 0 || resp.Coordinators[0].NodeID != ctrl {
			t.Fatalf("FindCoordinator asked of broker %d: %+v %v, want the controller %d", id, resp, err, ctrl)
		}
	}

	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	member := func(name string) *kgo.Client {
		cl, err := kgo.NewClient(
			kgo.SeedBrokers(kafkaAddrs[other]),
			kgo.ConsumerGroup("billing"),
			kgo.ConsumeTopics(topic),
			kgo.Balancers(kgo.CooperativeStickyBalancer()),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.SessionTimeout(6*time.Second),
			kgo.ClientID(name),
		)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					mu.Lock()
					seen[string(r.Value)] = true
					mu.Unlock()
				})
			}
		}()
		return cl
	}
	m1, m2 := member("m1"), member("m2")
	defer m1.Close()
	defer m2.Close()

	prod, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddrs[other]), kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			r := &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))}
			if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	consumed := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			for i := range n {
				if !seen["v"+strconv.Itoa(i)] {
					return false
				}
			}
			return true
		}
	}
	produce(0, 200)
	testutil.WaitFor(t, time.Minute, "the group to consume the first 200 records", consumed(200))

	tc.byID(ctrl).kill9()
	produce(200, 400)
	testutil.WaitFor(t, 2*time.Minute, fmt.Sprintf("the group to consume every record after controller %d was killed", ctrl), consumed(400))
	newCtrl := tc.controllerOf(ctx, ctrl)
	t.Logf("controller %d killed; %d took over; the group consumed all 400 records", ctrl, newCtrl)
}
