package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/logist/logist/internal/cli"
	"github.com/logist/logist/internal/daemon"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
)

// observed is a logistd running in this process with its JSON log kept.
type observed struct {
	jobs, listen string
	log          *syncBuffer
	stop         func()
}

// startDaemon serves jobs until stop (a clean stop: SIGTERM's way).
func startDaemon(t *testing.T, jobs, listen string) *observed {
	t.Helper()
	o := &observed{jobs: jobs, listen: listen, log: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{JobsDir: jobs, MaxParallel: 4, Listen: listen, Grace: 2 * time.Second},
			slog.New(slog.NewJSONHandler(o.log, nil)))
	}()
	stopped := false
	o.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("logistd: %v", err)
		}
	}
	t.Cleanup(o.stop)
	if listen != "" {
		deadline := time.Now().Add(10 * time.Second)
		for {
			if resp, err := http.Get("http://" + listen + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("logistd not ready after 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return o
}

// logist runs the CLI in this process (another writer than the daemon, as
// a logist process would be).
func logist(t *testing.T, jobs string, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Main(context.Background(), append([]string{"logist"}, append(args, "--jobs-dir", jobs)...),
		func(string) string { return "" }, strings.NewReader(""), &out, &errOut)
	return code, out.String() + errOut.String()
}

func mustLogist(t *testing.T, jobs string, args ...string) string {
	t.Helper()
	code, out := logist(t, jobs, args...)
	if code != 0 {
		t.Fatalf("logist %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

func writeJob(t *testing.T, jobs, id, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(jobs, id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jobs, id, jobstore.ManifestFile), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func scripted(worker, supervisor string) string {
	return `{"task_description": "t", "agents": {
	  "worker": {"provider": "script", "script": [` + worker + `]},
	  "supervisor": {"provider": "script", "script": [` + supervisor + `]}}}`
}

const (
	stepDone  = `{"action": "COMPLETED", "summary": "done"}`
	stepStuck = `{"action": "STUCK", "summary": "need a human"}`
)

func waitJob(t *testing.T, jobs, id string, want lifecycle.Status) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		m, err := manifest.ReadFile(filepath.Join(jobs, id, jobstore.ManifestFile))
		if err == nil && m.Status == want && (want != lifecycle.InterventionRequired || m.Run.Reason != "") {
			return
		}
		if err == nil {
			last = string(m.Status)
		} else {
			last = err.Error()
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("job %s: %s after 30s, want %s", id, last, want)
}

// lines are the log's lines of type typ about job id that match want.
func (o *observed) lines(id, typ string, want map[string]any) []map[string]any {
	var out []map[string]any
next:
	for _, l := range o.log.lines() {
		if l["job_id"] != id || l["type"] != typ {
			continue
		}
		for k, v := range want {
			if l[k] != v {
				continue next
			}
		}
		out = append(out, l)
	}
	return out
}

// waitLines waits until the log has n lines matching, then makes sure no
// more come (a line logged twice would).
func (o *observed) waitLines(t *testing.T, n int, id, typ string, want map[string]any) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for len(o.lines(id, typ, want)) < n && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	got := o.lines(id, typ, want)
	if len(got) != n {
		t.Fatalf("job %s: %d %s lines matching %v, want %d; log:\n%s", id, len(got), typ, want, n, o.log.String())
	}
	return got
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Every transition a steward's command makes through the CLI reaches the
// daemon's log, once, with seed 004 §7.1's fields and actor STEWARD,
// although the CLI's own log goes nowhere; the daemon's own transitions
// are not logged twice.
func TestStewardTransitionsReachTheDaemonLog(t *testing.T) {
	jobs := filepath.Join(t.TempDir(), "jobs")
	writeJob(t, jobs, "resume-me", scripted(stepStuck+`, `+stepDone, stepDone))
	writeJob(t, jobs, "halt-me", scripted(stepStuck, stepDone))
	writeJob(t, jobs, "rollback-me", scripted(stepDone+`, `+stepDone, stepDone+`, `+stepDone))
	writeJob(t, jobs, "reply-me", `{"task_description": "t", "agents": {"worker": {"provider": "human"},
	  "supervisor": {"provider": "script", "script": [`+stepDone+`]}}}`)
	d := startDaemon(t, jobs, "")
	waitJob(t, jobs, "resume-me", lifecycle.InterventionRequired)
	waitJob(t, jobs, "halt-me", lifecycle.InterventionRequired)
	waitJob(t, jobs, "rollback-me", lifecycle.Success)
	waitJob(t, jobs, "reply-me", lifecycle.InterventionRequired)

	mustLogist(t, jobs, "resume", "resume-me", "--guidance", "go on")
	mustLogist(t, jobs, "halt", "halt-me", "--reason", "enough")
	mustLogist(t, jobs, "rollback", "rollback-me", "--to", "cp-start", "--reason", "again")
	mustLogist(t, jobs, "reply", "reply-me", "--as", "worker", "--answer", `{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "done by hand"}`)
	waitJob(t, jobs, "resume-me", lifecycle.Success)
	waitJob(t, jobs, "rollback-me", lifecycle.Success)
	waitJob(t, jobs, "reply-me", lifecycle.Success)

	for _, c := range []struct {
		id, event, from, to string
	}{
		{"resume-me", "steward_resume", "INTERVENTION_REQUIRED", "PENDING"},
		{"halt-me", "steward_halt", "INTERVENTION_REQUIRED", "CANCELED"},
		{"rollback-me", "steward_rollback", "SUCCESS", "PENDING"},
		{"reply-me", "steward_resume", "INTERVENTION_REQUIRED", "PENDING"},
	} {
		l := d.waitLines(t, 1, c.id, "transition", map[string]any{"event": c.event})[0]
		for k, v := range map[string]any{"from": c.from, "to": c.to, "actor": "STEWARD"} {
			if l[k] != v {
				t.Errorf("%s: %s = %v, want %v (%v)", c.id, k, l[k], v, l)
			}
		}
		for _, k := range []string{"checkpoint_id", "phase", "level", "msg", "time"} {
			if _, ok := l[k]; !ok {
				t.Errorf("%s: the transition line lacks %s: %v", c.id, k, l)
			}
		}
		// The daemon's own transitions, logged once as they were made:
		// the first start, and the start after the command.
		if c.to == "PENDING" {
			d.waitLines(t, 2, c.id, "transition", map[string]any{"from": "PENDING", "actor": "SYSTEM"})
		}
	}
	if cp := d.lines("rollback-me", "transition", map[string]any{"event": "steward_rollback"})[0]["checkpoint_id"]; cp == "" {
		t.Errorf("the rollback's line names no checkpoint")
	}
	// Stopping (the last pass) logs nothing again.
	d.stop()
	for _, id := range []string{"resume-me", "halt-me", "rollback-me", "reply-me"} {
		if n := len(d.lines(id, "transition", map[string]any{"actor": "STEWARD"})); n != 1 {
			t.Errorf("%s: %d steward transition lines after the stop, want 1", id, n)
		}
	}
}

// A transition the lifecycle table refuses, attempted by another process
// as a steward's command would (the CLI's own log goes nowhere), is
// recorded in the job's history and so reaches the daemon's log; the
// command that attempted it fails saying so.
func TestIllegalStewardTransitionIsLogged(t *testing.T) {
	jobs := filepath.Join(t.TempDir(), "jobs")
	writeJob(t, jobs, "done", scripted(stepDone, stepDone))
	d := startDaemon(t, jobs, "")
	waitJob(t, jobs, "done", lifecycle.Success)

	key, err := signing.LoadOrCreate(jobs)
	if err != nil {
		t.Fatal(err)
	}
	cliEnv := &jobtx.Env{Store: jobstore.New(jobs), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		History: history.Options{Signer: key}}
	tx, err := jobtx.Begin(cliEnv, "done", nil)
	if err != nil {
		t.Fatal(err)
	}
	terr := tx.Transition(lifecycle.EvResume, lifecycle.Pending, "", "STEWARD", "forced")
	tx.Close()
	if terr == nil {
		t.Fatal("SUCCESS -(steward_resume)-> PENDING was allowed")
	}
	if code := cli.ExitCode(terr); code != cli.ExitOutOfOrder {
		t.Errorf("the CLI would exit %d for %v, want %d", code, terr, cli.ExitOutOfOrder)
	}
	if !strings.Contains(terr.Error(), "illegal transition SUCCESS -(steward_resume)-> PENDING") ||
		!strings.Contains(terr.Error(), "recorded in its history as ILLEGAL_TRANSITION") {
		t.Errorf("the CLI would say %q", terr)
	}
	l := d.waitLines(t, 1, "done", "error", map[string]any{"error_code": "ILLEGAL_TRANSITION"})[0]
	for k, v := range map[string]any{"actor": "STEWARD", "status": "SUCCESS", "level": "ERROR"} {
		if l[k] != v {
			t.Errorf("%s = %v, want %v (%v)", k, l[k], v, l)
		}
	}
	if !strings.Contains(fmt.Sprint(l["msg"]), "illegal transition") {
		t.Errorf("msg = %v", l["msg"])
	}
}

// A steward's command while no daemon runs reaches the log of the next
// daemon that starts after a clean stop, once; a further restart does not
// log it again.
func TestStewardTransitionsWhileNoDaemonRuns(t *testing.T) {
	jobs := filepath.Join(t.TempDir(), "jobs")
	writeJob(t, jobs, "halt-me", scripted(stepStuck, stepDone))
	first := startDaemon(t, jobs, "")
	waitJob(t, jobs, "halt-me", lifecycle.InterventionRequired)
	first.stop()

	mustLogist(t, jobs, "halt", "halt-me", "--reason", "while down")
	second := startDaemon(t, jobs, "")
	second.waitLines(t, 1, "halt-me", "transition", map[string]any{"event": "steward_halt", "actor": "STEWARD", "reason": "while down"})
	if n := len(second.lines("halt-me", "transition", map[string]any{"actor": "SYSTEM"})); n != 0 {
		t.Errorf("the daemon logged %d of the first daemon's transitions again", n)
	}
	second.stop()
	third := startDaemon(t, jobs, "")
	time.Sleep(500 * time.Millisecond)
	third.stop()
	if n := len(third.lines("halt-me", "transition", nil)); n != 0 {
		t.Errorf("a restart logged %d transitions again:\n%s", n, third.log.String())
	}
}

// The folder as logist list sees it, counted as logistd's gauges count it.
type folderCounts struct {
	Jobs      map[string]int // by status
	Invalid   int
	Schedules int
}

func (c folderCounts) String() string {
	keys := make([]string, 0, len(c.Jobs))
	for k, v := range c.Jobs {
		if v != 0 {
			keys = append(keys, fmt.Sprintf("%s=%d", k, v))
		}
	}
	sort.Strings(keys)
	return fmt.Sprintf("jobs{%s} invalid=%d schedules=%d", strings.Join(keys, " "), c.Invalid, c.Schedules)
}

func listCounts(t *testing.T, jobs string) folderCounts {
	t.Helper()
	var r struct {
		Items []struct {
			Status   string          `json:"status"`
			Schedule json.RawMessage `json:"schedule"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(mustLogist(t, jobs, "list", "--format", "json")), &r); err != nil {
		t.Fatal(err)
	}
	c := folderCounts{Jobs: map[string]int{}}
	for _, it := range r.Items {
		switch {
		case it.Status == "INVALID":
			c.Invalid++
		case len(it.Schedule) > 0 && string(it.Schedule) != "null":
			c.Schedules++
		default:
			c.Jobs[it.Status]++
		}
	}
	return c
}

// scrape reads /metrics: the folder gauges, and the counters asked for.
func scrape(t *testing.T, listen string) (folderCounts, map[string]float64) {
	t.Helper()
	resp, err := http.Get("http://" + listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	c := folderCounts{Jobs: map[string]int{}}
	counters := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			labels := ""
			for _, lp := range m.GetLabel() {
				labels += lp.GetValue()
			}
			switch name {
			case "logistd_jobs":
				if v != 0 {
					c.Jobs[labels] = int(v)
				}
			case "logistd_invalid_manifests":
				c.Invalid = int(v)
			case "logistd_schedules":
				c.Schedules = int(v)
			case "logistd_jobs_started_total":
				counters["started"] = v
			case "logistd_jobs_finished_total":
				counters["finished_"+labels] = v
			}
		}
	}
	return c, counters
}

// agree waits for /metrics to count the folder as logist list does.
func agree(t *testing.T, d *observed, step string) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		want := listCounts(t, d.jobs)
		got, counters := scrape(t, d.listen)
		if got.String() == want.String() {
			return counters
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: /metrics says %s, logist list %s", step, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The gauges follow the folder live — jobs added, fixed from invalid,
// deleted, halted, resumed, finished, a schedule template, a manifest
// that cannot be placed — and the counters mean what their HELP says.
func TestMetricsFollowTheFolder(t *testing.T) {
	jobs := filepath.Join(t.TempDir(), "jobs")
	if err := os.MkdirAll(jobs, 0o700); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, jobs, freePort(t))
	agree(t, d, "start")

	writeJob(t, jobs, "ok", scripted(stepDone, stepDone))
	waitJob(t, jobs, "ok", lifecycle.Success)
	agree(t, d, "a job finished")

	writeJob(t, jobs, "broken", `{"task_description": "t", "agents": {}}`)
	agree(t, d, "an invalid manifest")
	writeJob(t, jobs, "broken", scripted(stepDone, stepDone))
	waitJob(t, jobs, "broken", lifecycle.Success)
	agree(t, d, "the manifest fixed")

	writeJob(t, jobs, "draft", `{"task_description": "t", "status": "DRAFT", "agents": {"worker": {"provider": "script", "script": [`+stepDone+`]}, "supervisor": {"provider": "script", "script": [`+stepDone+`]}}}`)
	agree(t, d, "a draft")
	if err := os.RemoveAll(filepath.Join(jobs, "draft")); err != nil {
		t.Fatal(err)
	}
	agree(t, d, "a job deleted")

	writeJob(t, jobs, "nightly", `{"task_description": "t", "schedule": {"cron": "0 3 1 1 *"}, "agents": {"worker": {"provider": "script", "script": [`+stepDone+`]}, "supervisor": {"provider": "script", "script": [`+stepDone+`]}}}`)
	agree(t, d, "a schedule template")

	if err := os.WriteFile(filepath.Join(jobs, "bad id!.json"), []byte(`{"task_description": "t"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	agree(t, d, "a manifest that cannot be placed")
	if err := os.Remove(filepath.Join(jobs, "bad id!.json")); err != nil {
		t.Fatal(err)
	}
	agree(t, d, "that manifest removed")

	writeJob(t, jobs, "stuck", scripted(stepStuck+`, `+stepDone, stepDone))
	writeJob(t, jobs, "halted", scripted(stepStuck, stepDone))
	waitJob(t, jobs, "stuck", lifecycle.InterventionRequired)
	waitJob(t, jobs, "halted", lifecycle.InterventionRequired)
	agree(t, d, "two jobs waiting")
	mustLogist(t, jobs, "halt", "halted")
	agree(t, d, "a waiting job halted")
	mustLogist(t, jobs, "resume", "stuck")
	waitJob(t, jobs, "stuck", lifecycle.Success)
	counters := agree(t, d, "a job resumed and finished")

	// ok, broken, stuck, halted started once each; stuck's resume is no start.
	want := map[string]float64{"started": 4, "finished_success": 3, "finished_intervention_required": 2, "finished_canceled": 1,
		"finished_halted_cost": 0, "finished_halted_time": 0}
	for k, v := range want {
		if counters[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, counters[k], v, counters)
		}
	}
}
