package client

import (
	"context"

	"google.golang.org/grpc"

	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// The SCRAM credential calls are thin wrappers over UserService, like the
// ACL calls: any broker takes them (forwarding writes to the controller),
// retried while the errors are retriable. The password never goes over
// the wire: the caller salts it (security.SCRAMSaltedPassword).

// SetSCRAMCredential stores user's credential for mechanism
// ("SCRAM-SHA-256" or "SCRAM-SHA-512") from a salted password; setting
// the same again is harmless.
func (c *Client) SetSCRAMCredential(ctx context.Context, user, mechanism string, salt []byte, iterations int, saltedPassword []byte) error {
	return c.callAny(ctx, "set the "+mechanism+" credential of "+user, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := stratav1.NewUserServiceClient(cc).SetSCRAMCredential(ctx, &stratav1.SetSCRAMCredentialRequest{
			User: user, Mechanism: mechanism, Salt: salt, Iterations: int32(iterations), SaltedPassword: saltedPassword})
		return err
	})
}

// DeleteSCRAMCredential removes user's credential for mechanism; one not
// stored fails with ErrInvalidRequest.
func (c *Client) DeleteSCRAMCredential(ctx context.Context, user, mechanism string) error {
	return c.callAny(ctx, "delete the "+mechanism+" credential of "+user, func(ctx context.Context, cc *grpc.ClientConn) error {
		_, err := stratav1.NewUserServiceClient(cc).DeleteSCRAMCredential(ctx, &stratav1.DeleteSCRAMCredentialRequest{User: user, Mechanism: mechanism})
		return err
	})
}

// ListSCRAMUsers returns the users with SCRAM credentials, sorted.
func (c *Client) ListSCRAMUsers(ctx context.Context) ([]*stratav1.SCRAMUser, error) {
	var resp *stratav1.ListSCRAMUsersResponse
	err := c.callAny(ctx, "list SCRAM users", func(ctx context.Context, cc *grpc.ClientConn) (err error) {
		resp, err = stratav1.NewUserServiceClient(cc).ListSCRAMUsers(ctx, &stratav1.ListSCRAMUsersRequest{})
		return err
	})
	return resp.GetUsers(), err
}
