package client

import (
	"context"
	"fmt"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc"
)

// ClusterStatus returns the cluster as one broker sees it: the brokers and
// whether its gossip shows them alive, the under-replicated and offline
// partitions (at most maxPartitions of each listed, 0 for the broker's
// default, with counts of all), and that broker's own upload lag and cold
// cache figures. Any broker answers; the call is retried on another while
// the errors are retriable.
func (c *Client) ClusterStatus(ctx context.Context, maxPartitions int32) (*stratav1.ClusterStatusResponse, error) {
	var resp *stratav1.ClusterStatusResponse
	err := c.callAny(ctx, "cluster status", func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).ClusterStatus(ctx, &stratav1.ClusterStatusRequest{MaxPartitions: maxPartitions})
		return err
	})
	return resp, err
}

// BrokerStatus is ClusterStatus answered by the broker at addr and no
// other, once: what a client needs of each broker to sum the upload lag and
// cache figures of the whole cluster.
func (c *Client) BrokerStatus(ctx context.Context, addr string, maxPartitions int32) (*stratav1.ClusterStatusResponse, error) {
	op := fmt.Sprintf("cluster status from %s", addr)
	cc, err := c.conn(addr)
	if err != nil {
		return nil, wrapOp(op, err)
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	defer cancel()
	resp, err := stratav1.NewAdminServiceClient(cc).ClusterStatus(rctx, &stratav1.ClusterStatusRequest{MaxPartitions: maxPartitions})
	if err != nil {
		return nil, wrapOp(op, err)
	}
	return resp, nil
}
