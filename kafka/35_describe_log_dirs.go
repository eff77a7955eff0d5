package kafka

// DescribeLogDirs, v1 to v4 (v0 left Kafka in 4.0, KIP-896): one log dir,
// the broker's data_dir, with the partitions of the topics asked for (all
// when null) that this broker holds a replica of, each with the size of
// its hot tier on local disk. Bytes in the cold tier (the object store)
// are not counted, as Kafka counts only local log segments; strata topic
// describe shows them. offset_lag is 0 (Strata has no future log dirs).
// total_bytes and usable_bytes (v4) are the data dir's file system's, -1
// when they cannot be read. Partitions this broker does not hold, and
// unknown topics, are left out, as Kafka does. Needs admin on the cluster
// (CLUSTER_AUTHORIZATION_FAILED, at the top from v3; before v3 the answer
// is then empty).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

func handleDescribeLogDirs(_ context.Context, c *conn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if code, err := c.authorize("DescribeLogDirs", security.ResourceCluster, broker.ClusterAdmin()); err != nil {
		resp.ErrorCode = code
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = c.s.b.DataDir()
	dir.TotalBytes, dir.UsableBytes = -1, -1
	if total, usable, err := c.s.b.DataDirSpace(); err == nil {
		dir.TotalBytes, dir.UsableBytes = total, usable
	}
	asked := map[string][]int32{} // nil: every partition
	if req.Topics == nil {
		for _, t := range c.s.b.ListTopics() {
			asked[t.Name] = nil
		}
	}
	for _, rt := range req.Topics {
		asked[rt.Topic] = append(asked[rt.Topic], rt.Partitions...)
	}
	for name, partitions := range asked {
		d, err := c.s.b.DescribeTopic(name)
		if err != nil {
			continue
		}
		t := kmsg.NewDescribeLogDirsResponseDirTopic()
		t.Topic = name
		for _, p := range d.Partitions {
			if !p.Hosted || (partitions != nil && !containsInt32(partitions, p.Partition)) {
				continue
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size = p.Partition, p.LocalBytes
			t.Partitions = append(t.Partitions, rp)
		}
		if len(t.Partitions) > 0 {
			dir.Topics = append(dir.Topics, t)
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}

func containsInt32(s []int32, v int32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
