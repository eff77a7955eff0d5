package kafka

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/strata-log/strata/security"
)

// TestACLs: kadm creates ACLs Strata can express, which the broker then
// holds as Strata ACLs; those it cannot express (DENY, a host, DESCRIBE, a
// transactional id) or that the broker refuses (WRITE on a group) are
// refused and nothing is stored; DescribeAcls lists them back as Kafka
// bindings, filtered (MATCH included); DeleteAcls removes what a filter
// matches from the broker.
func TestACLs(t *testing.T) {
	tb := startBroker(t)
	adm := adminOf(t, tb)
	ctx := testCtx(t)

	create := func(b *kadm.ACLBuilder) kadm.CreateACLsResults {
		t.Helper()
		res, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatalf("create ACLs: %v", err)
		}
		return res
	}
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:bob").Topics("logs.").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternPrefixed),
		kadm.NewACLs().Allow("User:*").Groups("*").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral),
		kadm.NewACLs().Allow("User:ops").Clusters().Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral),
	} {
		if res := create(b); len(res) != 1 || res[0].Err != nil {
			t.Fatalf("create: %+v", res)
		}
	}
	want := []security.ACL{
		{Principal: "User:alice", Resource: security.ResourceTopic, Name: "orders", Op: security.OpRead},
		{Principal: "User:bob", Resource: security.ResourceTopic, Name: "logs.", Prefix: true, Op: security.OpWrite},
		{Principal: security.AnyPrincipal, Resource: security.ResourceGroup, Prefix: true, Op: security.OpRead},
		{Principal: "User:ops", Resource: security.ResourceCluster, Op: security.OpAdmin},
	}
	if got := tb.ACLs(""); !slices.Equal(got, want) {
		t.Fatalf("the broker holds %+v, want %+v", got, want)
	}

	for _, r := range []struct {
		what    string
		b       *kadm.ACLBuilder
		mention string
	}{
		{"deny", kadm.NewACLs().Deny("User:eve").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral), "ALLOW"},
		{"a host", kadm.NewACLs().Allow("User:eve").AllowHosts("10.0.0.1").Topics("orders").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral), "host"},
		{"describe only", kadm.NewACLs().Allow("User:eve").Topics("orders").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral), "DESCRIBE"},
		{"a transactional id", kadm.NewACLs().Allow("User:eve").TransactionalIDs("tx").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral), "TRANSACTIONAL_ID"},
		{"write on a group", kadm.NewACLs().Allow("User:eve").Groups("g").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral), "operation"},
	} {
		res := create(r.b)
		if len(res) != 1 || !errors.Is(res[0].Err, kerr.InvalidRequest) || !strings.Contains(res[0].ErrMessage, r.mention) {
			t.Errorf("%s: %+v; want INVALID_REQUEST mentioning %s", r.what, res, r.mention)
		}
	}
	if got := tb.ACLs(""); !slices.Equal(got, want) {
		t.Fatalf("refused creates changed the ACLs: %+v", got)
	}

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(described) == 0 {
		t.Fatalf("describe: %v %+v", err, described)
	}
	var all []kadm.DescribedACL
	for _, d := range described {
		if d.Err != nil {
			t.Fatalf("describe: %v", d.Err)
		}
		all = append(all, d.Described...)
	}
	bob := kadm.DescribedACL{Principal: "User:bob", Host: "*", Type: kmsg.ACLResourceTypeTopic, Name: "logs.", Pattern: kadm.ACLPatternPrefixed,
		Operation: kadm.OpWrite, Permission: kmsg.ACLPermissionTypeAllow}
	anyGroup := kadm.DescribedACL{Principal: "User:*", Host: "*", Type: kmsg.ACLResourceTypeGroup, Name: "*", Pattern: kadm.ACLPatternLiteral,
		Operation: kadm.OpRead, Permission: kmsg.ACLPermissionTypeAllow}
	ops := kadm.DescribedACL{Principal: "User:ops", Host: "*", Type: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kadm.ACLPatternLiteral,
		Operation: kadm.OpAll, Permission: kmsg.ACLPermissionTypeAllow}
	for _, w := range []kadm.DescribedACL{bob, anyGroup, ops} {
		if !slices.Contains(all, w) {
			t.Errorf("describe lacks %+v: %+v", w, all)
		}
	}
	if len(all) != 4 {
		t.Errorf("describe lists %d bindings, want 4: %+v", len(all), all)
	}

	// MATCH: the bindings that apply to a topic named logs.app.
	req := kmsg.NewPtrDescribeACLsRequest()
	name := "logs.app"
	req.ResourceType, req.ResourceName, req.ResourcePatternType = kmsg.ACLResourceTypeTopic, &name, kmsg.ACLResourcePatternTypeMatch
	req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, tb.client(t))
	if err != nil || resp.ErrorCode != 0 || len(resp.Resources) != 1 || resp.Resources[0].ResourceName != "logs." {
		t.Fatalf("describe MATCH logs.app: %+v %v", resp, err)
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:bob").AllowHosts().AnyResource().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	if err != nil || len(deleted) != 1 || deleted[0].Err != nil || len(deleted[0].Deleted) != 1 || deleted[0].Deleted[0].Name != "logs." {
		t.Fatalf("delete bob's: %v %+v", err, deleted)
	}
	if got := tb.ACLs(""); len(got) != 3 || slices.Contains(got, want[1]) {
		t.Fatalf("after the delete the broker holds %+v", got)
	}
}

// TestAdminAuthorization: on a listener that authenticates, admin
// requests are authorized by the broker's rules for the connection's
// principal (its client certificate): a principal without ACLs is refused
// (TOPIC_ / CLUSTER_AUTHORIZATION_FAILED) and changes nothing; an ACL
// granted by a superuser through CreateAcls lets it do what the ACL says
// and no more.
func TestAdminAuthorization(t *testing.T) {
	sb := startSecureBroker(t)
	tb := sb.testBroker
	alice := kadm.NewClient(sb.tlsClient(t, "alice"))
	root := kadm.NewClient(sb.tlsClient(t, "admin"))
	ctx := testCtx(t)
	tb.createTopic(t, "existing", 1)

	res, err := alice.CreateTopics(ctx, 1, 1, nil, "alice.t")
	if err != nil || !errors.Is(res["alice.t"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice creates without an ACL: %v %+v", err, res)
	}
	if _, err := tb.DescribeTopic("alice.t"); err == nil {
		t.Fatal("a refused create made the topic")
	}
	if cfgs, err := alice.DescribeTopicConfigs(ctx, "existing"); !errors.Is(err, kerr.TopicAuthorizationFailed) && (len(cfgs) != 1 || !errors.Is(cfgs[0].Err, kerr.TopicAuthorizationFailed)) {
		t.Fatalf("alice describes existing's settings: %v %+v", err, cfgs)
	}
	if acls, err := alice.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)); err != nil || !errors.Is(acls[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice grants herself the cluster: %v %+v", err, acls)
	}
	if len(tb.ACLs("")) != 0 {
		t.Fatalf("a refused CreateAcls stored %+v", tb.ACLs(""))
	}
	if d, err := alice.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny)); err != nil || len(d) != 1 || !errors.Is(d[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice describes ACLs: %v %+v", err, d)
	}
	if dres, err := alice.DeleteTopics(ctx, "existing"); err != nil || !errors.Is(dres["existing"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice deletes existing: %v %+v", err, dres)
	}

	if acls, err := root.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("alice.").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternPrefixed)); err != nil || acls[0].Err != nil {
		t.Fatalf("root grants alice her prefix: %v %+v", err, acls)
	}
	res, err = alice.CreateTopics(ctx, 1, 1, nil, "alice.t", "bob.t")
	if err != nil || res["alice.t"].Err != nil || !errors.Is(res["bob.t"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("alice creates under her ACL: %v %+v", err, res)
	}
}
