package console_test

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/console"
	"github.com/logist/logist/internal/daemon"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/testkit"
)

// TestBrowserPlay: a person plays a negotiation party (provider human)
// in headless Chromium against a real logistd: from the job page to the
// party's play page, which offers the moves open now; it sends its
// message through the form, the game goes on, it ends its private
// conversation early, and in the debate that control is gone.
func TestBrowserPlay(t *testing.T) {
	exe, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is missing under CI=true: scripts/chromium.sh installs it")
		}
		t.Skip("SKIP (loud): chromium is missing, the console's browser test did not run (sh scripts/chromium.sh)")
	}
	dir := t.TempDir()
	console.WriteHumanMercury(t, dir, "mercury")
	sf := filepath.Join(t.TempDir(), "steward")
	if err := os.WriteFile(sf, []byte(browserSteward), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	dctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(dctx, daemon.Options{JobsDir: dir, MaxParallel: 2, Listen: addr, Grace: time.Second,
			Console: daemon.ConsoleOptions{TokenFile: sf}}, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	store := jobstore.New(dir)
	// moved is how many of Estoria's turns have an outcome (an answer, or
	// closed by its move).
	moved := func() int {
		n := 0
		for _, r := range testkit.Records(t, filepath.Join(dir, "mercury")) {
			if r.Type == history.TypeResponse && r.Role == "estoria" {
				n++
			}
		}
		return n
	}
	// awaiting waits for Estoria's next turn after n moves.
	awaiting := func(n int) {
		t.Helper()
		testkit.WaitFor(t, "estoria's turn", 90*time.Second, func() bool {
			m, err := store.Load("mercury")
			return err == nil && m.Run.ErrorCode == codes.AwaitingReply && moved() == n
		})
	}
	awaiting(0)

	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-dev-shm-usage", true))...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 4*time.Minute)
	defer cancel()
	base := "http://" + addr
	must := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		t.Logf("step %s", what)
		if err := chromedp.Do(ctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	forms := func() string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`Array.from(document.querySelectorAll("#turn form")).map(f => f.id).join(" ")`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	must("login", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), browserSteward), chromedp.Click(chromedp.ID("login")), chromedp.WaitVisible(chromedp.ID("jobs")))
	// From the job page to Estoria's play page.
	must("job page", chromedp.Navigate(base+"/jobs/mercury"), chromedp.WaitVisible(chromedp.ID("form-play")),
		chromedp.SendKeys(chromedp.ID("play-as"), "estoria"), chromedp.Click(chromedp.ID("do-play")),
		chromedp.WaitVisible(chromedp.ID("form-answer")))
	if got := forms(); got != "form-answer form-skip form-end_conversation" {
		t.Errorf("moves in the conversation: %q", got)
	}
	seen, err := chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("seen")))
	if err != nil || !strings.Contains(seen, "Estoria and Mercury-Free Rivers Coalition") || strings.Contains(seen, "Federation, Caldera will not let a ban") {
		t.Errorf("what Estoria sees (%v):\n%s", err, seen)
	}

	// Its message, through the form.
	must("message", chromedp.SendKeys(chromedp.ID("play-text"), "Coalition, Estoria asks for your voice in the debate. BROWSER-MOVE-1"),
		chromedp.Click(chromedp.ID("do-answer")), chromedp.WaitVisible(chromedp.ID("done")))
	awaiting(1) // its final word
	must("final turn", chromedp.Navigate(base+"/jobs/mercury/play?as=estoria"), chromedp.WaitVisible(chromedp.ID("form-end_conversation")))
	seen, _ = chromedp.Run(ctx, chromedp.TextContent(chromedp.ID("seen")))
	if !strings.Contains(seen, "BROWSER-MOVE-1") {
		t.Errorf("Estoria's message is not in its view:\n%s", seen)
	}

	// It ends the conversation early instead.
	must("end the conversation", chromedp.Click(chromedp.ID("do-end_conversation")), chromedp.WaitVisible(chromedp.ID("done")))
	awaiting(2) // its speech in the debate
	must("debate", chromedp.Navigate(base+"/jobs/mercury/play?as=estoria"), chromedp.WaitVisible(chromedp.ID("form-answer")))
	if got := forms(); got != "form-answer form-skip" {
		t.Errorf("moves in the debate: %q", got)
	}
	ledger, err := os.ReadFile(filepath.Join(dir, "mercury", "negotiation", "ledger.json"))
	if err != nil || !strings.Contains(string(ledger), `"ended_by": "estoria"`) || !strings.Contains(string(ledger), "BROWSER-MOVE-1") {
		t.Errorf("the ledger (%v) lacks Estoria's message or early end", err)
	}
	var moves []string
	for _, r := range testkit.Records(t, filepath.Join(dir, "mercury")) {
		if r.Type == history.TypeSteward && r.Steward.Changes["participant"] == "estoria" {
			moves = append(moves, r.Steward.Command+" by "+r.Steward.User)
		}
	}
	if strings.Join(moves, ", ") != "reply by console, decide by console" {
		t.Errorf("move records: %v", moves)
	}
}
