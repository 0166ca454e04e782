package console

import (
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
)

// The API answers every request under /api/ in its JSON envelope, a
// request that no route serves too: a path the API does not have is 404,
// and a path it has asked with a method it does not take is 405, with
// Allow listing the methods it takes. net/http's mux would answer them in
// plain text, and redirect a path not in its clean form; apiNoRoute
// decides them all, before the mux. The pages keep the mux's answers.

// apiPrefix begins every path of the API (and wantsHTML never answers a
// page under it).
const apiPrefix = "/api/"

// apiNoRoute answers a request under /api/ that no route serves, and
// says whether it did.
func (c *Console) apiNoRoute(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.EscapedPath()
	if !strings.HasPrefix(p, apiPrefix) {
		return false
	}
	if clean := path.Clean(p); clean != p {
		// The API never redirects (net/http's mux would, to the
		// clean path): it names the clean path instead.
		msg := fmt.Sprintf("path %q: not in the API", p)
		if len(c.methodsFor(r, clean)) > 0 {
			msg += fmt.Sprintf(" (did you mean %s?)", clean)
		}
		c.fail(w, r, http.StatusNotFound, "not_found", msg+"; GET /api/v1/openapi.json lists its paths")
		return true
	}
	if _, pat := c.mux.Handler(r); c.patterns[pat] {
		return false
	}
	allow := c.methodsFor(r, p)
	if len(allow) == 0 {
		c.fail(w, r, http.StatusNotFound, "not_found", fmt.Sprintf("path %q: not in the API; GET /api/v1/openapi.json lists its paths", p))
		return true
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	c.fail(w, r, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("method %s: %s takes %s", r.Method, p, strings.Join(allow, ", ")))
	return true
}

// methodsFor are the methods a route serves escapedPath with (HEAD with
// GET, as net/http serves it), sorted: asked of the mux, which alone
// matches paths to patterns.
func (c *Console) methodsFor(r *http.Request, escapedPath string) []string {
	var out []string
	for _, m := range c.methods {
		u := *r.URL
		if err := setEscapedPath(&u, escapedPath); err != nil {
			return nil
		}
		probe := &http.Request{Method: m, URL: &u, Host: r.Host}
		if _, pat := c.mux.Handler(probe); c.patterns[pat] {
			out = append(out, m)
		}
	}
	return out
}

// setEscapedPath sets u's path from its escaped form.
func setEscapedPath(u *url.URL, escaped string) error {
	p, err := url.PathUnescape(escaped)
	if err != nil {
		return err
	}
	u.Path, u.RawPath = p, escaped
	return nil
}

// routeMethods are the methods the routes rs serve, HEAD with GET, sorted.
func routeMethods(rs []route) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Method)
		if r.Method == http.MethodGet {
			out = append(out, http.MethodHead)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
