package kafka

import (
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDescribeClusterLogDirsProducers: DescribeCluster names this broker
// at its Kafka address as the controller, under the cluster's name, and
// refuses the controllers endpoint; DescribeLogDirs gives the data dir and
// each hosted partition's hot-tier bytes, as the broker counts them;
// DescribeProducers shows the idempotent producer that just wrote, with
// its id, epoch and last sequence.
func TestDescribeClusterLogDirsProducers(t *testing.T) {
	tb := startBroker(t)
	ctx := testCtx(t)
	tb.createTopic(t, "p", 2)
	cl := tb.client(t, kgo.DefaultProduceTopic("p"), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	var last *kgo.Record
	for i := range 5 {
		last = &kgo.Record{Partition: 0, Value: []byte(strconv.Itoa(i))}
		if err := cl.ProduceSync(ctx, last).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	req := kmsg.NewPtrDescribeClusterRequest()
	resp, err := req.RequestWith(ctx, cl)
	host, port, _ := net.SplitHostPort(tb.addr)
	if err != nil || resp.ErrorCode != 0 || resp.ClusterID != "strata" || resp.ControllerID != tb.ID() || len(resp.Brokers) != 1 ||
		resp.Brokers[0].NodeID != tb.ID() || resp.Brokers[0].Host != host || strconv.Itoa(int(resp.Brokers[0].Port)) != port {
		t.Fatalf("describe cluster: %+v %v", resp, err)
	}
	req.EndpointType = 2
	if resp, err := req.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.UnsupportedEndpointType.Code {
		t.Fatalf("describe the controllers: %+v %v", resp, err)
	}

	adm := kadm.NewClient(cl)
	dirs, err := adm.DescribeBrokerLogDirs(ctx, tb.ID(), nil)
	if err != nil || dirs.Error() != nil {
		t.Fatalf("describe log dirs: %v %v", err, dirs.Error())
	}
	d, _ := tb.DescribeTopic("p")
	for _, p := range d.Partitions {
		got, ok := dirs.Lookup(tb.DataDir(), "p", p.Partition)
		if !ok || got.Size != p.LocalBytes {
			t.Errorf("p/%d: described %+v (found %v), the broker has %d bytes", p.Partition, got, ok, p.LocalBytes)
		}
	}
	if got, _ := dirs.Lookup(tb.DataDir(), "p", 0); got.Size == 0 {
		t.Error("p/0 holds five records but is described empty")
	}
	if dir := dirs[tb.DataDir()]; dir.TotalBytes <= 0 || dir.UsableBytes <= 0 || dir.UsableBytes > dir.TotalBytes {
		t.Errorf("data dir space: total %d, usable %d", dir.TotalBytes, dir.UsableBytes)
	}

	var ts kadm.TopicsSet
	ts.Add("p", 0, 1)
	described, err := adm.DescribeProducers(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}
	producers := described.SortedProducers()
	if len(producers) != 1 || producers[0].ProducerID != last.ProducerID || producers[0].ProducerEpoch != last.ProducerEpoch ||
		producers[0].LastSequence != 4 || producers[0].Partition != 0 {
		t.Fatalf("producers: %+v; want %d epoch %d at sequence 4 in p/0", producers, last.ProducerID, last.ProducerEpoch)
	}
}
