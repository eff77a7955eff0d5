package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
)

// session opens a page with c and returns the CSRF token it carries.
func session(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	_, body := get(t, c, base+"/ui/topics")
	return csrfOf(t, body)
}

// TestTopicCreateAndAlter: the create form makes a topic through the
// broker's validation (a bad setting is refused and creates nothing); the
// alter form changes settings and adds partitions, and refuses fewer.
func TestTopicCreateAndAlter(t *testing.T) {
	b := startBroker(t)
	srv := serveConsole(t, b, nil)
	c := client(t)
	csrf := session(t, c, srv.URL)

	resp, body := post(t, c, srv.URL+"/ui/topics", url.Values{"csrf_token": {csrf}, "name": {"made"}, "partitions": {"2"}, "settings": {"retention.ms=2d\nsegment.bytes=1MiB"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/topics/made" {
		t.Fatalf("create: %d %q\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	desc, err := b.DescribeTopic("made")
	if err != nil || len(desc.Partitions) != 2 || desc.Overrides["retention.ms"] == "" || desc.Overrides["segment.bytes"] == "" {
		t.Fatalf("created topic: %+v %v", desc, err)
	}

	for name, form := range map[string]url.Values{
		"unknown setting":     {"name": {"bad1"}, "partitions": {"1"}, "settings": {"retention.mss=1d"}},
		"bad value":           {"name": {"bad2"}, "partitions": {"1"}, "settings": {"retention.ms=soon"}},
		"not key=value":       {"name": {"bad3"}, "partitions": {"1"}, "settings": {"retention.ms"}},
		"negative partitions": {"name": {"bad4"}, "partitions": {"-1"}},
		"bad name":            {"name": {"no/slash"}, "partitions": {"1"}},
		"exists":              {"name": {"made"}, "partitions": {"1"}},
		"partitions a word":   {"name": {"bad5"}, "partitions": {"two"}},
	} {
		form.Set("csrf_token", csrf)
		resp, body := post(t, c, srv.URL+"/ui/topics", form)
		if resp.StatusCode < 400 || !strings.Contains(body, `id="error"`) {
			t.Errorf("%s: %d, want a refusal shown on the form\n%s", name, resp.StatusCode, body)
		}
		if n := form.Get("name"); n != "made" {
			if _, err := b.DescribeTopic(n); err == nil {
				t.Errorf("%s: topic %s was created", name, n)
			}
		}
	}

	_, page := get(t, c, srv.URL+"/ui/topics/made/alter")
	if !strings.Contains(page, "retention.ms=") {
		t.Errorf("the alter form should hold the topic's overrides:\n%s", page)
	}
	resp, body = post(t, c, srv.URL+"/ui/topics/made/alter", url.Values{"csrf_token": {csrf}, "partitions": {"3"}, "settings": {"retention.ms=3d"}, "delete": {"segment.bytes"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("alter: %d\n%s", resp.StatusCode, strings.SplitN(body, "<main>", 2)[1])
	}
	desc, _ = b.DescribeTopic("made")
	if len(desc.Partitions) != 3 || desc.Config["retention.ms"] != "259200000" || desc.Overrides["segment.bytes"] != "" {
		t.Errorf("after alter: %d partitions, retention.ms %q, overrides %v", len(desc.Partitions), desc.Config["retention.ms"], desc.Overrides)
	}
	resp, _ = post(t, c, srv.URL+"/ui/topics/made/alter", url.Values{"csrf_token": {csrf}, "partitions": {"2"}})
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("alter to fewer partitions: %d, want 400", resp.StatusCode)
	}
	if resp, _ := post(t, c, srv.URL+"/ui/topics/made/alter", url.Values{"partitions": {"5"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("alter without the CSRF token: %d, want 403", resp.StatusCode)
	}
	if desc, _ := b.DescribeTopic("made"); len(desc.Partitions) != 3 {
		t.Errorf("the refused alter changed the topic: %d partitions", len(desc.Partitions))
	}
}

// TestActionsNeedAdmin: a principal with read on a topic may not create,
// alter or reset; a superuser may.
func TestActionsNeedAdmin(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "public", 1)
	if err := b.CommitOffsets(t.Context(), "team", "", -1, []broker.CommittedOffset{{Topic: "public", Partition: 0, Offset: 0}}); err != nil {
		t.Fatal(err)
	}
	f := newAuthFixture(t)
	srv := serveConsole(t, b, f.auth)
	c := client(t)
	bearer := []string{"Authorization", "Bearer " + f.alice}
	_, page := get(t, c, srv.URL+"/ui/topics", bearer...)
	csrf := csrfOf(t, page)
	for path, form := range map[string]url.Values{
		"/ui/topics":              {"name": {"alices"}, "partitions": {"1"}},
		"/ui/topics/public/alter": {"partitions": {"4"}},
		"/ui/groups/team/reset":   {"to": {"latest"}, "apply": {"1"}},
	} {
		form.Set("csrf_token", csrf)
		if resp, body := post(t, c, srv.URL+path, form, bearer...); resp.StatusCode != http.StatusForbidden {
			t.Errorf("alice POST %s: %d, want 403\n%s", path, resp.StatusCode, body)
		}
	}
	if _, err := b.DescribeTopic("alices"); err == nil {
		t.Error("alice created a topic")
	}
	if desc, _ := b.DescribeTopic("public"); len(desc.Partitions) != 1 {
		t.Error("alice altered a topic")
	}
	adm := []string{"Authorization", "Bearer " + f.admin}
	_, page = get(t, c, srv.URL+"/ui/topics", adm...)
	if resp, body := post(t, c, srv.URL+"/ui/topics", url.Values{"csrf_token": {csrfOf(t, page)}, "name": {"admins"}, "partitions": {"1"}}, adm...); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("admin create: %d\n%s", resp.StatusCode, body)
	}
}

// TestGroupResetDryRun: a dry run shows each partition's current and new
// offset and changes nothing; apply commits the plan; a POST without the
// CSRF token changes nothing.
func TestGroupResetDryRun(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", 1)
	base := time.Now().Add(-time.Hour).UnixMilli()
	produce(t, b, "orders", 0, 10, base)
	produce(t, b, "orders", 10, 10, base+600_000)
	if err := b.CommitOffsets(t.Context(), "billing", "", -1, []broker.CommittedOffset{{Topic: "orders", Partition: 0, Offset: 15}}); err != nil {
		t.Fatal(err)
	}
	committed := func() int64 {
		t.Helper()
		d, err := b.DescribeGroup(t.Context(), "billing")
		if err != nil || len(d.Offsets) != 1 {
			t.Fatalf("group billing: %+v %v", d, err)
		}
		return d.Offsets[0].Offset
	}
	srv := serveConsole(t, b, nil)
	c := client(t)
	csrf := session(t, c, srv.URL)
	for to, want := range map[string]string{"earliest": "0", "latest": "20", "7": "7",
		time.UnixMilli(base + 300_000).UTC().Format(time.RFC3339): "10"} {
		resp, body := post(t, c, srv.URL+"/ui/groups/billing/reset", url.Values{"csrf_token": {csrf}, "to": {to}, "dry_run": {"1"}})
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "dry run: nothing changed") ||
			!strings.Contains(body, "<td>orders/0</td><td>15</td><td class=\"new\">"+want+"</td>") {
			t.Errorf("dry run to %s: %d, want orders/0 15 -> %s\n%s", to, resp.StatusCode, want, body)
		}
		if got := committed(); got != 15 {
			t.Fatalf("dry run to %s changed the offset to %d", to, got)
		}
	}
	for _, to := range []string{"99", "sideways", "2999-01-01T00:00:00Z", ""} {
		if resp, body := post(t, c, srv.URL+"/ui/groups/billing/reset", url.Values{"csrf_token": {csrf}, "to": {to}, "apply": {"1"}}); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("reset to %q: %d, want 400\n%s", to, resp.StatusCode, body)
		}
	}
	if resp, _ := post(t, c, srv.URL+"/ui/groups/billing/reset", url.Values{"to": {"earliest"}, "apply": {"1"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("reset without the CSRF token: %d, want 403", resp.StatusCode)
	}
	if got := committed(); got != 15 {
		t.Fatalf("refused resets changed the offset to %d", got)
	}
	resp, body := post(t, c, srv.URL+"/ui/groups/billing/reset", url.Values{"csrf_token": {csrf}, "to": {"earliest"}, "apply": {"1"}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("apply: %d\n%s", resp.StatusCode, body)
	}
	if got := committed(); got != 0 {
		t.Errorf("after the reset to earliest: offset %d, want 0", got)
	}
}
