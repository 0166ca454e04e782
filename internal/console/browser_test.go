package console_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/logist/logist/internal/daemon"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/testkit"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the browser test's job page screenshot to docs/console.png")

const (
	browserSteward = "browser-steward-token-0123456789"
	browserViewer  = "browser-viewer-token-0123456789"
	// hostileSummary must render as text: markup that would run script,
	// and terminal escapes.
	hostileSummary = "<script>window.__xss=1</script><img src=x onerror=\"window.__xss=2\">\x1b[31mred\x1b]0;title\x07 I need a human."
)

// TestBrowser drives the console in headless Chromium against a real
// logistd: log in, see the jobs and search them, open a stuck job whose
// summary is hostile (it stays text), resume it with guidance through the
// form and watch it finish live, halt a running job, roll back a finished
// one, and as a viewer see no action and have a forged post refused.
// make test installs chromium (scripts/chromium.sh); under CI=true a
// missing chromium fails the test.
func TestBrowser(t *testing.T) {
	exe, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is missing under CI=true: scripts/chromium.sh installs it")
		}
		t.Skip("SKIP (loud): chromium is missing, the console's browser test did not run (sh scripts/chromium.sh)")
	}
	dir := t.TempDir()
	script := func(steps ...map[string]any) map[string]any {
		return map[string]any{"provider": "script", "script": steps}
	}
	step := func(action, summary string, delayMS int, files ...string) map[string]any {
		s := map[string]any{"action": action, "summary": summary, "delay_ms": delayMS, "cost_usd": 0.02}
		if len(files) > 0 {
			s["evidence_files"] = files
			fm := map[string]string{}
			for _, f := range files {
				fm[f] = "content of " + f + "\n"
			}
			s["files"] = fm
		}
		return s
	}
	testkit.WriteJob(t, dir, "stuck", map[string]any{"description": "Migrate the user table", "cost_threshold": 100, "agents": map[string]any{
		"worker":     script(step("STUCK", hostileSummary, 0), step("COMPLETED", "Migration written, keeping legacy_email.", 1500, "migrate.sql")),
		"supervisor": script(step("COMPLETED", "Migration is safe.", 1000, "migrate.sql")),
	}})
	testkit.WriteJob(t, dir, "busy", map[string]any{"description": "A long refactor", "agents": map[string]any{
		"worker":     script(step("COMPLETED", "never seen", 300000)),
		"supervisor": script(step("COMPLETED", "ok", 0)),
	}})
	testkit.WriteJob(t, dir, "finished", map[string]any{"description": "Add a README", "agents": map[string]any{
		"worker":     script(step("COMPLETED", "README written", 0, "README.md")),
		"supervisor": script(step("COMPLETED", "Good README", 0, "README.md")),
	}})
	testkit.WriteJob(t, dir, "other", map[string]any{"description": "Another stuck job", "agents": map[string]any{
		"worker":     script(step("STUCK", "Which database?", 0)),
		"supervisor": script(step("COMPLETED", "ok", 0)),
	}})
	sf, vf := filepath.Join(t.TempDir(), "steward"), filepath.Join(t.TempDir(), "viewer")
	if err := os.WriteFile(sf, []byte(browserSteward), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vf, []byte(browserViewer), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	dctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(dctx, daemon.Options{JobsDir: dir, MaxParallel: 4, Listen: addr, Grace: time.Second,
			Console: daemon.ConsoleOptions{TokenFile: sf, ViewerTokenFile: vf}}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	store := jobstore.New(dir)
	status := func(id string) string {
		m, err := store.Load(id)
		if err != nil {
			return err.Error()
		}
		return string(m.Status)
	}
	for id, want := range map[string]string{"stuck": "INTERVENTION_REQUIRED", "busy": "RUNNING", "finished": "SUCCESS", "other": "INTERVENTION_REQUIRED"} {
		testkit.WaitFor(t, id+" "+want, 60*time.Second, func() bool { return status(id) == want })
	}

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 3*time.Minute)
	defer cancel()
	base := "http://" + addr
	shots := os.Getenv("LOGIST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			buf, err := chromedp.CaptureScreenshot()(ctx, tg)
			if err != nil {
				return err
			}
			t.Logf("screenshot %s", filepath.Join(shots, name))
			return os.WriteFile(filepath.Join(shots, name), buf, 0o600)
		})
	}
	must := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		t.Logf("step %s", what)
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	waitJS := func(js string) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := chromedp.Poll[bool](js, chromedp.WithPollingTimeout(60*time.Second), chromedp.WithPollingInterval(100*time.Millisecond))(ctx, tg)
			return err
		})
	}
	evalInt := func(js string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return n
	}
	text := func(id string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID(id)))
		if err != nil {
			t.Fatalf("text of #%s: %v", id, err)
		}
		return s
	}

	// Log in; see the jobs; the search filters as one types.
	must("open", chromedp.Navigate(base+"/"))
	must("login page", chromedp.WaitVisible(chromedp.ID("token")))
	must("type token", chromedp.SendKeys(chromedp.ID("token"), browserSteward))
	must("click", chromedp.Click(chromedp.ID("login")))
	must("jobs page", chromedp.WaitVisible(chromedp.ID("jobs")))
	if rows := evalInt(`document.querySelectorAll("#jobs tbody tr").length`); rows != 4 {
		t.Errorf("jobs list shows %d jobs, want 4", rows)
	}
	must("search", chromedp.SendKeys(chromedp.ID("text"), "refactor"),
		waitJS(`document.querySelectorAll("#jobs tbody tr").length === 1 && document.querySelector("#jobs tbody tr").dataset.job === "busy"`),
		shot("jobs.png"))

	// The stuck job: its hostile summary is text.
	must("open stuck", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`a[href="/jobs/stuck"]`)),
		chromedp.Click(chromedp.CSS(`a[href="/jobs/stuck"]`)), chromedp.WaitVisible(chromedp.ID("form-resume")), shot("console.png"))
	xss := evalInt(`window.__xss === undefined ? 0 : window.__xss`)
	summary := text("summary")
	if xss != 0 || !strings.Contains(summary, "<script>window.__xss=1</script>") || strings.ContainsAny(summary, "\x1b\x07") {
		t.Errorf("hostile summary: script ran (%d), shown as %q", xss, summary)
	}
	if *updateScreenshot {
		b, err := os.ReadFile(filepath.Join(shots, "console.png"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "console.png"), b, 0o644); err != nil { //nolint:gosec // a picture for the README
			t.Fatal(err)
		}
	}

	// Resume with guidance through the form, and watch it finish live.
	must("resume", chromedp.SendKeys(chromedp.ID("resume-guidance"), "Keep legacy_email; add the new column beside it."),
		chromedp.Click(chromedp.ID("do-resume")), chromedp.WaitVisible(chromedp.ID("done")))
	if before := text("status"); before == "SUCCESS" {
		t.Error("the job finished before its page loaded: nothing was watched live")
	}
	must("finish live", waitJS(`document.getElementById("status").textContent === "SUCCESS"`),
		waitJS(`Array.from(document.querySelectorAll("#timeline li")).some(li => li.textContent.includes("Migration is safe."))`),
		shot("finished-live.png"))
	if st := status("stuck"); st != "SUCCESS" {
		t.Errorf("stuck is %s", st)
	}

	// Halt the running job.
	must("halt", chromedp.Navigate(base+"/jobs/busy"), chromedp.WaitVisible(chromedp.ID("form-halt")),
		chromedp.SendKeys(chromedp.ID("halt-reason"), "wrong approach"), chromedp.Click(chromedp.ID("do-halt")),
		chromedp.WaitVisible(chromedp.ID("done")), waitJS(`document.getElementById("status").textContent === "CANCELED"`))
	if st := status("busy"); st != "CANCELED" {
		t.Errorf("busy is %s", st)
	}

	// Roll back the finished job to the checkpoint the picker offers first.
	must("open finished", chromedp.Navigate(base+"/jobs/finished"), chromedp.WaitVisible(chromedp.ID("form-rollback")))
	cp, err := chromedp.Run(ctx, chromedp.Value(chromedp.ID("rollback-cp")))
	if err != nil || cp == "" {
		t.Fatalf("checkpoint picker: %q %v", cp, err)
	}
	must("rollback", chromedp.SendKeys(chromedp.ID("rollback-reason"), "start over"), chromedp.Click(chromedp.ID("do-rollback")),
		chromedp.WaitVisible(chromedp.ID("done")),
		waitJS(`Array.from(document.querySelectorAll("#timeline li")).some(li => li.textContent.includes("Steward: rollback"))`))
	recs := testkit.Records(t, filepath.Join(dir, "finished"))
	rolled := false
	for _, r := range recs {
		if r.Steward != nil && r.Steward.Command == "rollback" && r.Steward.Reason == "start over" && r.Steward.Changes["checkpoint_id"] == cp {
			rolled = true
		}
	}
	if !rolled {
		t.Errorf("no rollback to %s in finished's history", cp)
	}

	// A phone's width: the job page still works.
	must("phone", chromedp.EmulateViewport(390, 844), chromedp.Navigate(base+"/jobs/other"),
		chromedp.WaitVisible(chromedp.ID("form-resume")), shot("phone.png"), chromedp.EmulateViewport(1280, 900))

	// A viewer: no action buttons; a forged post is refused.
	must("viewer", chromedp.Click(chromedp.CSS(`nav form button`)), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), browserViewer), chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("jobs")), chromedp.Navigate(base+"/jobs/other"), chromedp.WaitVisible(chromedp.ID("timeline")))
	if n, role := evalInt(`document.querySelectorAll('form[method="post"][action^="/jobs/"], #do-halt, #do-resume').length`), text("role"); n != 0 || role != "viewer" {
		t.Errorf("viewer (role %q) sees %d action forms", role, n)
	}
	forged, err := chromedp.Run(ctx, chromedp.Evaluate[[]int](`Promise.all([
		fetch("/api/v1/jobs/other/halt", {method: "POST", headers: {"Content-Type": "application/json", "X-CSRF-Token": document.body.dataset.csrf}, body: "{}"}).then(r => r.status),
		fetch("/api/v1/jobs/other/halt", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "reason=forged"}).then(r => r.status),
		fetch("/jobs/other/halt", {method: "POST", headers: {"Content-Type": "application/x-www-form-urlencoded"}, body: "reason=forged&csrf=" + document.body.dataset.csrf}).then(r => r.status),
	])`, chromedp.EvalAwaitPromise))
	if err != nil || fmt.Sprint(forged) != "[403 403 403]" {
		t.Errorf("viewer's forged posts answered %v (%v), want 403s", forged, err)
	}
	if st := status("other"); st != "INTERVENTION_REQUIRED" {
		t.Errorf("other is %s after the viewer's forged posts", st)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
