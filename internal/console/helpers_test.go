package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

const (
	stewardTok = "steward-token-0123456789"
	viewerTok  = "viewer-token-0123456789"
)

// hostile is agent text that must stay text: markup and a terminal
// escape.
const hostile = "<script>alert('x')</script>\x1b[31mred\x1b]0;title\x07"

// world is a jobs folder with jobs in the states the console steers,
// served by a console: stuck (INTERVENTION_REQUIRED, its summary
// hostile), done (SUCCESS, with checkpoints), waiting (PENDING, never
// run), tpl (a schedule template).
type world struct {
	t   *testing.T
	k   *testkit.Fixture
	c   *Console
	srv *httptest.Server
}

func newWorld(t *testing.T, disabled ...string) *world {
	t.Helper()
	k := testkit.New(t)
	k.Sign()
	e := runner.NewEngine(k.Env, builtins.Effects())
	e.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	k.Runner = e
	k.WriteJob("stuck", map[string]any{"description": "needs a human", "agents": map[string]any{
		"worker":     testkit.Script(testkit.Step("STUCK", hostile), testkit.Step("COMPLETED", "done after guidance")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	k.Run("stuck")
	k.WriteJob("done", map[string]any{"agents": map[string]any{
		"worker":     map[string]any{"provider": "script", "script": []any{map[string]any{"action": "COMPLETED", "summary": "wrote a.txt", "evidence_files": []string{"a.txt"}, "files": map[string]string{"a.txt": "A\n"}}}},
		"supervisor": map[string]any{"provider": "script", "script": []any{map[string]any{"action": "COMPLETED", "summary": "fine", "evidence_files": []string{"a.txt"}, "files": map[string]string{"b.txt": "B\n"}}}},
	}})
	k.Run("done")
	k.WriteJob("waiting", map[string]any{"description": "a pending job about kittens"})
	k.WriteJob("tpl", map[string]any{"schedule": map[string]any{"cron": "@daily"}})
	c := New(Options{Store: k.Env.Store, Steward: steward.New(k.Env, builtins.Effects()), Logger: testkit.Logger(),
		Tokens: Tokens{Steward: stewardTok, Viewer: viewerTok}, Disabled: disabled, Poll: 20 * time.Millisecond})
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return &world{t: t, k: k, c: c, srv: srv}
}

// call makes a request with token tok ("" for none) and decodes the JSON
// answer (nil when it is not JSON).
func (w *world) call(method, path, tok string, body any) (int, map[string]any) {
	w.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = strings.NewReader(string(b))
	}
	req, _ := http.NewRequest(method, w.srv.URL+path, rd)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	cl := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := cl.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// browser is a client with a cookie jar that does not follow redirects.
func (w *world) browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login logs a browser in with tok and returns its CSRF token.
func (w *world) login(cl *http.Client, tok string) string {
	w.t.Helper()
	resp, err := cl.PostForm(w.srv.URL+"/login", url.Values{"token": {tok}})
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		w.t.Fatalf("login: %d", resp.StatusCode)
	}
	resp, err = cl.Get(w.srv.URL + "/api/v1/session")
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	var s map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&s)
	csrf, _ := s["csrf_token"].(string)
	return csrf
}

func errCode(body map[string]any) string {
	e, _ := body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func jobStatus(body map[string]any) string {
	j, _ := body["job"].(map[string]any)
	s, _ := j["status"].(string)
	return s
}

// sseEvents reads events of a stream into ch until the body closes.
func sseEvents(body io.Reader, ch chan<- [2]string) {
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	ev := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			ev = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			ch <- [2]string{ev, strings.TrimPrefix(line, "data: ")}
		}
	}
	close(ch)
}

func readAll(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func writeAll(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

// stream opens the event stream at url as the viewer, with the request
// headers kv (name, value, ...), and reads its events into the channel it
// returns (sseEvents) for 10 s at most; end closes it, as the test's end
// does.
func stream(t *testing.T, url string, kv ...string) (resp *http.Response, events <-chan [2]string, end func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+viewerTok)
	for i := 0; i+1 < len(kv); i += 2 {
		req.Header.Set(kv[i], kv[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	end = func() { cancel(); resp.Body.Close() }
	t.Cleanup(end)
	ch := make(chan [2]string, 64)
	go sseEvents(resp.Body, ch)
	return resp, ch, end
}
