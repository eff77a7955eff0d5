package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// ListGroups lists the consumer groups that have members or committed
// offsets (those this client may read).
func (c *Client) ListGroups(ctx context.Context) ([]*stratav1.GroupSummary, error) {
	var resp *stratav1.ListGroupsResponse
	err := c.callAny(ctx, "list groups", func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewGroupServiceClient(cc).ListGroups(ctx, &stratav1.ListGroupsRequest{})
		return err
	})
	if err != nil {
		return nil, err
	}
	return resp.GetGroups(), nil
}

// DescribeGroup returns a group's members, what each owns, and its
// committed offsets (ErrGroupNotFound when it has neither).
func (c *Client) DescribeGroup(ctx context.Context, group string) (*stratav1.DescribeGroupResponse, error) {
	var resp *stratav1.DescribeGroupResponse
	err := c.callAny(ctx, fmt.Sprintf("describe group %q", group), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewGroupServiceClient(cc).DescribeGroup(ctx, &stratav1.DescribeGroupRequest{Group: group})
		return err
	})
	return resp, err
}

// ResetGroupOffsets sets a group's positions: for each partition the next
// offset the group will consume. It is refused (ErrGroupNotEmpty) while the
// group has members, unless force, which removes them first; it returns how
// many it removed.
func (c *Client) ResetGroupOffsets(ctx context.Context, group string, offsets map[TopicPartition]int64, force bool) (int, error) {
	req := &stratav1.ResetGroupOffsetsRequest{Group: group, Force: force, Offsets: committedOffsets(offsets)}
	var resp *stratav1.ResetGroupOffsetsResponse
	err := c.callAny(ctx, fmt.Sprintf("reset offsets of group %q", group), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewGroupServiceClient(cc).ResetGroupOffsets(ctx, req)
		return err
	})
	return int(resp.GetRemovedMembers()), err
}

// DeleteGroup removes a group's committed offsets. It is refused
// (ErrGroupNotEmpty) while the group has members, unless force, which
// removes them first; it returns how many it removed.
func (c *Client) DeleteGroup(ctx context.Context, group string, force bool) (int, error) {
	var resp *stratav1.DeleteGroupResponse
	err := c.callAny(ctx, fmt.Sprintf("delete group %q", group), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewGroupServiceClient(cc).DeleteGroup(ctx, &stratav1.DeleteGroupRequest{Group: group, Force: force})
		return err
	})
	return int(resp.GetRemovedMembers()), err
}
