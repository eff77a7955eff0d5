package e2e

// The console (package console) in a real browser: headless Chromium,
// driven through the DevTools protocol (chromedp), against real brokers
// with MinIO as their cold tier. Each view renders and refreshes live
// without a Content-Security-Policy violation; a killed broker shows as
// down and its partitions as under-replicated; with TLS, a principal
// logs in with a token and sees no topic its ACLs hide. With
// STRATA_CONSOLE_SHOTS=1 the test writes a screenshot of each view to
// docs/console/.

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/strata-log/strata/client"
	"github.com/strata-log/strata/internal/freeport"
	"github.com/strata-log/strata/internal/testutil"
	stratav1 "github.com/strata-log/strata/rpc/proto/strata/v1"
	"github.com/strata-log/strata/tiering/objstore/miniotest"
)

// browser is one headless Chromium this test started, and the messages
// its pages logged about the Content-Security-Policy.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	csp []string
}

// newBrowser starts headless Chromium for t. Without a chromium binary
// the test skips, unless STRATA_REQUIRE_BROWSER=1 (CI), where it fails.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("STRATA_REQUIRE_BROWSER") == "1" {
			t.Fatalf("chromium not found and STRATA_REQUIRE_BROWSER=1: apt-get install chromium (make tools does)")
		}
		t.Skip("the console's browser tests need chromium (apt-get install chromium, or make tools); skipped")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,                               // tests run as root, where Chromium's sandbox refuses to start
		chromedp.Flag("ignore-certificate-errors", true), // the TLS cluster's CA is the test's own
		chromedp.WindowSize(1360, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() }) // ends the browser this test started
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	b := &browser{ctx: ctx}
	go func() {
		for m, err := range chromedp.Console(ctx) {
			if err != nil {
				return
			}
			if strings.Contains(m.Text, "Content Security Policy") || strings.Contains(m.Text, "Content-Security-Policy") {
				b.mu.Lock()
				b.csp = append(b.csp, m.Text)
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// run runs steps in the browser, within d.
func (b *browser) run(t *testing.T, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// text is the text of the first element sel matches, now.
func (b *browser) text(sel string) (string, error) {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	return strings.TrimSpace(s), err
}

// open loads u and waits for sel to show, loading it again while it does
// not (a page that answered an error while the cluster elected a
// controller, say), for up to a minute.
func (b *browser) open(t *testing.T, u, sel string) {
	t.Helper()
	testutil.Eventually(t, time.Minute, sel+" on "+u, func() error {
		ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
		defer cancel()
		return chromedp.Do(ctx, chromedp.Navigate(u), chromedp.WaitVisible(chromedp.CSS(sel)))
	})
}

// noCSPViolations fails t if a page broke its Content-Security-Policy.
func (b *browser) noCSPViolations(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.csp) > 0 {
		t.Errorf("Content-Security-Policy violations: %q", b.csp)
	}
}

// shot writes a screenshot of the page to docs/console/name.png when
// STRATA_CONSOLE_SHOTS=1.
func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	if os.Getenv("STRATA_CONSOLE_SHOTS") != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// highWatermark reads partition p's high watermark off the topic page.
func (b *browser) highWatermark(p int) (int64, error) {
	s, err := b.text(fmt.Sprintf("#partition-%d td:nth-child(11)", p))
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(s, 10, 64)
}

// TestConsoleInBrowser: three brokers with MinIO, each serving the console
// on its admin listener; Chromium opens every view on broker 1.
func TestConsoleInBrowser(t *testing.T) {
	br := newBrowser(t)
	m := miniotest.Start(t)
	tc := &testCluster{t: t, m: m}
	var admins []string
	for range 3 {
		tc.gossip = append(tc.gossip, freeport.Loopback(t))
		admins = append(admins, freeport.Loopback(t))
	}
	for i := range 3 {
		tc.brokers = append(tc.brokers, tc.newMember(i+1, tc.gossip[i], "--admin-listen", admins[i]))
	}
	tc.start()
	b1 := tc.brokers[0]
	ui := "http://" + admins[0] + "/ui"

	b1.run(nil, "topic", "create", "orders", "--partitions", "3", "--replication-factor", "3", "--config", "segment.bytes=64KiB")
	var in strings.Builder
	for i := range 1500 {
		fmt.Fprintf(&in, "{\"order\":%d,\"pad\":\"%s\"}\n", i, strings.Repeat("x", 400))
	}
	b1.run(strings.NewReader(in.String()), "produce", "orders", "--partition", "0") // enough to seal segments for the cold tier
	b1.run(strings.NewReader(in.String()[:len(in.String())/5]), "produce", "orders")
	b1.run(nil, "consume", "orders", "--group", "billing", "--max", "120")

	// The CSP header, on the page and on the fragments htmx polls.
	for _, path := range []string{"/", "/?live=1", "/topics"} {
		resp, err := http.Get(ui + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'self'") {
			t.Errorf("%s: Content-Security-Policy %q", path, csp)
		}
	}

	// Every view renders.
	br.open(t, ui+"/", "#brokers")
	for id := 1; id <= 3; id++ {
		if s, err := br.text(fmt.Sprintf("#broker-%d .state", id)); err != nil || s != "alive" {
			t.Errorf("broker %d shows %q (%v), want alive", id, s, err)
		}
	}
	if s, _ := br.text("#bucket"); s != "reachable" {
		t.Errorf("bucket shows %q, want reachable", s)
	}
	br.shot(t, "cluster")
	br.open(t, ui+"/topics", "#topic-orders")
	br.shot(t, "topics")
	br.open(t, ui+"/topics/orders", "#partition-2")
	testutil.Eventually(t, time.Minute, "partition 0's sealed segments in the cold tier, on the open page", func() error {
		s, err := br.text("#partition-0 td:nth-child(7)")
		if err == nil && (s == "0 B" || s == "loading") {
			err = fmt.Errorf("cold bytes %q", s)
		}
		return err
	})
	br.shot(t, "topic")
	br.open(t, ui+"/topics/orders/partitions/0", "#timeline .curve")
	br.shot(t, "timeline")
	br.open(t, ui+"/groups", "#groups")
	br.open(t, ui+"/groups/billing", "#lags")
	br.shot(t, "group")

	// A topic created through the form (a POST with the page's CSRF token).
	br.open(t, ui+"/new-topic", "input[name=name]")
	br.run(t, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("input[name=name]"), "from-the-console"),
		chromedp.Submit(chromedp.CSS("input[name=name]")),
		chromedp.WaitVisible(chromedp.CSS("#partition-0, #error")))
	if msg, err := br.text("#error"); err == nil {
		t.Fatalf("creating a topic in the console: %s", msg)
	}
	if out := b1.run(nil, "topic", "list"); !strings.Contains(out, "from-the-console") {
		t.Errorf("the topic created in the console is not listed by the CLI:\n%s", out)
	}

	// The record browser, following partition 0: a record produced with
	// the CLI shows within a second of the CLI's acknowledgement.
	br.open(t, ui+"/topics/orders/partitions/0/records", "#records")
	br.shot(t, "records")
	b1.run(strings.NewReader("{\"order\":\"browser-check\"}\n"), "produce", "orders", "--partition", "0")
	acked := time.Now()
	testutil.Eventually(t, time.Second, "the produced record in the open record browser", func() error {
		s, err := br.text("#records")
		if err == nil && !strings.Contains(s, "browser-check") {
			err = fmt.Errorf("not yet among %d bytes of records", len(s))
		}
		return err
	})
	t.Logf("the produced record showed in the record browser %v after the CLI's acknowledgement", time.Since(acked).Round(time.Millisecond))
	// From the earliest offset, in either tier, as JSON.
	br.open(t, ui+"/topics/orders/partitions/0/records?mode=earliest&format=json&records=5", "#record-0")

	// A record produced with the CLI shows on the open topic page, by
	// htmx's poll, without a reload.
	br.open(t, ui+"/topics/orders", "#partition-0")
	var before [3]int64
	for p := range 3 {
		hw, err := br.highWatermark(p)
		if err != nil {
			t.Fatalf("partition %d's high watermark on the page: %v", p, err)
		}
		before[p] = hw
	}
	b1.run(strings.NewReader("one more\n"), "produce", "orders", "--partition", "0")
	start := time.Now()
	testutil.Eventually(t, 3*time.Second, "the new record in the open page's high watermark", func() error {
		hw, err := br.highWatermark(0)
		if err == nil && hw <= before[0] {
			err = fmt.Errorf("high watermark %d, was %d", hw, before[0])
		}
		return err
	})
	t.Logf("the produced record showed on the open page after %v", time.Since(start).Round(time.Millisecond))

	// Broker 3 killed (SIGKILL, by its pid): the open cluster page shows
	// it down and partitions under-replicated.
	br.open(t, ui+"/", "#broker-3")
	tc.brokers[2].kill9()
	testutil.Eventually(t, 90*time.Second, "broker 3 down and partitions under-replicated on the open page", func() error {
		state, err := br.text("#broker-3 .state")
		if err != nil {
			return err
		}
		urp, err := br.text("#urp")
		if err != nil {
			return err
		}
		if state != "down" || urp == "0" {
			return fmt.Errorf("broker 3 %q, %s under-replicated", state, urp)
		}
		return nil
	})
	if _, err := br.text("#unhealthy tr.warn"); err != nil {
		t.Errorf("no under-replicated partition listed: %v", err)
	}
	br.shot(t, "cluster-broker-down")

	br.noCSPViolations(t)
}

// TestConsoleAuthInBrowser: with TLS, the console asks for a token; a
// principal logged in with one sees the topic its ACLs allow and not the
// other, whose URL answers 403; a POST without the CSRF token is refused.
func TestConsoleAuthInBrowser(t *testing.T) {
	br := newBrowser(t)
	sc := startSecureCluster(t)
	admin := sc.client(t, client.WithTLS(sc.clientTLS(t, "admin")))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, topic := range []string{"public", "secret"} {
		if _, err := admin.CreateTopic(ctx, topic, 1, 3, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.CreateACLs(ctx, &stratav1.ACL{Principal: "User:carol", ResourceType: "topic", Name: "public", Operation: "read"}); err != nil {
		t.Fatal(err)
	}
	token := addToken(t, sc, "User:carol")
	ui := "https://" + sc.admin + "/ui"

	// Anonymous: the login form.
	br.open(t, ui+"/topics", "input[name=token]")
	br.run(t, 30*time.Second,
		chromedp.SendKeys(chromedp.CSS("input[name=token]"), token),
		chromedp.Submit(chromedp.CSS("input[name=token]")),
		chromedp.WaitVisible(chromedp.CSS("#topics")))
	body, err := br.text("#topics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "public") || strings.Contains(body, "secret") {
		t.Errorf("carol's topics: want public and not secret, got %q", body)
	}
	br.open(t, ui+"/topics/secret", "#error")
	if s, _ := br.text("#error"); !strings.HasPrefix(s, "403") {
		t.Errorf("carol on /ui/topics/secret: %q, want 403", s)
	}
	br.open(t, ui+"/topics/public", "#partitions")
	br.noCSPViolations(t)

	// The same over HTTP: status codes, and a POST without the CSRF token.
	tlsCfg := &tls.Config{InsecureSkipVerify: true} // the test's CA; what is tested is the console's answers
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(method, u string, form url.Values, header ...string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, u, strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	bearer := []string{"Authorization", "Bearer " + token}
	if code, _ := status("GET", ui+"/topics/secret", nil, bearer...); code != http.StatusForbidden {
		t.Errorf("bearer GET /ui/topics/secret: %d, want 403", code)
	}
	if code, _ := status("GET", ui+"/topics", nil); code != http.StatusSeeOther {
		t.Errorf("anonymous GET /ui/topics: %d, want a redirect to log in", code)
	}
	code, page := status("GET", ui+"/login", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /ui/login: %d", code)
	}
	csrf := regexp.MustCompile(`name="csrf_token" value="([^"]+)"`).FindStringSubmatch(page)
	if csrf == nil {
		t.Fatalf("no CSRF token on the login form:\n%s", page)
	}
	if code, body := status("POST", ui+"/login", url.Values{"token": {token}}); code != http.StatusForbidden {
		t.Errorf("login POST without the CSRF token: %d, want 403\n%s", code, body)
	}
	if code, _ := status("GET", ui+"/topics", nil); code != http.StatusSeeOther {
		t.Errorf("the refused POST logged in: GET /ui/topics %d", code)
	}
	if code, _ := status("POST", ui+"/login", url.Values{"token": {token}, "csrf_token": {csrf[1]}}); code != http.StatusSeeOther {
		t.Errorf("login POST with the CSRF token: %d, want 303", code)
	}
	if code, _ := status("GET", ui+"/topics", nil); code != http.StatusOK {
		t.Errorf("after login, GET /ui/topics: %d", code)
	}
}
