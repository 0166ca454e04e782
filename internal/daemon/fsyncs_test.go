package daemon

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// daemonFsyncBudget is what a two-call job placed as a bare manifest costs
// the daemon in fsyncs, from the manifest's arrival to the job's end, as
// its /metrics count them: three history appends (the job's start with the
// first call's intent, the first call's outcome with the second's intent,
// the second's outcome with the job's end) and two folder fsyncs (the
// job's folder, for its manifest, history and workspace, and the jobs
// folder, for the job's folder; the bare name is unlinked after them),
// which start once the new folder is complete and which the first append
// waits for.
// Issue 21 asks for 4; a lone job cannot reach it while the history and
// the placement each need their own fsync (docs/performance.md, "fsyncs of
// a two-call job"): whoever cuts one lowers the figure here, so that it
// cannot come back unnoticed.
var daemonFsyncBudget = struct{ history, file, folder, total float64 }{history: 3, file: 0, folder: 2, total: 5}

// TestTwoCallJobFsyncsThroughTheDaemon counts, on the daemon's /metrics,
// the fsyncs of a two-call job dropped as a bare manifest into the jobs
// folder (placement included, which the engine-level TestTwoCallJobFsyncs
// does not see).
func TestTwoCallJobFsyncsThroughTheDaemon(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 2, Listen: addr, Grace: time.Second}, discard())
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	url := "http://" + addr + "/metrics"
	waitFor(t, "readyz", func() bool { code, _ := get(t, "http://"+addr+"/readyz"); return code == 200 })
	waitFor(t, "the start-up scan's end", func() bool {
		_, body := get(t, url)
		return metricIs(body, "logistd_startup_scan_complete", 1)
	})
	_, before := get(t, url)
	tmp := filepath.Join(dir, ".two.tmp")
	if err := os.WriteFile(tmp, []byte(quick), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "two.json")); err != nil {
		t.Fatal(err)
	}
	calls := func(body string) float64 {
		w, _ := sample(body, `logistd_agent_calls_total{outcome="ok",provider="script",role="worker"}`)
		s, _ := sample(body, `logistd_agent_calls_total{outcome="ok",provider="script",role="supervisor"}`)
		return w + s
	}
	var after string
	deadline := time.Now().Add(2 * time.Minute) // a loaded machine: wait on the condition, generously
	for {
		// The manifest file is replaced after the last unit's fsync (the
		// finished counter moves at the transition, before it); the calls
		// are counted just after their unit's commit (AfterCommit).
		if m, err := manifest.ReadFile(filepath.Join(dir, "two", "job.json")); err == nil && m.Status == lifecycle.Success {
			_, after = get(t, url)
			if calls(after) == 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the two-call job did not finish with its 2 agent calls counted (%v counted)", calls(after))
		}
		time.Sleep(20 * time.Millisecond)
	}
	delta := func(name string) float64 { return metric(t, after, name) - metric(t, before, name) }
	got := struct{ history, file, folder, total float64 }{history: delta("logistd_history_fsync_duration_seconds_count"),
		file: delta(`logistd_fsyncs_total{kind="file"}`), folder: delta(`logistd_fsyncs_total{kind="folder"}`)}
	got.total = got.history + got.file + got.folder
	t.Logf("two-call job through the daemon: %v fsyncs (%v history, %v file, %v folder); budget %+v",
		got.total, got.history, got.file, got.folder, daemonFsyncBudget)
	b := daemonFsyncBudget
	if got.history > b.history || got.file > b.file || got.folder > b.folder || got.total > b.total {
		t.Fatalf("two-call job: %+v fsyncs, over the budget %+v", got, b)
	}
}

// metric is the value of the sample name (with its labels) in a /metrics body.
func metric(t *testing.T, body, name string) float64 {
	t.Helper()
	v, ok := sample(body, name)
	if !ok {
		t.Fatalf("/metrics lacks %s", name)
	}
	return v
}

// metricIs says whether the sample name has the value want.
func metricIs(body, name string, want float64) bool {
	v, ok := sample(body, name)
	return ok && v == want
}

func sample(body, name string) (float64, bool) {
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	return v, err == nil
}
