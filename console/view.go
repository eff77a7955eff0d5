package console

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/internal/human"
)

// view is what a view's builder returns: which template, and its data.
type view struct {
	Template string
	Title    string
	Nav      string
	// Live: the page has a fragment htmx polls (the template's "live"),
	// every PollEvery (pollEvery when empty).
	Live      bool
	PollEvery string
	Data      any
}

// statusError is a refusal with the HTTP status to answer it with.
type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &statusError{http.StatusNotFound, fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &statusError{http.StatusBadRequest, fmt.Sprintf(format, args...)}
}

// refusal is a broker error as an HTTP status and message.
func refusal(err error) (int, string) {
	var se *statusError
	if errors.As(err, &se) {
		return se.status, se.msg
	}
	switch broker.ReasonOf(err) {
	case broker.ReasonPermissionDenied:
		return http.StatusForbidden, messageOf(err)
	case broker.ReasonUnauthenticated:
		return http.StatusUnauthorized, messageOf(err)
	case broker.ReasonTopicNotFound, broker.ReasonGroupNotFound, broker.ReasonPartitionNotFound:
		return http.StatusNotFound, messageOf(err)
	case broker.ReasonInvalidRequest, broker.ReasonInvalidConfig, broker.ReasonInvalidTopicName:
		return http.StatusBadRequest, messageOf(err)
	}
	return http.StatusServiceUnavailable, messageOf(err)
}

// view wraps a view's builder: authenticate, build, render the page or
// (with ?live=1, htmx's polls) its live fragment.
func (c *console) view(build func(r *http.Request, v *viewer) (view, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		live := r.URL.Query().Get("live") == "1"
		se := c.sessions.get(r)
		if se == nil && !live {
			se = c.sessions.start(w, r, "")
		}
		v, err := c.viewer(r, se)
		if err == nil && !v.open && v.principal.Anonymous() {
			err = errLoginNeeded
		}
		if err != nil {
			if live {
				// htmx follows this header with a whole-page visit.
				w.Header().Set("HX-Redirect", Prefix+"/login")
				c.fail(w, r, http.StatusUnauthorized, messageOf(err))
				return
			}
			if err == errLoginNeeded {
				http.Redirect(w, r, Prefix+"/login?next="+url.QueryEscape(r.URL.Path), http.StatusSeeOther)
				return
			}
			if se != nil && se.token != "" {
				c.sessions.end(w, r, se) // its token no longer checks out
			}
			c.renderLogin(w, r, http.StatusUnauthorized, messageOf(err))
			return
		}
		res, err := build(r, v)
		if err != nil {
			status, msg := refusal(err)
			c.fail(w, r, status, msg)
			return
		}
		p := page{Title: res.Title, Nav: res.Nav, Principal: v.name(), PollEvery: pollEvery, Data: res.Data}
		if res.PollEvery != "" {
			p.PollEvery = res.PollEvery
		}
		if se != nil {
			p.CSRF = se.csrf
		}
		if res.Live {
			q := url.Values{"live": {"1"}}
			for k, vs := range r.URL.Query() {
				if k != "live" {
					q[k] = vs
				}
			}
			p.LiveURL = r.URL.Path + "?" + q.Encode()
		}
		c.render(w, http.StatusOK, res.Template, live, p)
	}
}

const errLoginNeeded = consoleError("log in with a token or a client certificate")

// fail answers with an error page (or, for htmx, the message alone).
func (c *console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if r.Header.Get("HX-Request") == "true" || r.Method != http.MethodGet {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		fmt.Fprintln(w, msg)
		return
	}
	c.render(w, status, "error", false, page{Title: http.StatusText(status), Data: errorData{Status: status, Text: http.StatusText(status), Message: msg}})
}

type errorData struct {
	Status  int
	Text    string
	Message string
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"bytes":  human.Bytes,
	"millis": humanMillis,
	"ids":    joinIDs,
	"pct":    percentClass,
	"ago":    func(ms int64) string { return humanMillis(time.Now().UnixMilli() - ms) },
	"path":   url.PathEscape,
	"add":    func(a, b int) int { return a + b },
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// humanMillis renders a duration in milliseconds: "250ms", "42s", "3m20s".
func humanMillis(ms int64) string {
	if ms < 1000 {
		return fmt.Sprintf("%dms", ms)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

func joinIDs(ids []int32) string {
	s := ""
	for i, id := range ids {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(int(id))
	}
	return s
}

// percentClass is the CSS class of a bar n/of full: "w0" to "w100", a
// width console.css sets (the policy allows no inline style).
func percentClass(n, of int64) string {
	if of <= 0 || n <= 0 {
		return "w0"
	}
	p := n * 100 / of
	if p == 0 {
		p = 1 // something, however little, shows
	}
	return "w" + itoa(min(p, 100))
}

// action wraps a state change (a POST, which checkPost has let through):
// authenticate, do it, then redirect to what changed, or show the form
// again with the refusal.
func (c *console) action(do func(r *http.Request, v *viewer) (view, string, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se := c.sessions.get(r) // there is one: checkPost checked its CSRF token
		v, err := c.viewer(r, se)
		if err == nil && !v.open && v.principal.Anonymous() {
			err = errLoginNeeded
		}
		if err != nil {
			c.fail(w, r, http.StatusUnauthorized, messageOf(err))
			return
		}
		res, next, err := do(r, v)
		if err == nil && next != "" {
			http.Redirect(w, r, next, http.StatusSeeOther)
			return
		}
		status := http.StatusOK
		if err != nil {
			status, _ = refusal(err)
		}
		if res.Template == "" {
			c.fail(w, r, status, messageOf(err))
			return
		}
		c.render(w, status, res.Template, false, page{Title: res.Title, Nav: res.Nav, Principal: v.name(), CSRF: se.csrf, PollEvery: pollEvery, Data: res.Data})
	}
}
