package console

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/strata-log/strata/broker"
)

// Prefix is where the console is served on the admin listener.
const Prefix = "/ui"

// pollEvery is how often the live fragments of a page refresh.
const pollEvery = "2s"

// contentSecurityPolicy lets a page load scripts, styles and images from
// the console alone: no inline script or style, no other origin, no
// framing. htmx is configured (layout.html) not to add inline styles.
const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Deps are what the console is built from.
type Deps struct {
	// Source is the broker the console reads.
	Source Source
	// Auth is the broker's authentication and authorization rules (the
	// same the gRPC API and the Kafka listener are held to); nil when the
	// broker runs without authentication, and everyone may see and do
	// everything, as on its API.
	Auth *broker.Auth
	// Logger receives the console's failures to render.
	Logger *slog.Logger
	// Now is the clock, for the timeline; time.Now when nil.
	Now func() time.Time
}

// console serves the pages.
type console struct {
	src      Source
	auth     *broker.Auth
	log      *slog.Logger
	now      func() time.Time
	pages    map[string]*template.Template
	sessions *sessions
	bucket   bucketProbe
}

// Handler returns the console, to be mounted at Prefix + "/" on the admin
// listener's mux.
func Handler(d Deps) http.Handler {
	c := &console{src: d.Source, auth: d.Auth, log: d.Logger, now: d.Now, pages: parsePages(), sessions: newSessions()}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.bucket.probe = d.Source.ProbeObjectStore
	c.bucket.now = c.now

	static, _ := fs.Sub(staticFS, "static")
	mux := http.NewServeMux()
	mux.Handle("GET "+Prefix+"/static/", http.StripPrefix(Prefix+"/static/", cacheFor(time.Hour, http.FileServerFS(static))))
	mux.HandleFunc("GET "+Prefix+"/login", c.loginPage)
	mux.HandleFunc("POST "+Prefix+"/login", c.login)
	mux.HandleFunc("POST "+Prefix+"/logout", c.logout)
	mux.HandleFunc("GET "+Prefix+"/{$}", c.view(c.clusterView))
	mux.HandleFunc("GET "+Prefix+"/topics", c.view(c.topicsView))
	mux.HandleFunc("GET "+Prefix+"/topics/{topic}", c.view(c.topicView))
	mux.HandleFunc("GET "+Prefix+"/new-topic", c.view(c.newTopicPage))
	mux.HandleFunc("POST "+Prefix+"/topics", c.action(c.createTopic))
	mux.HandleFunc("GET "+Prefix+"/topics/{topic}/alter", c.view(c.alterTopicPage))
	mux.HandleFunc("POST "+Prefix+"/topics/{topic}/alter", c.action(c.alterTopic))
	mux.HandleFunc("GET "+Prefix+"/groups/{group}/reset", c.view(c.resetPage))
	mux.HandleFunc("POST "+Prefix+"/groups/{group}/reset", c.action(c.resetGroup))
	mux.HandleFunc("GET "+Prefix+"/topics/{topic}/partitions/{partition}", c.view(c.timelineView))
	mux.HandleFunc("GET "+Prefix+"/topics/{topic}/partitions/{partition}/records", c.view(c.recordsView))
	mux.HandleFunc("GET "+Prefix+"/groups", c.view(c.groupsView))
	mux.HandleFunc("GET "+Prefix+"/groups/{group}", c.view(c.groupView))
	mux.HandleFunc(Prefix+"/", func(w http.ResponseWriter, r *http.Request) {
		c.fail(w, r, http.StatusNotFound, "no such page")
	})
	return securityHeaders(c.checkPost(mux))
}

// securityHeaders sets, on every response, the headers that keep a page
// from running what the console did not serve or being framed by another
// site.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", contentSecurityPolicy)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		h.ServeHTTP(w, r)
	})
}

func cacheFor(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age="+itoa(int64(d/time.Second)))
		h.ServeHTTP(w, r)
	})
}

// page is what every template gets: the view's data and the frame around
// it.
type page struct {
	Title string
	// Nav is the section highlighted in the navigation.
	Nav string
	// Principal is who is looking; "" without authentication.
	Principal string
	// CSRF is the session's token, for forms and htmx's POSTs.
	CSRF string
	// LiveURL is the fragment htmx polls for the live figures; "" when the
	// page has none.
	LiveURL   string
	PollEvery string
	// BrokerID is the broker serving the console.
	BrokerID int32
	Data     any
}

// parsePages parses each view's template with the layout around it.
func parsePages() map[string]*template.Template {
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, name := range names {
		if name == "templates/layout.html" {
			continue
		}
		t := template.Must(template.Must(base.Clone()).ParseFS(templateFS, name))
		pages[name[len("templates/"):len(name)-len(".html")]] = t
	}
	return pages
}

// bufPool holds the buffers pages render into, so that a failed render
// sends an error page rather than half a page.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render writes the template name of page: the whole document, or with
// live only the fragment "live" that htmx swaps in.
func (c *console) render(w http.ResponseWriter, status int, name string, live bool, p page) {
	t, ok := c.pages[name]
	if !ok {
		http.Error(w, "console: no template "+name, http.StatusInternalServerError)
		return
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	root := "layout.html"
	if live {
		root = "live"
	}
	if err := t.ExecuteTemplate(buf, root, p); err != nil {
		c.log.Error("console: render failed", "page", name, "err", err)
		http.Error(w, "console: the page failed to render", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}
