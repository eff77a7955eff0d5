package client_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/strata-log/strata/client"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
)

// TestACLCalls runs the ACL calls against a real broker, with the answer
// to the first create lost: the client retries, and the retry stores
// nothing twice. A bad ACL is refused at once, not retried.
func TestACLCalls(t *testing.T) {
	tb := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var calls, lost atomic.Int32
	icpt := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if method != stratav1.AdminService_CreateACLs_FullMethodName {
			return err
		}
		calls.Add(1)
		if err == nil && lost.Add(1) == 1 {
			return status.Error(codes.Unavailable, "test: the answer was lost")
		}
		return err
	}
	c, err := client.New(ctx, []string{tb.cfg.Listen}, client.WithDialOptions(grpc.WithUnaryInterceptor(icpt)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	alice := &stratav1.ACL{Principal: "User:alice", ResourceType: "topic", Name: "orders", Operation: "read"}
	ops := &stratav1.ACL{Principal: "User:ops", ResourceType: "cluster", Operation: "admin"}
	if err := c.CreateACLs(ctx, alice, ops); err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d CreateACLs calls, want 2 (the first answer was lost)", n)
	}
	acls, err := c.ListACLs(ctx, "")
	if err != nil || len(acls) != 2 || !proto.Equal(acls[0], alice) || !proto.Equal(acls[1], ops) {
		t.Fatalf("ListACLs after a retried create: %v, %v", acls, err)
	}
	if acls, err := c.ListACLs(ctx, "User:ops"); err != nil || len(acls) != 1 || !proto.Equal(acls[0], ops) {
		t.Fatalf("ListACLs of User:ops: %v, %v", acls, err)
	}

	calls.Store(0)
	bad := &stratav1.ACL{Principal: "User:alice", ResourceType: "group", Name: "g", Operation: "write"}
	err = c.CreateACLs(ctx, bad)
	if !errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), `"User:alice write group:g"`) {
		t.Fatalf("CreateACLs of a bad ACL: %v; want ErrInvalidRequest naming it", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("a refused CreateACLs was tried %d times", n)
	}

	if n, err := c.DeleteACLs(ctx, ops, bad); !errors.Is(err, client.ErrInvalidRequest) || n != 0 {
		t.Fatalf("DeleteACLs with a bad ACL: %d, %v", n, err)
	}
	if n, err := c.DeleteACLs(ctx, ops); err != nil || n != 1 {
		t.Fatalf("DeleteACLs: %d, %v; want 1", n, err)
	}
	if n, err := c.DeleteACLs(ctx, ops); err != nil || n != 0 {
		t.Fatalf("DeleteACLs of a deleted ACL: %d, %v; want 0 and no error", n, err)
	}
	if acls, err := c.ListACLs(ctx, ""); err != nil || len(acls) != 1 || !proto.Equal(acls[0], alice) {
		t.Fatalf("ListACLs after delete: %v, %v", acls, err)
	}
}
