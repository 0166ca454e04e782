package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/signing"
)

// Role is what a caller may do.
type Role int

const (
	// Anonymous: no valid token; only the login page and the assets.
	Anonymous Role = iota
	// Viewer reads everything and changes nothing.
	Viewer
	// StewardRole may act on jobs.
	StewardRole
)

func (r Role) String() string {
	switch r {
	case Viewer:
		return "viewer"
	case StewardRole:
		return "steward"
	}
	return "anonymous"
}

// TokenFile is the steward token logistd makes in the jobs folder's
// .logist when no token file is given.
const TokenFile = "console-token"

// Tokens are the secrets that open the console; "" is none of that kind.
type Tokens struct {
	Steward string
	Viewer  string
}

// LoadTokens reads the token files given (--console-token-file,
// --console-viewer-token-file). With neither, the steward's token is
// <jobsDir>/.logist/console-token, made once (0600, created exclusively,
// so two daemons racing agree) and kept across restarts; generated is its
// path then, for the log (never the token itself).
func LoadTokens(jobsDir, stewardFile, viewerFile string) (t Tokens, generated string, err error) {
	read := func(file string) (string, error) {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("console token: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if len(tok) < 16 {
			return "", fmt.Errorf("console token in %s: shorter than 16 characters", file)
		}
		return tok, nil
	}
	if stewardFile != "" {
		if t.Steward, err = read(stewardFile); err != nil {
			return t, "", err
		}
	}
	if viewerFile != "" {
		if t.Viewer, err = read(viewerFile); err != nil {
			return t, "", err
		}
	}
	if t.Steward != "" && t.Steward == t.Viewer {
		return t, "", errors.New("console tokens: the steward's and the viewer's token are the same")
	}
	if stewardFile != "" || viewerFile != "" {
		return t, "", nil
	}
	dir := filepath.Join(jobsDir, signing.Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return t, "", fmt.Errorf("console token: %w", err)
	}
	path := filepath.Join(dir, TokenFile)
	b, _, err := atomicfile.ReadOrCreate(path, 0o600, func() ([]byte, error) { return []byte(newSecret() + "\n"), nil })
	if err != nil {
		return t, "", fmt.Errorf("console token: %w", err)
	}
	t.Steward = strings.TrimSpace(string(b))
	return t, path, nil
}

func newSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail (Go 1.24)
	return hex.EncodeToString(b)
}

// role is the role a token opens (Anonymous for none).
func (t Tokens) role(tok string) Role {
	eq := func(a, b string) bool { return b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
	switch {
	case eq(tok, t.Steward):
		return StewardRole
	case eq(tok, t.Viewer):
		return Viewer
	}
	return Anonymous
}

// A session is a browser logged in with a token: the cookie holds its id,
// forms and fetches carry its CSRF token.
type session struct {
	role    Role
	csrf    string
	expires time.Time
}

const (
	cookieName = "logist_session"
	sessionTTL = 12 * time.Hour
	csrfHeader = "X-CSRF-Token"
	csrfField  = "csrf"
)

type sessions struct {
	mu sync.Mutex
	m  map[string]*session
}

func newSessions() *sessions { return &sessions{m: map[string]*session{}} }

func (s *sessions) create(role Role) (string, *session) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for id, se := range s.m {
		if now.After(se.expires) {
			delete(s.m, id)
		}
	}
	id := newSecret()
	se := &session{role: role, csrf: newSecret(), expires: now.Add(sessionTTL)}
	s.m[id] = se
	return id, se
}

func (s *sessions) get(id string) *session {
	s.mu.Lock()
	defer s.mu.Unlock()
	se := s.m[id]
	if se == nil || time.Now().After(se.expires) {
		delete(s.m, id)
		return nil
	}
	return se
}

func (s *sessions) drop(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// caller is who made a request.
type caller struct {
	role Role
	// session is set when the request came with the cookie (not a Bearer
	// token): its state changes need the CSRF token.
	session *session
}

func (c *Console) who(r *http.Request) caller {
	if h := r.Header.Get("Authorization"); h != "" {
		// The scheme is case-insensitive (RFC 9110 11.1): "bearer" too.
		scheme, tok, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return caller{}
		}
		return caller{role: c.o.Tokens.role(strings.TrimSpace(tok))}
	}
	if ck, err := r.Cookie(cookieName); err == nil {
		if se := c.sessions.get(ck.Value); se != nil {
			return caller{role: se.role, session: se}
		}
	}
	return caller{}
}

// guard checks a route's caller: anonymous 401 (a page sends the browser
// to log in), a role short of the route's 403, and for a POST by cookie a
// CSRF token and a same-origin Origin (a form too large to read for its
// token is 413, as any body over the cap is).
func (c *Console) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rt.Public {
			rt.Handler(w, r)
			return
		}
		who := c.who(r)
		switch {
		case who.role == Anonymous && !rt.API:
			next := r.URL.RequestURI()
			if r.Method != http.MethodGet {
				// A form of a page whose session ended: back to that
				// page after logging in (its action's path has no GET).
				next = formPage(r)
			}
			http.Redirect(w, r, "/login?next="+url.QueryEscape(next), http.StatusSeeOther)
			return
		case who.role == Anonymous:
			// A 401 names its scheme (RFC 9110 15.5.2), and a token
			// that opens nothing is told from none (RFC 6750 3.1).
			msg, challenge := "a token is required: Authorization: Bearer TOKEN, or log in at /login", `Bearer realm="logist"`
			if r.Header.Get("Authorization") != "" {
				msg, challenge = "the Authorization header's token opens nothing here: Authorization: Bearer TOKEN (the steward's or a viewer's token)", `Bearer realm="logist", error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			c.fail(w, r, http.StatusUnauthorized, "unauthorized", msg)
			return
		}
		if r.Method == http.MethodPost && who.session != nil {
			csrfRefused := func() {
				c.fail(w, r, http.StatusForbidden, "permission_denied", "missing or wrong CSRF token: reload the page")
			}
			if !sameOrigin(r) {
				csrfRefused()
				return
			}
			tok, err := csrfToken(w, r)
			if err != nil {
				// A form too large to read for its token (413) or
				// that does not parse (400) is refused as such: its
				// token is not known to be wrong, and nothing is done.
				c.failErr(w, r, err)
				return
			}
			if !csrfMatch(tok, who.session) {
				csrfRefused()
				return
			}
		}
		if who.role < rt.Need {
			c.fail(w, r, http.StatusForbidden, "permission_denied", "a viewer may not act on jobs: log in with the steward's token")
			return
		}
		rt.Handler(w, r.WithContext(withCaller(r.Context(), who)))
	})
}

// Guard serves h to the steward only, by the rule of the console's
// actions (guard): no token or session is 401, a viewer's 403, a POST by
// cookie needs the CSRF token. Loopback is no exception, as it is none for
// the console. The daemon's --pprof handlers go through it: a profile or
// the command line is the steward's to read.
func (c *Console) Guard(h http.Handler) http.Handler {
	return c.guard(route{API: true, Need: StewardRole, Handler: h.ServeHTTP})
}

// csrfToken is the CSRF token a POST carries: in its header (fetch), or
// else in its form's field (a form post), the form read by parseForm
// under the cap every body has (a form it could not read is its error).
func csrfToken(w http.ResponseWriter, r *http.Request) (string, error) {
	if tok := r.Header.Get(csrfHeader); tok != "" || !isForm(r) {
		return tok, nil
	}
	if err := parseForm(w, r); err != nil {
		return "", err
	}
	return r.PostForm.Get(csrfField), nil
}

// csrfMatch says whether tok is the session's CSRF token.
func csrfMatch(tok string, se *session) bool {
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(se.csrf)) == 1
}

// formPage is the page of this server a form was posted from (its
// Referer, which the console's Referrer-Policy keeps for its own
// requests), else the jobs list.
func formPage(r *http.Request) string {
	u, err := url.Parse(r.Referer())
	if err != nil || u.Host != r.Host || u.Path == "" {
		return "/"
	}
	return safeNext(u.RequestURI())
}

// sameOrigin refuses a cross-site request a browser marked with its
// Origin (SameSite=Strict already keeps the cookie off it).
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

func (c *Console) pageLogin(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, "login", map[string]any{"Next": safeNext(r.URL.Query().Get("next")), "Error": ""})
}

// postLogin reads the login's form under its own small cap (the route is
// public): a form over it is 413 naming the limit, one that does not
// parse 400, as any form is (parseFormUnder); a body of another type is
// read as no form (no token).
func (c *Console) postLogin(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "bad login form", http.StatusBadRequest)
		return
	}
	if !isForm(r) {
		r.PostForm = url.Values{}
	} else if err := parseFormUnder(w, r, maxLoginForm); err != nil {
		c.failErr(w, r, err)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	role := c.o.Tokens.role(strings.TrimSpace(r.PostForm.Get("token")))
	if role == Anonymous {
		c.renderStatus(w, r, http.StatusUnauthorized, "login", map[string]any{"Next": next, "Error": "That token opens nothing here."})
		return
	}
	id, _ := c.sessions.create(role)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: id, Path: "/", HttpOnly: true, Secure: c.o.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: int(sessionTTL / time.Second)})
	c.o.Logger.Info("console login", "role", role.String(), "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (c *Console) postLogout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName); err == nil {
		c.sessions.drop(ck.Value)
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, Secure: c.o.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext is a page to go to after logging in: a path of this server.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/"
	}
	return next
}
