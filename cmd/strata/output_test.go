package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-log/strata/config"
)

// decodeJSON runs a strata command and decodes its standard output, which
// must be exactly one JSON document, into v; unknown fields are an error,
// so a renamed field fails here.
func decodeJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	out := mustStrataCmd(t, args...)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("strata %s: %v in:\n%s", strings.Join(args, " "), err, out)
	}
	if dec.More() {
		t.Fatalf("strata %s: more than one JSON document:\n%s", strings.Join(args, " "), out)
	}
}

// TestListingsJSON: every listing and description of a broker's state
// has --format json with the documented snake_case fields, agreeing with
// what the broker holds, and text stays the default.
func TestListingsJSON(t *testing.T) {
	ab := startAdminBroker(t)
	ab.traffic(t) // topic orders (2 partitions, 10 records), group billing
	b := []string{"--broker", ab.addr}
	cmd := func(args ...string) []string { return append(args, b...) }

	var topics []topicListDoc
	decodeJSON(t, &topics, cmd("topic", "list", "--format", "json")...)
	if !slices.Equal(topics, []topicListDoc{{Name: "orders", Partitions: 2, ReplicationFactor: 1}}) {
		t.Errorf("topic list: %+v", topics)
	}
	if out := mustStrataCmd(t, cmd("topic", "list")...); tableRows(out)[0] != "NAME PARTITIONS REPLICATION" {
		t.Errorf("topic list text: %s", out)
	}

	var topic topicDoc
	decodeJSON(t, &topic, cmd("topic", "describe", "orders", "--format", "json")...)
	var records int64
	for i, p := range topic.Partitions {
		records += p.HighWatermark
		if p.Partition != int32(i) || p.Leader != 1 || !slices.Equal(p.Replicas, []int32{1}) || !slices.Equal(p.ISR, []int32{1}) {
			t.Errorf("topic describe partition %d: %+v", i, p)
		}
	}
	if topic.Name != "orders" || topic.ID == "" || len(topic.Partitions) != 2 || records != 10 ||
		topic.Config["retention.ms"] != config.TopicKeys()[0].Default || topic.Overrides == nil {
		t.Errorf("topic describe: %+v", topic)
	}

	var groups []groupListDoc
	decodeJSON(t, &groups, cmd("group", "list", "--format", "json")...)
	if !slices.Equal(groups, []groupListDoc{{Group: "billing", State: "empty"}}) {
		t.Errorf("group list: %+v", groups)
	}
	var group groupDoc
	decodeJSON(t, &group, cmd("group", "describe", "billing", "--format", "json")...)
	if group.Group != "billing" || group.State != "empty" || len(group.Members) != 0 || len(group.Partitions) != 2 || len(group.Unreadable) != 0 {
		t.Fatalf("group describe: %+v", group)
	}
	p0, p1 := group.Partitions[0], group.Partitions[1]
	if p0.Topic != "orders" || p0.Partition != 0 || p0.CommittedOffset == nil || *p0.CommittedOffset != 1 || p0.LogEndOffset == nil || *p0.LogEndOffset != 5 || *p0.Lag != 4 ||
		p1.Partition != 1 || p1.CommittedOffset != nil || p1.Lag != nil || p1.LogEndOffset == nil || *p1.LogEndOffset != 5 {
		t.Errorf("group describe partitions: %+v %+v", p0, p1)
	}

	mustStrataCmd(t, cmd("acl", "add", "--principal", "User:alice", "--topic", "orders", "-o", "read")...)
	mustStrataCmd(t, cmd("acl", "add", "--principal", "User:ops", "--cluster", "-o", "admin")...)
	var acls []aclDoc
	decodeJSON(t, &acls, cmd("acl", "list", "--format", "json")...)
	if !slices.Equal(acls, []aclDoc{{Principal: "User:alice", Operation: "read", ResourceType: "topic", Name: "orders"},
		{Principal: "User:ops", Operation: "admin", ResourceType: "cluster"}}) {
		t.Errorf("acl list: %+v", acls)
	}

	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mustStrataCmd(t, cmd("user", "create", "alice", "--password-file", pw, "--mechanism", "SCRAM-SHA-256")...)
	var users []userDoc
	decodeJSON(t, &users, cmd("user", "list", "--format", "json")...)
	if len(users) != 1 || users[0].User != "alice" || users[0].Principal != "User:alice" || !slices.Equal(users[0].Mechanisms, []string{"SCRAM-SHA-256"}) {
		t.Errorf("user list: %+v", users)
	}

	// A format that does not exist is refused before anything is asked.
	for _, args := range [][]string{{"topic", "list"}, {"topic", "describe", "orders"}, {"group", "list"}, {"group", "describe", "billing"},
		{"acl", "list"}, {"user", "list"}, {"cluster", "status"}, {"topic", "configs"}} {
		if _, err := strataCmd(t, append(args, "--format", "xml", "--broker", "127.0.0.1:1")...); err == nil || !strings.Contains(err.Error(), `--format "xml": want text or json`) {
			t.Errorf("%s --format xml: %v", strings.Join(args, " "), err)
		}
	}
}

// TestTopicConfigs: strata topic configs and the help of topic describe
// list every topic setting config knows, with its default.
func TestTopicConfigs(t *testing.T) {
	var docs []topicConfigDoc
	decodeJSON(t, &docs, "topic", "configs", "--format", "json")
	keys := config.TopicKeys()
	if len(docs) != len(keys) {
		t.Fatalf("topic configs: %d settings, config knows %d", len(docs), len(keys))
	}
	text := mustStrataCmd(t, "topic", "configs")
	help := mustStrataCmd(t, "topic", "describe", "--help")
	for i, k := range keys {
		if docs[i].Name != k.Name || docs[i].Default != k.Default || docs[i].Description != k.Doc || docs[i].Allowed != k.Allowed || docs[i].Type != k.Type {
			t.Errorf("topic configs %d: %+v, want %+v", i, docs[i], k)
		}
		def := k.Default
		if human := k.Display(def); human != def {
			def = human + " (" + def + ")"
		}
		line := "  " + k.Name + ", default " + def + "\n"
		if !strings.Contains(text, line) || !strings.Contains(help, line) {
			t.Errorf("no line %q in topic configs or in topic describe --help", line)
		}
		// The description is there, wrapped.
		if first := strings.Fields(k.Doc)[0]; !strings.Contains(text, line+"      "+first) {
			t.Errorf("%s: its description does not follow:\n%s", k.Name, text)
		}
	}
}
