package kafka

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestSCRAMAdminAPIs: kadm's AlterUserSCRAMs (AlterUserScramCredentials)
// creates a credential a client then logs in with, DescribeUserSCRAMs
// shows it (mechanism and iterations only), a delete stops the login;
// bad changes get Kafka's codes and change nothing; a principal without
// admin on the cluster is refused.
func TestSCRAMAdminAPIs(t *testing.T) {
	sb := startSecureBroker(t, "SCRAM-SHA-512")
	ctx := testCtx(t)
	admCl := sb.tlsClient(t, "admin")
	adm := kadm.NewClient(admCl)
	login := func() error {
		return sb.tlsClient(t, "", kgo.SASL(scram.Auth{User: "carol", Pass: "pw of carol"}.AsSha512Mechanism())).Ping(ctx)
	}

	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "pw of carol"},
		{User: "carol", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "pw of carol"},
	})
	if err != nil || altered["carol"].Err != nil {
		t.Fatalf("alter: %+v %v", altered, err)
	}
	if err := login(); err != nil {
		t.Fatalf("login with the credential AlterUserScramCredentials made: %v", err)
	}
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := described["carol"]
	if len(described) != 1 || got.Err != nil || len(got.CredInfos) != 2 ||
		got.CredInfos[0] != (kadm.CredInfo{Mechanism: kadm.ScramSha256, Iterations: 4096}) ||
		got.CredInfos[1] != (kadm.CredInfo{Mechanism: kadm.ScramSha512, Iterations: 8192}) {
		t.Fatalf("describe: %+v", described)
	}
	described, err = adm.DescribeUserSCRAMs(ctx, "nobody")
	if err != nil || !errors.Is(described["nobody"].Err, kerr.ResourceNotFound) {
		t.Fatalf("describe of a user without credentials: %+v %v", described, err)
	}

	dup := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for range 2 {
		u := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		u.Name = "carol"
		dup.Users = append(dup.Users, u)
	}
	dresp, err := admCl.Request(ctx, dup)
	if err != nil {
		t.Fatal(err)
	}
	if rs := dresp.(*kmsg.DescribeUserSCRAMCredentialsResponse).Results; len(rs) != 1 || rs[0].ErrorCode != kerr.DuplicateResource.Code {
		t.Fatalf("describe naming carol twice: %+v", rs)
	}

	// Raw, past kadm's own checks.
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := func(user string, mech int8, iterations int32) {
		u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		u.Name, u.Mechanism, u.Iterations = user, mech, iterations
		u.Salt, u.SaltedPassword = make([]byte, 16), make([]byte, 64)
		alter.Upsertions = append(alter.Upsertions, u)
	}
	del := func(user string, mech int8) {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = user, mech
		alter.Deletions = append(alter.Deletions, d)
	}
	up("few", 2, 100)    // iterations
	up("mech", 3, 4096)  // mechanism
	up("", 2, 4096)      // name
	up("short", 1, 4096) // a SHA-512-sized salted password for SHA-256
	del("ghost", 2)      // nothing stored
	del("carol", 1)      // and upserted again below: duplicate
	up("carol", 1, 4096) //
	up("two", 2, 4096)   // twice
	up("two", 2, 4096)   //
	resp, err := admCl.Request(ctx, alter)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int16{
		"few": kerr.UnacceptableCredential.Code, "mech": kerr.UnsupportedSaslMechanism.Code, "": kerr.UnacceptableCredential.Code,
		"short": kerr.UnacceptableCredential.Code, "ghost": kerr.ResourceNotFound.Code,
		"carol": kerr.DuplicateResource.Code, "two": kerr.DuplicateResource.Code,
	}
	results := resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results
	if len(results) != len(want) {
		t.Fatalf("%d results, want one per user: %+v", len(results), results)
	}
	for _, r := range results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("user %q: code %d, want %d", r.User, r.ErrorCode, want[r.User])
		}
	}
	if users := sb.SCRAMUsers(); len(users) != 1 || len(users["carol"]) != 2 {
		t.Fatalf("refused changes changed the credentials: %v", users)
	}
	if err := login(); err != nil {
		t.Fatalf("carol after refused changes: %v", err)
	}

	// Without admin on the cluster.
	bob := kadm.NewClient(sb.tlsClient(t, "bob"))
	if _, err := bob.DescribeUserSCRAMs(ctx); !errors.Is(err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("bob describes: %v", err)
	}
	if altered, err := bob.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil); !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(altered["carol"].Err, kerr.ClusterAuthorizationFailed) { // kadm lifts auth errors to the call
		t.Fatalf("bob deletes: %+v %v", altered, err)
	}

	altered, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || altered["carol"].Err != nil {
		t.Fatalf("delete: %+v %v", altered, err)
	}
	if err := login(); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("login after the delete: %v", err)
	}
}
