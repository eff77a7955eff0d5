package kafka

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/config"
	"github.com/strata-log/strata/internal/testutil"
)

// TestListOffsetsSpecial: ListOffsets v7+'s special times on a tiered
// partition: -3 the first record with the largest timestamp, -4 the first
// offset of the hot tier, -5 the last offset in the cold tier, each from
// its version on (UNSUPPORTED_VERSION below it), up to v10.
func TestListOffsetsSpecial(t *testing.T) {
	tb := startBrokerWith(t, func(c *config.Broker) { c.ObjectStore.Type = config.ObjectStoreFS })
	const topic = "special"
	if _, err := tb.CreateTopic(testCtx(t), topic, 1, 1, map[string]string{"remote.max.lag.ms": "1s", "local.retention.ms": "1"}); err != nil {
		t.Fatal(err)
	}
	cl := tb.client(t)
	base := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	for _, ds := range []int{1, 5, 3, 5, 2} { // the largest, 5 s, first at offset 1
		r := &kgo.Record{Topic: topic, Value: []byte("x"), Timestamp: base.Add(time.Duration(ds) * time.Second)}
		if err := cl.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	c := dialRaw(t, tb.addr)
	list := func(ts int64, version int16) kmsg.ListOffsetsResponseTopicPartition {
		req := kmsg.NewPtrListOffsetsRequest()
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp = ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return c.ask(req, version).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	}
	for _, v := range []int16{7, 10} {
		if p := list(-3, v); p.ErrorCode != 0 || p.Offset != 1 || p.Timestamp != base.Add(5*time.Second).UnixMilli() {
			t.Errorf("v%d max timestamp: error %d, offset %d, timestamp %d; want offset 1 at %d", v, p.ErrorCode, p.Offset, p.Timestamp, base.Add(5*time.Second).UnixMilli())
		}
	}
	for _, tc := range []struct {
		ts      int64
		version int16
	}{{-3, 6}, {-4, 7}, {-5, 8}, {-6, 10}} {
		if p := list(tc.ts, tc.version); p.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("time %d at v%d: error %d, want UNSUPPORTED_VERSION", tc.ts, tc.version, p.ErrorCode)
		}
	}
	// The records move to the cold tier and leave the hot one.
	testutil.Eventually(t, 30*time.Second, "the records to move to the cold tier", func() error {
		tiered, local, earliest := list(-5, 9), list(-4, 8), list(-2, 10)
		if tiered.ErrorCode == 0 && tiered.Offset == 4 && local.ErrorCode == 0 && local.Offset == 5 && earliest.Offset == 0 {
			if tiered.Timestamp != -1 || local.Timestamp != -1 {
				t.Errorf("-5 and -4 answered timestamps %d and %d, want -1", tiered.Timestamp, local.Timestamp)
			}
			return nil
		}
		return fmt.Errorf("latest tiered %+v, earliest local %+v, earliest %+v; want 4, 5 and 0", tiered, local, earliest)
	})
}
