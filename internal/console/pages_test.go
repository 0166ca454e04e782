package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/testkit"
)

func get(t *testing.T, cl *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestSessionAndCSRF: the login sets an HttpOnly, SameSite=Strict
// cookie; a post by cookie needs the session's CSRF token and a
// same-origin Origin; a viewer's session is refused any action even with
// its token (a forged form).
func TestSessionAndCSRF(t *testing.T) {
	w := newWorld(t)
	cl := w.browser()
	resp, err := cl.PostForm(w.srv.URL+"/login", url.Values{"token": {"wrong-wrong-wrong-wrong"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("wrong token: %d", resp.StatusCode)
	}
	resp, err = cl.PostForm(w.srv.URL+"/login", url.Values{"token": {stewardTok}, "next": {"//evil.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ck := resp.Header.Get("Set-Cookie")
	if !strings.Contains(ck, "HttpOnly") || !strings.Contains(ck, "SameSite=Strict") || resp.Header.Get("Location") != "/" {
		t.Fatalf("login: cookie %q location %q", ck, resp.Header.Get("Location"))
	}
	// A browser sends Origin with its form posts, "null" under
	// Referrer-Policy no-referrer, which the same-origin check refuses:
	// the console's policy keeps the origin for its own requests.
	if rp := resp.Header.Get("Referrer-Policy"); rp != "same-origin" {
		t.Errorf("Referrer-Policy %q", rp)
	}
	req, _ := http.NewRequest("POST", w.srv.URL+"/login", strings.NewReader(url.Values{"token": {stewardTok}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "null")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("login with Origin: null: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	csrf := w.login(cl, stewardTok)
	post := func(path string, form url.Values, origin string) int {
		req, _ := http.NewRequest("POST", w.srv.URL+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("/jobs/waiting/halt", url.Values{"reason": {"no csrf"}}, ""); code != http.StatusForbidden {
		t.Errorf("post without CSRF: %d", code)
	}
	if code := post("/jobs/waiting/halt", url.Values{"csrf": {"forged"}}, ""); code != http.StatusForbidden {
		t.Errorf("post with a wrong CSRF: %d", code)
	}
	if code := post("/jobs/waiting/halt", url.Values{"csrf": {csrf}}, "http://evil.example"); code != http.StatusForbidden {
		t.Errorf("cross-origin post: %d", code)
	}
	if st := w.k.Load("waiting").Status; st != "PENDING" {
		t.Fatalf("a refused post changed the job: %s", st)
	}
	if code := post("/jobs/waiting/halt", url.Values{"csrf": {csrf}, "reason": {"by form"}}, w.srv.URL); code != http.StatusSeeOther {
		t.Errorf("steward's form post: %d", code)
	}
	if st := w.k.Load("waiting").Status; st != "CANCELED" {
		t.Errorf("waiting is %s", st)
	}

	// A viewer: no action forms, and its forged post is refused.
	vc := w.browser()
	vcsrf := w.login(vc, viewerTok)
	code, page := get(t, vc, w.srv.URL+"/jobs/stuck")
	if code != 200 || strings.Contains(page, "<form method=\"post\" action=\"/jobs/") || !strings.Contains(page, "INTERVENTION_REQUIRED") {
		t.Errorf("viewer's job page: %d, action forms shown: %v", code, strings.Contains(page, "/resume"))
	}
	req, _ = http.NewRequest("POST", w.srv.URL+"/jobs/stuck/resume", strings.NewReader(url.Values{"csrf": {vcsrf}, "guidance": {"forged"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = vc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || w.k.Load("stuck").Status != "INTERVENTION_REQUIRED" {
		t.Errorf("viewer's forged post: %d, stuck %s", resp.StatusCode, w.k.Load("stuck").Status)
	}

	// Logging out ends the session.
	if code := post("/logout", url.Values{"csrf": {csrf}}, ""); code != http.StatusSeeOther {
		t.Errorf("logout: %d", code)
	}
	if code, _ := get(t, cl, w.srv.URL+"/api/v1/jobs"); code != http.StatusUnauthorized {
		t.Errorf("after logout: %d", code)
	}
}

// TestPagesEscapeAgentText: agent text holding markup and terminal
// escapes renders as text on every page that shows it.
func TestPagesEscapeAgentText(t *testing.T) {
	w := newWorld(t)
	cl := w.browser()
	w.login(cl, stewardTok)
	for _, p := range []string{"/jobs/stuck", "/needs", "/", "/?status=NEEDS_YOU"} {
		code, page := get(t, cl, w.srv.URL+p)
		if code != 200 {
			t.Fatalf("%s: %d", p, code)
		}
		if strings.Contains(page, "<script>alert") || strings.ContainsRune(page, 0x1b) || strings.ContainsRune(page, 0x07) {
			t.Errorf("%s renders agent text raw", p)
		}
		if p != "/" && !strings.Contains(page, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") {
			t.Errorf("%s does not show the agent's text as text", p)
		}
	}
	_, page := get(t, cl, w.srv.URL+"/jobs/stuck")
	for _, want := range []string{`id="form-resume"`, `id="form-halt"`, `id="form-rollback"`, "Timeline", "Cost and time per phase"} {
		if !strings.Contains(page, want) {
			t.Errorf("steward's job page lacks %s", want)
		}
	}
	_, page = get(t, cl, w.srv.URL+"/needs")
	if !strings.Contains(page, `data-job="stuck"`) || strings.Contains(page, `data-job="done"`) {
		t.Errorf("needs-you queue wrong")
	}
	if _, page := get(t, cl, w.srv.URL+"/jobs/done"); !strings.Contains(page, `id="verify" class="ok">intact`) {
		t.Error("the job page does not say the history is intact")
	}
	for _, p := range []string{"/schedules", "/jobs/done", "/static/console.js", "/login"} {
		if code, _ := get(t, cl, w.srv.URL+p); code != 200 {
			t.Errorf("%s: %d", p, code)
		}
	}
	if code, page := get(t, cl, w.srv.URL+"/jobs/nope"); code != 404 || !strings.Contains(page, "not_found") {
		t.Errorf("missing job page: %d", code)
	}
}

// Why the last recovery point has no snapshot or no commit on the job
// branch (logist status's "Snapshot" and "Job branch") is on the job's
// page too, as text: a refused repository's reason names what the agent
// wrote in it.
func TestJobPageSaysWhyThePointHasNoCommit(t *testing.T) {
	w := newWorld(t)
	w.k.WriteJob("branchless", map[string]any{"run": map[string]any{
		"git_error":      "git workspace /j/workspace: .git/config sets filter." + hostile + ".clean",
		"snapshot_error": "over the cap: " + hostile,
	}})
	cl := w.browser()
	w.login(cl, viewerTok)
	code, page := get(t, cl, w.srv.URL+"/jobs/branchless")
	if code != 200 {
		t.Fatalf("job page: %d", code)
	}
	for _, want := range []string{
		`<dt>Job branch</dt><dd class="agent" id="git-error">no commit at the last recovery point: git workspace /j/workspace: .git/config sets filter.&lt;script&gt;`,
		`<dt>Snapshot</dt><dd class="agent" id="snapshot-error">none at the last recovery point: over the cap: &lt;script&gt;`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the job page lacks %q", want)
		}
	}
	if strings.Contains(page, "<script>alert") || strings.ContainsRune(page, 0x1b) || strings.ContainsRune(page, 0x07) {
		t.Error("the reason is rendered raw")
	}
}

func TestLoadTokens(t *testing.T) {
	dir := t.TempDir()
	tok, path, err := LoadTokens(dir, "", "")
	if err != nil || path != filepath.Join(dir, signing.Dir, TokenFile) || len(tok.Steward) != 64 || tok.Viewer != "" {
		t.Fatalf("generated: %+v %q %v", tok, path, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode %v %v", fi.Mode(), err)
	}
	again, _, err := LoadTokens(dir, "", "")
	if err != nil || again.Steward != tok.Steward {
		t.Errorf("a restart made a new token")
	}
	sf, vf := filepath.Join(dir, "s"), filepath.Join(dir, "v")
	_ = os.WriteFile(sf, []byte(stewardTok+"\n"), 0o600)
	_ = os.WriteFile(vf, []byte(viewerTok), 0o600)
	got, gen, err := LoadTokens(dir, sf, vf)
	if err != nil || gen != "" || got.Steward != stewardTok || got.Viewer != viewerTok {
		t.Errorf("files: %+v %q %v", got, gen, err)
	}
	_ = os.WriteFile(vf, []byte("short"), 0o600)
	if _, _, err := LoadTokens(dir, "", vf); err == nil {
		t.Error("a short token was taken")
	}
	_ = os.WriteFile(vf, []byte(stewardTok), 0o600)
	if _, _, err := LoadTokens(dir, sf, vf); err == nil {
		t.Error("equal steward and viewer tokens were taken")
	}
	if _, _, err := LoadTokens(dir, filepath.Join(dir, "none"), ""); err == nil {
		t.Error("a missing token file was taken")
	}
}

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		addr          string
		tls, insecure bool
		ok            bool
	}{
		{"127.0.0.1:9464", false, false, true},
		{"[::1]:9464", false, false, true},
		{"localhost:9464", false, false, true},
		{":9464", false, false, false},
		{"0.0.0.0:9464", false, false, false},
		{"10.1.2.3:9464", false, false, false},
		{"10.1.2.3:9464", true, false, true},
		{"0.0.0.0:9464", false, true, true},
		{"nonsense", false, false, false},
	} {
		if err := CheckListen(c.addr, c.tls, c.insecure); (err == nil) != c.ok {
			t.Errorf("CheckListen(%q, tls %v, insecure %v) = %v", c.addr, c.tls, c.insecure, err)
		}
	}
}

// TestJobPageTimeline: the job page shows the end of the history (older
// records are paged through the API, and the page says so), and a
// history that cannot be read is reported with its reason, not shown as
// an empty timeline.
func TestJobPageTimeline(t *testing.T) {
	w := newWorld(t)
	cl := w.browser()
	w.login(cl, stewardTok)
	_, page := get(t, cl, w.srv.URL+"/jobs/done")
	if strings.Contains(page, "older records are in") || !strings.Contains(page, "wrote a.txt") {
		t.Errorf("a short history is not shown whole:\n%s", page)
	}
	defer func(n int) { timelineCalls = n }(timelineCalls)
	timelineCalls = 1
	_, page = get(t, cl, w.srv.URL+"/jobs/done")
	if !strings.Contains(page, "older records are in") || strings.Contains(page, `data-seq="0"`) || !strings.Contains(page, "fine") {
		t.Errorf("the page does not show only the last interaction and say where the rest is:\n%s", page)
	}
	timelineCalls = 50
	hf := history.Path(w.k.Env.Store.JobDir("done"))
	if err := os.Remove(hf); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(hf, 0o600); err != nil {
		t.Fatal(err)
	}
	code, page := get(t, cl, w.srv.URL+"/jobs/done")
	if code == 200 || !strings.Contains(page, "not a regular file") {
		t.Errorf("an unreadable history is not reported (%d):\n%s", code, page)
	}
}

// TestSealedJobShownOpened: an encrypt_history job's summary and answers
// are sealed on disk; the console opens them with the content key, as
// logist status and history do, and shows them sealed without it.
func TestSealedJobShownOpened(t *testing.T) {
	w := newWorld(t)
	w.k.WriteJob("sealed", map[string]any{"encrypt_history": true, "agents": map[string]any{
		"worker":     testkit.Script(testkit.Step("COMPLETED", "SEALEDMARKER drafted")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "SEALEDMARKER approved")),
	}})
	w.k.Run("sealed")
	if b, _ := os.ReadFile(history.Path(w.k.Env.Store.JobDir("sealed"))); len(b) == 0 || strings.Contains(string(b), "SEALEDMARKER") {
		t.Fatal("the test's job is not sealed on disk")
	}
	for _, key := range []string{"", secrets.KeyPath(w.k.Dir, signing.Dir, nil)} {
		c := New(Options{Store: w.k.Env.Store, Logger: testkit.Logger(), Tokens: Tokens{Steward: stewardTok, Viewer: viewerTok},
			Poll: 20 * time.Millisecond, ContentKey: key})
		srv := httptest.NewServer(c)
		cl := (&world{t: t, k: w.k, c: c, srv: srv}).browser()
		(&world{t: t, k: w.k, c: c, srv: srv}).login(cl, stewardTok)
		_, page := get(t, cl, srv.URL+"/jobs/sealed")
		_, hist := get(t, cl, srv.URL+"/api/v1/jobs/sealed/history")
		srv.Close()
		opened := strings.Contains(page, "SEALEDMARKER approved") && strings.Contains(hist, "SEALEDMARKER drafted")
		if key != "" && !opened {
			t.Errorf("with the content key the page and the history API do not show the opened text:\n%s\n%s", page, hist)
		}
		if key == "" && (strings.Contains(page, "SEALEDMARKER") || strings.Contains(hist, "SEALEDMARKER")) {
			t.Error("without the content key the console shows sealed text opened")
		}
	}
}

// TestErrorPagesAreNotStored: a page answering an error (a missing job's
// 404, a login's 401) has the headers every page has: no-store (it
// carries the session's CSRF token), and its type said, not sniffed.
// They were set after the status was written, which drops them.
func TestErrorPagesAreNotStored(t *testing.T) {
	w := newWorld(t)
	cl := w.browser()
	w.login(cl, stewardTok)
	check := func(what string, resp *http.Response, status int) {
		t.Helper()
		resp.Body.Close()
		if resp.StatusCode != status || resp.Header.Get("Cache-Control") != "no-store" || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("%s: %d Cache-Control %q Content-Type %q, want %d no-store text/html; charset=utf-8", what, resp.StatusCode, resp.Header.Get("Cache-Control"), resp.Header.Get("Content-Type"), status)
		}
	}
	req, _ := http.NewRequest("GET", w.srv.URL+"/jobs/nope", nil)
	req.Header.Set("Accept", "text/html")
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	check("missing job page", resp, http.StatusNotFound)
	resp, err = w.browser().PostForm(w.srv.URL+"/login", url.Values{"token": {"nope-nope-nope-nope"}})
	if err != nil {
		t.Fatal(err)
	}
	check("login with a wrong token", resp, http.StatusUnauthorized)
}

// TestVerifyOpensSealedAnswers: the verify API re-validates an
// encrypt_history job's answers when the console has the content key, as
// logist verify does (it replayed them sealed, unchecked, whatever the
// key); without the key it says how many it could not.
func TestVerifyOpensSealedAnswers(t *testing.T) {
	w := newWorld(t)
	w.k.WriteJob("sealed", map[string]any{"encrypt_history": true, "agents": map[string]any{
		"worker":     testkit.Script(testkit.Step("COMPLETED", "drafted")),
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "approved")),
	}})
	w.k.Run("sealed")
	for _, key := range []string{"", secrets.KeyPath(w.k.Dir, signing.Dir, nil)} {
		c := New(Options{Store: w.k.Env.Store, Logger: testkit.Logger(), Tokens: Tokens{Steward: stewardTok, Viewer: viewerTok}, ContentKey: key})
		srv := httptest.NewServer(c)
		code, body := (&world{t: t, k: w.k, c: c, srv: srv}).call("GET", "/api/v1/jobs/sealed/verify", viewerTok, nil)
		srv.Close()
		msg, _ := body["message"].(string)
		items, _ := body["items"].([]any)
		rep, _ := items[0].(map[string]any)
		if code != 200 || body["intact"] != true {
			t.Fatalf("key %q: %d %v", key, code, body)
		}
		if sealed := strings.Contains(msg, "encrypted answers not re-validated"); sealed != (key == "") {
			t.Errorf("key %q: message %q, report %v", key, msg, rep)
		}
	}
}

// A cost budget past the largest Logist counts shows as no limit on the
// job's page and in the list, not as its three hundred digits.
func TestPagesShowABudgetPastTheLargestAsNoLimit(t *testing.T) {
	w := newWorld(t)
	w.k.WriteJob("huge", map[string]any{"cost_threshold": 1e300})
	cl := w.browser()
	w.login(cl, viewerTok)
	for _, c := range []struct{ path, want string }{
		{"/jobs/huge", "$0.00 of no limit</dd>"},
		{"/", "of no limit</td>"},
	} {
		code, page := get(t, cl, w.srv.URL+c.path)
		if code != 200 || !strings.Contains(page, c.want) || strings.Contains(page, "0000000000") {
			t.Errorf("%s (%d) lacks %q or shows the digits", c.path, code, c.want)
		}
	}
}
