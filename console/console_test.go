package console_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/console"
	"github.com/strata-log/strata/internal/testutil"
	"github.com/strata-log/strata/internal/testutil/inproc"
	"github.com/strata-log/strata/security"
)

// startBroker starts a real one-broker cluster in this process (its cold
// tier a directory) and waits until it is ready.
func startBroker(t *testing.T) *broker.Broker {
	t.Helper()
	cfg := inproc.Config(t, 1, t.TempDir())
	b, srv := inproc.Start(t, cfg)
	t.Cleanup(func() { srv.GracefulStop(); b.Close() })
	testutil.Eventually(t, 30*time.Second, "broker ready", func() error { return b.Ready(t.Context()) })
	return b
}

// serveConsole serves the console of b, with auth (nil: none), as the
// admin listener mounts it.
func serveConsole(t *testing.T, b *broker.Broker, auth *broker.Auth) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(console.Prefix+"/", console.Handler(console.Deps{Source: b, Auth: auth}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// client is a browser-like client: it keeps cookies and does not follow
// redirects, so tests see them.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func get(t *testing.T, c *http.Client, u string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func post(t *testing.T, c *http.Client, u string, form url.Values, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func createTopic(t *testing.T, b *broker.Broker, name string, partitions int32) {
	t.Helper()
	if _, err := b.CreateTopic(t.Context(), name, partitions, 1, nil); err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	testutil.Eventually(t, 30*time.Second, "topic "+name+" led", func() error {
		_, err := b.ListOffsets(t.Context(), name, 0, broker.OffsetQuery{Latest: true})
		return err
	})
}

func produce(t *testing.T, b *broker.Broker, topic string, first int64, n int, ts int64) {
	t.Helper()
	_, err := b.Produce(t.Context(), broker.ProduceRequest{Topic: topic, Partition: 0, Batch: testutil.SeqBatch(t, first, n, ts, 16, nil), Acks: broker.AcksAll})
	if err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// csrfOf is the CSRF token a page gives its forms and htmx.
func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := regexp.MustCompile(`name="csrf_token" value="([^"]+)"|"X-CSRF-Token":"([^"]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the page:\n%s", body)
	}
	return m[1] + m[2]
}

// TestViewsRender: every view answers 200 with a whole page holding its
// figures, a strict Content-Security-Policy, no inline script or style,
// and an htmx poll of its live fragment, which answers the fragment alone.
func TestViewsRender(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "orders", 2)
	now := time.Now().UnixMilli()
	produce(t, b, "orders", 0, 10, now-60_000)
	produce(t, b, "orders", 10, 10, now)
	if err := b.CommitOffsets(t.Context(), "billing", "", -1, []broker.CommittedOffset{{Topic: "orders", Partition: 0, Offset: 12}}); err != nil {
		t.Fatal(err)
	}
	srv := serveConsole(t, b, nil)
	c := client(t)
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/ui/", []string{`id="brokers"`, `id="broker-1"`, "alive", `id="controller">1<`, `id="bucket">reachable<`}},
		{"/ui/topics", []string{`id="topic-orders"`, `href="/ui/topics/orders"`}},
		{"/ui/topics/orders", []string{`id="partitions"`, `id="partition-0"`, `id="partition-1"`, "retention.ms", "local.retention.ms", "(current)"}},
		{"/ui/topics/orders/partitions/0", []string{`<svg id="timeline"`, `<polyline class="curve"`, "high watermark 20", "total retention cut"}},
		{"/ui/groups", []string{`id="groups"`, `href="/ui/groups/billing"`}},
		{"/ui/groups/billing", []string{`id="lags"`, "orders/0", `<td class="lag">8</td>`}},
	} {
		resp, body := get(t, c, srv.URL+tc.path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d\n%s", tc.path, resp.StatusCode, body)
			continue
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", tc.path, csp)
		}
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: page lacks %q", tc.path, w)
			}
		}
		if regexp.MustCompile(`<script>|<style|style="|\son[a-z]+=`).MatchString(body) {
			t.Errorf("%s: inline script or style, which the policy forbids:\n%s", tc.path, body)
		}
		if !strings.Contains(body, `hx-trigger="every 2s"`) || !strings.Contains(body, `hx-get="`+tc.path+`?live=1"`) {
			t.Errorf("%s: no htmx poll of its live fragment", tc.path)
		}
		resp, frag := get(t, c, srv.URL+tc.path+"?live=1", "HX-Request", "true")
		if resp.StatusCode != http.StatusOK || strings.Contains(frag, "<html") || !strings.Contains(frag, tc.want[0]) {
			t.Errorf("%s?live=1: %d, want the fragment alone with %q:\n%s", tc.path, resp.StatusCode, tc.want[0], frag)
		}
	}
	for path, want := range map[string]int{"/ui/topics/nope": 404, "/ui/groups/nope": 404, "/ui/topics/orders/partitions/9": 404, "/ui/topics/orders/partitions/x": 400, "/ui/nowhere": 404} {
		if resp, body := get(t, c, srv.URL+path); resp.StatusCode != want {
			t.Errorf("%s: %d, want %d\n%s", path, resp.StatusCode, want, body)
		}
	}
}

// TestLiveFiguresMove: a fragment polled after a write shows the new high
// watermark: the page's figures follow the log without a reload.
func TestLiveFiguresMove(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "live", 1)
	srv := serveConsole(t, b, nil)
	c := client(t)
	_, before := get(t, c, srv.URL+"/ui/topics/live/partitions/0?live=1")
	if !strings.Contains(before, "high watermark 0") {
		t.Fatalf("before any write: %s", before)
	}
	produce(t, b, "live", 0, 5, time.Now().UnixMilli())
	_, after := get(t, c, srv.URL+"/ui/topics/live/partitions/0?live=1")
	if !strings.Contains(after, "high watermark 5") {
		t.Fatalf("after 5 records, the fragment shows:\n%s", after)
	}
}

// TestFirstViewSize: the first view, its stylesheet and its script come
// to under 300 KB, and the page names no other origin.
func TestFirstViewSize(t *testing.T) {
	b := startBroker(t)
	srv := serveConsole(t, b, nil)
	c := client(t)
	_, page := get(t, c, srv.URL+"/ui/")
	total := len(page)
	assets := regexp.MustCompile(`(?:src|href)="(/ui/static/[^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(assets) < 2 {
		t.Fatalf("page links %d assets, want the stylesheet and htmx:\n%s", len(assets), page)
	}
	for _, a := range assets {
		resp, body := get(t, c, srv.URL+a[1])
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", a[1], resp.StatusCode)
		}
		total += len(body)
	}
	if total >= 300_000 {
		t.Errorf("first view is %d bytes with its assets, want under 300 KB", total)
	}
	t.Logf("first view: %d bytes with its %d assets", total, len(assets))
	if regexp.MustCompile(`(?:src|href)="(?:https?:)?//`).MatchString(page) {
		t.Errorf("page loads from another origin:\n%s", page)
	}
}

// TestHostileNamesEscaped: a group whose name is markup shows as text on
// every page that names it.
func TestHostileNamesEscaped(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "t", 1)
	produce(t, b, "t", 0, 3, time.Now().UnixMilli())
	hostile := `<script>alert("x")</script><img src=x onerror=alert(1)>`
	if err := b.CommitOffsets(t.Context(), hostile, "", -1, []broker.CommittedOffset{{Topic: "t", Partition: 0, Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	srv := serveConsole(t, b, nil)
	c := client(t)
	for _, path := range []string{"/ui/groups", "/ui/groups/" + url.PathEscape(hostile)} {
		resp, body := get(t, c, srv.URL+path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, resp.StatusCode, body)
		}
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") {
			t.Errorf("%s: the name went out as markup:\n%s", path, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") {
			t.Errorf("%s: the name is not shown escaped:\n%s", path, body)
		}
	}
}

// authFixture is a broker's rules with two token users: alice may read
// topic "public" and group "team", admin is a superuser.
type authFixture struct {
	auth         *broker.Auth
	alice, admin string
}

func newAuthFixture(t *testing.T) authFixture {
	t.Helper()
	alice, aliceLine, err := security.NewToken("User:alice")
	if err != nil {
		t.Fatal(err)
	}
	admin, adminLine, err := security.NewToken("User:admin")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(aliceLine+"\n"+adminLine+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := security.LoadTokens(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	acls := []security.ACL{
		{Principal: "User:alice", Resource: security.ResourceTopic, Name: "public", Op: security.OpRead},
		{Principal: "User:alice", Resource: security.ResourceGroup, Name: "team", Op: security.OpRead},
	}
	return authFixture{
		auth:  &broker.Auth{Tokens: tokens, Superusers: []string{"User:admin"}, ACLs: func() []security.ACL { return acls }},
		alice: alice, admin: admin,
	}
}

// TestACLFiltering: with authentication, an anonymous visitor is sent to
// log in; a principal sees only the topics and groups its ACLs let it
// see, in listings and the cluster's counts, and gets 403 on the URL of
// one it may not see; a superuser sees everything.
func TestACLFiltering(t *testing.T) {
	b := startBroker(t)
	createTopic(t, b, "public", 1)
	createTopic(t, b, "secret", 1)
	produce(t, b, "public", 0, 2, time.Now().UnixMilli())
	for _, g := range []string{"team", "hidden"} {
		if err := b.CommitOffsets(t.Context(), g, "", -1, []broker.CommittedOffset{{Topic: "public", Partition: 0, Offset: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	f := newAuthFixture(t)
	srv := serveConsole(t, b, f.auth)

	anon := client(t)
	resp, _ := get(t, anon, srv.URL+"/ui/topics")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Fatalf("anonymous /ui/topics: %d to %q, want a redirect to the login form", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, anon, srv.URL+"/ui/topics?live=1"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous fragment: %d, want 401", resp.StatusCode)
	}
	if resp, _ := get(t, anon, srv.URL+"/ui/", "Authorization", "Bearer not-a-token"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unknown bearer token: %d, want 401", resp.StatusCode)
	}

	// alice by bearer token.
	bearer := []string{"Authorization", "Bearer " + f.alice}
	c := client(t)
	_, topics := get(t, c, srv.URL+"/ui/topics", bearer...)
	if !strings.Contains(topics, `id="topic-public"`) || strings.Contains(topics, "secret") {
		t.Errorf("alice's topics: want public and not secret:\n%s", topics)
	}
	for _, path := range []string{"/ui/topics/secret", "/ui/topics/secret/partitions/0", "/ui/topics/absent", "/ui/groups/hidden"} {
		if resp, body := get(t, c, srv.URL+path, bearer...); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "retention.ms") {
			t.Errorf("alice %s: %d, want 403 and nothing of it:\n%s", path, resp.StatusCode, body)
		}
	}
	if resp, _ := get(t, c, srv.URL+"/ui/topics/public", bearer...); resp.StatusCode != http.StatusOK {
		t.Errorf("alice /ui/topics/public: %d", resp.StatusCode)
	}
	_, groups := get(t, c, srv.URL+"/ui/groups", bearer...)
	if !strings.Contains(groups, "/ui/groups/team") || strings.Contains(groups, "/ui/groups/hidden") {
		t.Errorf("alice's groups: want team and not hidden:\n%s", groups)
	}
	_, cluster := get(t, c, srv.URL+"/ui/", bearer...)
	if strings.Contains(cluster, "secret") || !strings.Contains(cluster, "User:alice") {
		t.Errorf("alice's cluster page names a topic she may not see, or not her:\n%s", cluster)
	}

	// admin by the login form: the session cookie then suffices.
	adm := client(t)
	_, login := get(t, adm, srv.URL+"/ui/login")
	csrf := csrfOf(t, login)
	if resp, body := post(t, adm, srv.URL+"/ui/login", url.Values{"csrf_token": {csrf}, "token": {"wrong"}}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("login with a wrong token: %d\n%s", resp.StatusCode, body)
	}
	resp, body := post(t, adm, srv.URL+"/ui/login", url.Values{"csrf_token": {csrf}, "token": {f.admin}, "next": {"/ui/topics"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/ui/topics" {
		t.Fatalf("login: %d to %q\n%s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	var cookie *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "strata_console" && ck.Value != "" {
			cookie = ck
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login's session cookie %+v: want HttpOnly and SameSite=Strict", cookie)
	}
	_, topics = get(t, adm, srv.URL+"/ui/topics")
	if !strings.Contains(topics, `id="topic-secret"`) || !strings.Contains(topics, `id="topic-public"`) {
		t.Errorf("admin's topics: want both:\n%s", topics)
	}
	// Logging out ends the session: the cookie no longer admits.
	_, page := get(t, adm, srv.URL+"/ui/topics")
	if resp, body := post(t, adm, srv.URL+"/ui/logout", url.Values{"csrf_token": {csrfOf(t, page)}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d\n%s", resp.StatusCode, body)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/ui/topics", nil)
	req.AddCookie(cookie)
	if resp, err := client(t).Do(req); err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Errorf("the logged-out session's cookie: %v %v, want a redirect to log in", resp.StatusCode, err)
	}
}

// TestCSRF: a POST without the session's CSRF token, with another
// session's, or from another origin is refused and changes nothing; with
// it, it goes through.
func TestCSRF(t *testing.T) {
	b := startBroker(t)
	f := newAuthFixture(t)
	srv := serveConsole(t, b, f.auth)
	c := client(t)
	_, login := get(t, c, srv.URL+"/ui/login")
	csrf := csrfOf(t, login)
	other := client(t)
	_, otherLogin := get(t, other, srv.URL+"/ui/login")
	for name, tc := range map[string]struct {
		form   url.Values
		header []string
	}{
		"no token":            {url.Values{"token": {f.admin}}, nil},
		"another session's":   {url.Values{"token": {f.admin}, "csrf_token": {csrfOf(t, otherLogin)}}, nil},
		"another origin":      {url.Values{"token": {f.admin}, "csrf_token": {csrf}}, []string{"Origin", "https://evil.example"}},
		"a cross-site fetch":  {url.Values{"token": {f.admin}, "csrf_token": {csrf}}, []string{"Sec-Fetch-Site", "cross-site"}},
		"an empty form token": {url.Values{"token": {f.admin}, "csrf_token": {""}}, nil},
	} {
		resp, body := post(t, c, srv.URL+"/ui/login", tc.form, tc.header...)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d, want 403\n%s", name, resp.StatusCode, body)
		}
		if resp, _ := get(t, c, srv.URL+"/ui/topics"); resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s: the refused login logged in (%d)", name, resp.StatusCode)
		}
	}
	resp, _ := post(t, c, srv.URL+"/ui/login", url.Values{"token": {f.admin}}, "X-CSRF-Token", csrf, "Origin", srv.URL)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with the token in the header, same origin: %d", resp.StatusCode)
	}
	if resp, _ := get(t, c, srv.URL+"/ui/topics"); resp.StatusCode != http.StatusOK {
		t.Errorf("after login: %d", resp.StatusCode)
	}
}
