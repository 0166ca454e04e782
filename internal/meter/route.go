package meter

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// route is what the proxy makes of a request's method and path: which
// family's upstream takes it, the path below the upstream's base URL, and
// the API that meters it (nil for a free endpoint: model lists, token
// counts, a connectivity probe).
type route struct {
	family Family
	api    api
	// path is the path below the upstream's base URL, as escaped.
	path string
	// model is the model named in the path (Gemini), "" otherwise.
	model string
	// stream: the path asks for a stream (Gemini streamGenerateContent).
	stream bool
}

// The paths' patterns are compiled at the first request routed, not at
// package init: their {0,127} repetitions make large programs (about 4 ms
// and 4,400 allocations), which every start of logistd paid, the
// sandbox's launcher and in-sandbox helper included, though only the
// proxy uses them.

// geminiPath is a Gemini model method: /{version}/models/{model}:{method}.
var geminiPath = lazyRegexp(`^/(v1beta|v1|v1alpha)/models/([A-Za-z0-9][A-Za-z0-9._-]{0,127}):(generateContent|streamGenerateContent|countTokens)$`)

// geminiModelsPath is Gemini's model list or one model's metadata.
var geminiModelsPath = lazyRegexp(`^/(v1beta|v1|v1alpha)/models(/[A-Za-z0-9][A-Za-z0-9._-]{0,127})?$`)

// modelsPath is the OpenAI or Anthropic model list, or one model.
var modelsPath = lazyRegexp(`^(/v1)?/models(/[A-Za-z0-9][A-Za-z0-9._:/-]{0,127})?$`)

// lazyRegexp compiles expr at its first use.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// match routes a request. The paths are those the SDKs build from the base
// URLs of BaseURL; OpenAI-style paths are also taken without /v1 (some
// clients join a base URL without it). Everything else is refused: an
// endpoint the proxy does not meter (batches, files, fine-tuning, realtime)
// could spend unmetered.
func match(r *http.Request) (route, bool) {
	p := r.URL.Path
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch {
	case r.Method == http.MethodPost && p == "/v1/messages":
		return route{family: Anthropic, api: anthropicAPI{}, path: "/v1/messages"}, true
	case r.Method == http.MethodPost && p == "/v1/messages/count_tokens":
		return route{family: Anthropic, path: "/v1/messages/count_tokens"}, true
	case read && p == "/api/hello":
		// Claude Code's connectivity probe.
		return route{family: Anthropic, path: "/api/hello"}, true
	case r.Method == http.MethodPost && (p == "/v1/chat/completions" || p == "/chat/completions"):
		return route{family: OpenAI, api: chatAPI{}, path: "/chat/completions"}, true
	case r.Method == http.MethodPost && (p == "/v1/responses" || p == "/responses"):
		return route{family: OpenAI, api: responsesAPI{}, path: "/responses"}, true
	case read && modelsPath().MatchString(p):
		if r.Header.Get("Anthropic-Version") != "" {
			return route{family: Anthropic, path: "/v1" + strings.TrimPrefix(p, "/v1")}, true
		}
		return route{family: OpenAI, path: strings.TrimPrefix(p, "/v1")}, true
	case read && geminiModelsPath().MatchString(p):
		return route{family: Gemini, path: p}, true
	case r.Method == http.MethodPost:
		m := geminiPath().FindStringSubmatch(p)
		if m == nil {
			return route{}, false
		}
		rt := route{family: Gemini, path: p, model: m[2]}
		if m[3] != "countTokens" {
			rt.api = geminiAPI{}
			rt.stream = m[3] == "streamGenerateContent"
		}
		return rt, true
	}
	return route{}, false
}

// familyOf guesses the family of a request no route takes, for the shape
// of the error it gets.
func familyOf(r *http.Request) Family {
	switch {
	case r.Header.Get("Anthropic-Version") != "" || r.Header.Get("X-Api-Key") != "":
		return Anthropic
	case r.Header.Get("X-Goog-Api-Key") != "" || strings.Contains(r.URL.Path, ":") || strings.HasPrefix(r.URL.Path, "/v1beta/"):
		return Gemini
	}
	return OpenAI
}

// credentials are the values a client may have put its key in, in the
// order they are tried: x-api-key (Anthropic), Authorization: Bearer
// (OpenAI; Anthropic's auth token), x-goog-api-key and ?key= (Gemini),
// api-key (Azure OpenAI).
func credentials(r *http.Request) []string {
	var out []string
	add := func(v string) {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	add(r.Header.Get("X-Api-Key"))
	if a := r.Header.Get("Authorization"); len(a) > 7 && strings.EqualFold(a[:7], "Bearer ") {
		add(a[7:])
	}
	add(r.Header.Get("X-Goog-Api-Key"))
	add(r.URL.Query().Get("key"))
	add(r.Header.Get("Api-Key"))
	return out
}

// credentialHeaders are request headers that carry a client's credential;
// none of them goes upstream.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "X-Goog-Api-Key", "Api-Key", "Cookie"}

// hopHeaders are hop-by-hop headers (RFC 9110 §7.6.1), never forwarded.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// removeHopHeaders deletes the hop-by-hop headers and those the
// Connection header names.
func removeHopHeaders(h http.Header) {
	for _, v := range h.Values("Connection") {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
}

// upstreamHeader is the header sent upstream: the client's, without
// hop-by-hop headers, credentials, framing and encodings (the body is
// re-encoded, and identity is asked for so the usage can be read), with
// the real key of the upstream.
func upstreamHeader(in http.Header, up Upstream) http.Header {
	h := in.Clone()
	removeHopHeaders(h)
	for _, k := range credentialHeaders {
		h.Del(k)
	}
	for _, k := range []string{"Host", "Content-Length", "Content-Encoding", "Accept-Encoding", "Expect",
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Real-Ip"} {
		h.Del(k)
	}
	h.Set("Accept-Encoding", "identity")
	switch up.Family {
	case Anthropic:
		h.Set("X-Api-Key", up.Key)
	case OpenAI:
		h.Set("Authorization", "Bearer "+up.Key)
	case Gemini:
		h.Set("X-Goog-Api-Key", up.Key)
	}
	for k, vs := range up.Header {
		h[http.CanonicalHeaderKey(k)] = slices.Clone(vs)
	}
	return h
}

// clientHeader copies an upstream response's header for the client:
// without hop-by-hop headers, framing (recomputed), cookies and HTTP/3
// advertisements.
func clientHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
	removeHopHeaders(dst)
	for _, k := range []string{"Content-Length", "Content-Encoding", "Set-Cookie", "Alt-Svc"} {
		dst.Del(k)
	}
}
