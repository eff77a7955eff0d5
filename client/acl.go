package client

import (
	"context"
	"fmt"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"google.golang.org/grpc"
)

// The ACL calls are thin wrappers over AdminService, like the topic admin
// calls in admin.go: they go to any broker (which forwards writes to the
// controller) and are retried while the errors are retriable. An ACL is a
// *stratav1.ACL: Principal "User:<name>" or "*", ResourceType "topic",
// "group" or "cluster", Name (a prefix when Prefix is set; empty for the
// cluster) and Operation "read", "write" or "admin". The broker checks
// them; an invalid one fails the call with ErrInvalidRequest naming it.

// CreateACLs stores ACLs in the cluster. Those already stored are skipped,
// so the retries are harmless. All are stored or none.
func (c *Client) CreateACLs(ctx context.Context, acls ...*stratav1.ACL) error {
	return c.callAny(ctx, fmt.Sprintf("create %d ACLs", len(acls)), func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := stratav1.NewAdminServiceClient(cc).CreateACLs(ctx, &stratav1.CreateACLsRequest{Acls: acls})
		return err
	})
}

// DeleteACLs removes the stored ACLs equal to those given and returns how
// many it removed; ACLs that are not stored are not an error. Should an
// answer be lost and the call retried, the count is that of the last
// attempt, which may be lower than what was removed.
func (c *Client) DeleteACLs(ctx context.Context, acls ...*stratav1.ACL) (int, error) {
	var resp *stratav1.DeleteACLsResponse
	err := c.callAny(ctx, fmt.Sprintf("delete %d ACLs", len(acls)), func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).DeleteACLs(ctx, &stratav1.DeleteACLsRequest{Acls: acls})
		return err
	})
	return int(resp.GetRemoved()), err
}

// ListACLs returns the stored ACLs in the order they were added: all of
// them, or with principal not empty only those of that principal ("*"
// gives those granted to every principal).
func (c *Client) ListACLs(ctx context.Context, principal string) ([]*stratav1.ACL, error) {
	var resp *stratav1.ListACLsResponse
	err := c.callAny(ctx, "list ACLs", func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewAdminServiceClient(cc).ListACLs(ctx, &stratav1.ListACLsRequest{Principal: principal})
		return err
	})
	return resp.GetAcls(), err
}
