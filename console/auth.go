package console

// Who may look and what they see: the broker's rules, as on its API.
//
//   - Without authentication (Deps.Auth nil: a plaintext broker) everyone
//     sees everything, as every gRPC client would.
//   - With it (TLS on), a request shows a verified client certificate, an
//     "Authorization: Bearer" token, or the session cookie the login form
//     sets for a token; broker.Auth.Authenticate decides who that is, and
//     an anonymous visitor is sent to the login form.
//   - Listings show only what broker.Visibility lets the principal see; a
//     topic's or group's own page needs what DescribeTopic or
//     DescribeGroup needs on the API (broker.Auth.Authorize), else 403.
//
// Cross-site request forgery: every POST needs the session's CSRF token
// (form field csrf_token or header X-CSRF-Token), and one whose Origin is
// another site's is refused whatever it carries. The session cookie is
// HttpOnly, SameSite=Strict, and Secure on TLS.

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/strata-log/strata/broker"
	"github.com/strata-log/strata/security"
)

const (
	sessionCookie = "strata_console"
	// sessionTTL is how long a session (its login and CSRF token) lasts.
	sessionTTL = 12 * time.Hour
	// maxSessions bounds the memory sessions take; past it the oldest
	// expire first.
	maxSessions = 10000
	// csrfField and csrfHeader carry the CSRF token of a POST.
	csrfField  = "csrf_token"
	csrfHeader = "X-CSRF-Token"
	// maxFormBytes bounds a POST's body.
	maxFormBytes = 64 << 10
)

// session is one browser's: its CSRF token and, after the login form, the
// token it logged in with (checked again on every request, so a revoked
// token ends the session).
type session struct {
	id      string
	csrf    string
	token   string
	expires time.Time
}

// sessions are held in memory: a broker's restart logs everyone out.
type sessions struct {
	mu struct {
		sync.Mutex
		byID map[string]*session
	}
}

func newSessions() *sessions {
	s := &sessions{}
	s.mu.byID = map[string]*session{}
	return s
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// get returns the live session of r's cookie, or nil.
func (s *sessions) get(r *http.Request) *session {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.mu.byID[ck.Value]
	if !ok || time.Now().After(se.expires) {
		return nil
	}
	return se
}

// start makes a new session holding token (may be "") and sets its cookie.
func (s *sessions) start(w http.ResponseWriter, r *http.Request, token string) *session {
	se := &session{id: randomToken(), csrf: randomToken(), token: token, expires: time.Now().Add(sessionTTL)}
	s.mu.Lock()
	if len(s.mu.byID) >= maxSessions {
		s.evictLocked()
	}
	s.mu.byID[se.id] = se
	s.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: se.id, Path: Prefix, MaxAge: int(sessionTTL / time.Second),
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return se
}

// evictLocked drops expired sessions, and if none had, the one closest to
// expiring.
func (s *sessions) evictLocked() {
	now := time.Now()
	var oldest *session
	for id, se := range s.mu.byID {
		if now.After(se.expires) {
			delete(s.mu.byID, id)
			continue
		}
		if oldest == nil || se.expires.Before(oldest.expires) {
			oldest = se
		}
	}
	if len(s.mu.byID) >= maxSessions && oldest != nil {
		delete(s.mu.byID, oldest.id)
	}
}

// end forgets se and clears its cookie.
func (s *sessions) end(w http.ResponseWriter, r *http.Request, se *session) {
	if se != nil {
		s.mu.Lock()
		delete(s.mu.byID, se.id)
		s.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: Prefix, MaxAge: -1,
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

// viewer is who is looking, and what the broker's rules let them see.
type viewer struct {
	// open: the broker runs without authentication.
	open      bool
	principal security.Principal
	vis       broker.Visibility
	auth      *broker.Auth
}

func (v *viewer) seesTopic(name string) bool { return v.open || v.vis.Topic(name) }
func (v *viewer) seesGroup(name string) bool { return v.open || v.vis.Group(name) }

// seesOffset: may the viewer see an offset committed on topic.
func (v *viewer) seesOffset(topic string) bool { return v.open || v.vis.Offset(topic) }

// may returns nil when the viewer may make call, which needs acc: the
// API's check, logged and counted like the API's denials.
func (v *viewer) may(call string, acc broker.Access) error {
	if v.open {
		return nil
	}
	return v.auth.Authorize(v.principal, call, acc)
}

// status is s with only what the viewer may see.
func (v *viewer) status(s broker.ClusterStatus) broker.ClusterStatus {
	if v.open {
		return s
	}
	return s.VisibleTo(v.vis)
}

// name is the principal shown in the page's header; "" when open.
func (v *viewer) name() string {
	if v.open {
		return ""
	}
	return v.principal.Name
}

// viewer authenticates r (with its session se, may be nil).
func (c *console) viewer(r *http.Request, se *session) (*viewer, error) {
	if c.auth == nil {
		return &viewer{open: true}, nil
	}
	var cr broker.Credentials
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		cr.Cert = r.TLS.PeerCertificates[0] // verified by the handshake
	}
	if h := r.Header.Get("Authorization"); h != "" {
		// Only a bearer token counts; any other header is no credential.
		token, ok := strings.CutPrefix(h, "Bearer ")
		cr.TokenGiven = true
		if ok {
			cr.Token = token
		}
	} else if se != nil && se.token != "" {
		cr.TokenGiven, cr.Token = true, se.token
	}
	p, err := c.auth.Authenticate(cr)
	if err != nil {
		return nil, err
	}
	return &viewer{principal: p, vis: c.auth.VisibleTo(p), auth: c.auth}, nil
}

// checkPost refuses a state change (any method but GET and HEAD) that is
// cross-site or lacks the session's CSRF token, before any handler sees it.
func (c *console) checkPost(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if !sameOrigin(r) {
			c.fail(w, r, http.StatusForbidden, "cross-origin request refused: the console takes state changes from its own pages only")
			return
		}
		se := c.sessions.get(r)
		given := r.Header.Get(csrfHeader)
		if given == "" {
			given = r.PostFormValue(csrfField)
		}
		if se == nil || given == "" || subtle.ConstantTimeCompare([]byte(given), []byte(se.csrf)) != 1 {
			c.fail(w, r, http.StatusForbidden, "missing or wrong CSRF token: reload the page and try again")
			return
		}
		h.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether r comes from the console's own origin, as far
// as the browser says (Origin, Sec-Fetch-Site); a request that says
// nothing (not from a browser) is judged by its CSRF token alone.
func sameOrigin(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		return false
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return u.Scheme == scheme && u.Host == r.Host
}

// loginPage is the form that exchanges a token for a session cookie.
func (c *console) loginPage(w http.ResponseWriter, r *http.Request) {
	if c.auth == nil {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	c.renderLogin(w, r, http.StatusOK, "")
}

func (c *console) renderLogin(w http.ResponseWriter, r *http.Request, status int, message string) {
	se := c.sessions.get(r)
	if se == nil {
		se = c.sessions.start(w, r, "")
	}
	c.render(w, status, "login", false, page{Title: "Log in", CSRF: se.csrf,
		Data: loginData{Next: safeNext(r.FormValue("next")), Message: message}})
}

type loginData struct {
	Next    string
	Message string
}

// login checks the token posted (checkPost has checked the CSRF token)
// and starts a new session with it: the session id changes at login.
func (c *console) login(w http.ResponseWriter, r *http.Request) {
	if c.auth == nil {
		http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
		return
	}
	token := r.PostFormValue("token")
	p, err := c.auth.Authenticate(broker.Credentials{TokenGiven: true, Token: token})
	if err == nil && p.Anonymous() {
		err = errTokenRequired
	}
	if err != nil {
		c.renderLogin(w, r, http.StatusUnauthorized, messageOf(err))
		return
	}
	c.sessions.end(w, r, c.sessions.get(r))
	c.sessions.start(w, r, token)
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// logout ends the session.
func (c *console) logout(w http.ResponseWriter, r *http.Request) {
	c.sessions.end(w, r, c.sessions.get(r))
	to := Prefix + "/"
	if c.auth != nil {
		to = Prefix + "/login"
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// safeNext is where to go after logging in: a console page, never another
// site.
func safeNext(next string) string {
	if strings.HasPrefix(next, Prefix+"/") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return Prefix + "/"
}

type consoleError string

func (e consoleError) Error() string { return string(e) }

const errTokenRequired = consoleError("a token is required")

// messageOf is an error as the console shows it: the broker's message for
// its refusals.
func messageOf(err error) string {
	if be, ok := err.(*broker.Error); ok {
		return be.Message
	}
	return err.Error()
}
