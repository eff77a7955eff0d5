package rpc

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/cluster"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/security"
)

// TestUserService: SCRAM credentials set, listed and deleted over gRPC
// land in the cluster metadata; bad ones are INVALID_ARGUMENT and change
// nothing; they outlive a restart; a delete of what is not stored is
// refused.
func TestUserService(t *testing.T) {
	cfg := brokerConfig(t, 1, t.TempDir())
	tb := startBroker(t, cfg)
	ctx := testCtx(t)
	users := stratav1.NewUserServiceClient(tb.conn)
	salt := security.NewSCRAMSalt()
	salted, err := security.SCRAMSaltedPassword("SCRAM-SHA-512", "pw", salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	set := &stratav1.SetSCRAMCredentialRequest{User: "carol", Mechanism: "SCRAM-SHA-512", Salt: salt, Iterations: 4096, SaltedPassword: salted}
	if _, err := users.SetSCRAMCredential(ctx, set); err != nil {
		t.Fatal(err)
	}
	cred, ok := tb.SCRAMCredential("carol", "SCRAM-SHA-512")
	wantStored, wantServer, _ := security.SCRAMKeys("SCRAM-SHA-512", salted)
	if !ok || cred.Iterations != 4096 || string(cred.StoredKey) != string(wantStored) || string(cred.ServerKey) != string(wantServer) {
		t.Fatalf("stored %+v %v", cred, ok)
	}
	for _, bad := range []*stratav1.SetSCRAMCredentialRequest{
		{User: "dave", Mechanism: "SCRAM-SHA-512", Salt: salt, Iterations: 100, SaltedPassword: salted},
		{User: "dave", Mechanism: "SCRAM-SHA-256", Salt: salt, Iterations: 4096, SaltedPassword: salted}, // 64 bytes for SHA-256
		{User: "dave", Mechanism: "PLAIN", Salt: salt, Iterations: 4096, SaltedPassword: salted},
		{User: "da ve", Mechanism: "SCRAM-SHA-512", Salt: salt, Iterations: 4096, SaltedPassword: salted},
	} {
		if _, err := users.SetSCRAMCredential(ctx, bad); status.Code(err) != codes.InvalidArgument {
			t.Errorf("set %+v: %v, want INVALID_ARGUMENT", bad, err)
		}
	}
	// The credential outlives a restart (the metadata's Raft log).
	tb.stop(t)
	tb = startBroker(t, cfg)
	users = stratav1.NewUserServiceClient(tb.conn)
	list, err := users.ListSCRAMUsers(ctx, &stratav1.ListSCRAMUsersRequest{})
	if err != nil || len(list.GetUsers()) != 1 || list.GetUsers()[0].GetUser() != "carol" || !slices.Equal(list.GetUsers()[0].GetMechanisms(), []string{"SCRAM-SHA-512"}) {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := users.DeleteSCRAMCredential(ctx, &stratav1.DeleteSCRAMCredentialRequest{User: "carol", Mechanism: "SCRAM-SHA-256"}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("delete of what is not stored: %v", err)
	}
	if _, err := users.DeleteSCRAMCredential(ctx, &stratav1.DeleteSCRAMCredentialRequest{User: "carol", Mechanism: "SCRAM-SHA-512"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := tb.SCRAMCredential("carol", "SCRAM-SHA-512"); ok {
		t.Fatal("the credential is still stored after the delete")
	}
}

// TestUserServiceRules: managing credentials needs admin on the cluster,
// like ACLs, since a credential makes a principal.
func TestUserServiceRules(t *testing.T) {
	acls := []security.ACL{{Principal: "User:ops", Resource: security.ResourceCluster, Op: security.OpAdmin},
		{Principal: "User:alice", Resource: security.ResourceTopic, Name: "orders", Op: security.OpAdmin}}
	a := &Auth{ACLs: func() []security.ACL { return acls }}
	for _, m := range []string{"SetSCRAMCredential", "DeleteSCRAMCredential", "ListSCRAMUsers"} {
		method := "/strata.v1.UserService/" + m
		if err := a.authorize(security.UserPrincipal("alice"), method, nil); broker.ReasonOf(err) != broker.ReasonPermissionDenied {
			t.Errorf("alice %s: %v, want PERMISSION_DENIED", m, err)
		}
		if err := a.authorize(security.UserPrincipal("ops"), method, nil); err != nil {
			t.Errorf("ops %s: %v", m, err)
		}
	}
}

// TestSCRAMWritesReachTheController: a broker that is not the controller
// passes credential writes on to it (broker/controller.go), so both the
// broker core and the gRPC API take them anywhere; a call already passed
// on once is refused naming the controller. Every broker then verifies the
// same credential.
func TestSCRAMWritesReachTheController(t *testing.T) {
	dir := t.TempDir()
	b1 := startBroker(t, brokerConfig(t, 1, filepath.Join(dir, "b1")))
	b2 := joinSecondBroker(t, b1, brokerConfig(t, 2, filepath.Join(dir, "b2")))
	ctx := testCtx(t)
	salt := security.NewSCRAMSalt()
	salted, _ := security.SCRAMSaltedPassword("SCRAM-SHA-256", "pw", salt, 4096)

	err := b2.SetSCRAMCredential(broker.Forwarded(ctx), "dave", "SCRAM-SHA-256", salt, 4096, salted)
	var be *broker.Error
	if !errors.As(err, &be) || be.Reason != broker.ReasonUnavailable || be.Meta["controller_address"] != b1.addr {
		t.Fatalf("SetSCRAMCredential passed on to broker 2: %v; want UNAVAILABLE naming the controller at %s", err, b1.addr)
	}
	// The Kafka front end answers NOT_CONTROLLER from this cause
	// (kafka/51_alter_user_scram_credentials.go).
	var nc *cluster.NotControllerError
	if !errors.As(err, &nc) || nc.ControllerID != 1 {
		t.Fatalf("SetSCRAMCredential on broker 2: %v does not carry the cluster's NotControllerError", err)
	}
	if err := b2.SetSCRAMCredential(ctx, "dave", "SCRAM-SHA-256", salt, 4096, salted); err != nil {
		t.Fatalf("SetSCRAMCredential on broker 2: %v", err)
	}
	if _, ok := b1.SCRAMCredential("dave", "SCRAM-SHA-256"); !ok {
		t.Fatal("the controller does not have the credential broker 2 passed on")
	}
	users := stratav1.NewUserServiceClient(b2.conn)
	if _, err := users.SetSCRAMCredential(ctx, &stratav1.SetSCRAMCredentialRequest{User: "carol", Mechanism: "SCRAM-SHA-256", Salt: salt, Iterations: 4096, SaltedPassword: salted}); err != nil {
		t.Fatalf("set through broker 2: %v", err)
	}
	if _, ok := b1.SCRAMCredential("carol", "SCRAM-SHA-256"); !ok {
		t.Fatal("the controller does not have the credential when the call returns")
	}
	testutil.WaitFor(t, 10*time.Second, "broker 2 to learn the credential", func() bool {
		_, ok := b2.SCRAMCredential("carol", "SCRAM-SHA-256")
		return ok
	})
	if _, err := users.DeleteSCRAMCredential(ctx, &stratav1.DeleteSCRAMCredentialRequest{User: "carol", Mechanism: "SCRAM-SHA-256"}); err != nil {
		t.Fatalf("delete through broker 2: %v", err)
	}
	if _, ok := b1.SCRAMCredential("carol", "SCRAM-SHA-256"); ok {
		t.Fatal("the controller still has the credential after the delete")
	}
}
