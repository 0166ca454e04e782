package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/metrics"
)

func template(id, policy string) []byte {
	return fmt.Appendf(nil, `{"schema_version": 1, "job_id": %q, "task_description": "t",
 "schedule": {"cron": "* * * * *", "concurrency_policy": %q},
 "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`, id, policy)
}

// TestCronTickFiresOnce: three nodes find the same ticks due at the same
// moments; each tick creates one run, cluster-wide. A template is never
// claimed; a Forbid template's tick with an unfinished run creates none.
func TestCronTickFiresOnce(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	if _, err := Submit(ctx, s, template("nightly", "Allow")); err != nil {
		t.Fatal(err)
	}
	if _, err := Submit(ctx, s, template("solo", "Forbid")); err != nil {
		t.Fatal(err)
	}
	var nodes []*Node
	for i := range 3 {
		n := newNode(t, s, fmt.Sprint("n", i), time.Minute)
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	t0 := time.Date(2026, 11, 26, 3, 0, 30, 0, time.UTC)
	at := func(now time.Time) {
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				if err := n.fireDue(ctx, now); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	runs := func() []string {
		js, err := s.Jobs(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, j := range js {
			if !j.Template {
				out = append(out, j.ID)
			}
		}
		return out
	}
	at(t0) // first sight: nothing due yet
	if r := runs(); len(r) != 0 {
		t.Fatalf("runs before any tick: %v", r)
	}
	at(t0.Add(31 * time.Second)) // 03:01:01: the 03:01 tick
	at(t0.Add(40 * time.Second)) // the same tick, found due again
	want := []string{"nightly-20261126-030100Z", "solo-20261126-030100Z"}
	if r := runs(); !slices.Equal(r, want) {
		t.Fatalf("runs after one tick: %v, want %v", r, want)
	}
	// 03:02: nightly fires again; solo's run is unfinished (Forbid).
	at(t0.Add(91 * time.Second))
	want = []string{"nightly-20261126-030100Z", "nightly-20261126-030200Z", "solo-20261126-030100Z"}
	if r := runs(); !slices.Equal(r, want) {
		t.Fatalf("runs after two ticks: %v, want %v", r, want)
	}
	if last, err := s.LastTick(ctx, "solo"); err != nil || !last.Equal(time.Date(2026, 11, 26, 3, 2, 0, 0, time.UTC)) {
		t.Fatalf("solo's skipped tick not recorded: %v %v", last, err)
	}
	// Runs are claimable, templates never.
	for range 3 {
		l, err := s.Claim(ctx, "n0", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if l == nil {
			break
		}
		if l.Job == "nightly" || l.Job == "solo" {
			t.Fatalf("template %s claimed", l.Job)
		}
	}
	j, err := s.Job(ctx, "nightly")
	if err != nil || j.Status != lifecycle.Pending || j.Owner != "" {
		t.Fatalf("template %+v %v", j, err)
	}
}

func templateWith(id, policy, extra string) []byte {
	return fmt.Appendf(nil, `{"schema_version": 1, "job_id": %q, "task_description": "t",
 "schedule": {"cron": "* * * * *", "concurrency_policy": %q%s},
 "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`, id, policy, extra)
}

// cronNodes starts n nodes on s and returns a function that has them all
// look for due ticks at once at a given time (the injected clock).
func cronNodes(t *testing.T, s clusterstore.Store, n int) func(time.Time) {
	ctx := context.Background()
	var nodes []*Node
	for i := range n {
		nd := newNode(t, s, fmt.Sprint("n", i), time.Minute)
		if err := nd.Start(ctx); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, nd)
	}
	return func(now time.Time) {
		var wg sync.WaitGroup
		for _, nd := range nodes {
			wg.Go(func() {
				if err := nd.fireDue(ctx, now); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
}

func runsOf(t *testing.T, s clusterstore.Store, template string) []clusterstore.Job {
	js, err := s.Jobs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []clusterstore.Job
	for _, j := range js {
		if !j.Template && strings.HasPrefix(j.ID, template+"-") {
			out = append(out, j)
		}
	}
	return out
}

func ids(js []clusterstore.Job) []string {
	var out []string
	for _, j := range js {
		out = append(out, j.ID)
	}
	return out
}

// TestCronMissedTicks: ticks missed while no node ran are caught up as in
// file mode: only the latest fires, once across two nodes, and not when
// it is past the schedule's starting deadline — then the schedule waits
// for its next tick.
func TestCronMissedTicks(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	if _, err := Submit(ctx, s, templateWith("keen", "Allow", "")); err != nil {
		t.Fatal(err)
	}
	if _, err := Submit(ctx, s, templateWith("late", "Allow", `, "starting_deadline_seconds": 20`)); err != nil {
		t.Fatal(err)
	}
	at := cronNodes(t, s, 2)
	t0 := time.Date(2026, 11, 26, 3, 0, 30, 0, time.UTC)
	at(t0)
	// No node looked from 03:00:30 to 03:05:30: ticks 03:01 to 03:05
	// were missed. 03:05 is 30 s old: within no deadline (keen), past
	// late's 20 s (and the 5 s a node may take to look).
	at(t0.Add(5 * time.Minute))
	if r := ids(runsOf(t, s, "keen")); !slices.Equal(r, []string{"keen-20261126-030500Z"}) {
		t.Fatalf("keen's runs after the gap: %v, want only the latest tick's", r)
	}
	if r := ids(runsOf(t, s, "late")); len(r) != 0 {
		t.Fatalf("late's runs after the gap: %v, want none (past its starting deadline)", r)
	}
	if last, err := s.LastTick(ctx, "late"); err != nil || !last.Equal(time.Date(2026, 11, 26, 3, 5, 0, 0, time.UTC)) {
		t.Fatalf("late's missed tick not recorded: %v %v", last, err)
	}
	// 03:06:02: the next tick, on time, fires for both.
	at(t0.Add(5*time.Minute + 32*time.Second))
	if r := ids(runsOf(t, s, "late")); !slices.Equal(r, []string{"late-20261126-030600Z"}) {
		t.Fatalf("late's runs at its next tick: %v", r)
	}
	if r := ids(runsOf(t, s, "keen")); !slices.Equal(r, []string{"keen-20261126-030500Z", "keen-20261126-030600Z"}) {
		t.Fatalf("keen's runs at the next tick: %v", r)
	}
}

// TestCronReplace: a Replace schedule's tick halts the unfinished run —
// through the steering path, once although two nodes fire the tick at
// once, fencing the node that held its lease — and then creates its run.
func TestCronReplace(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	if _, err := Submit(ctx, s, templateWith("swap", "Replace", "")); err != nil {
		t.Fatal(err)
	}
	at := cronNodes(t, s, 2)
	t0 := time.Date(2026, 11, 26, 3, 0, 30, 0, time.UTC)
	at(t0)
	at(t0.Add(31 * time.Second))
	first := "swap-20261126-030100Z"
	if r := ids(runsOf(t, s, "swap")); !slices.Equal(r, []string{first}) {
		t.Fatalf("runs after the first tick: %v", r)
	}
	l, err := s.Claim(ctx, "worker", time.Minute) // the first run is running
	if err != nil || l == nil || l.Job != first {
		t.Fatalf("claim: %+v %v", l, err)
	}
	at(t0.Add(91 * time.Second))
	runs := runsOf(t, s, "swap")
	if r := ids(runs); !slices.Equal(r, []string{first, "swap-20261126-030200Z"}) {
		t.Fatalf("runs after the second tick: %v", r)
	}
	old := runs[0]
	if old.Owner != "" {
		t.Fatalf("replaced run %s is owned by %q; want no lease", old.ID, old.Owner)
	}
	if err := s.Heartbeat(ctx, l, time.Minute); !errors.Is(err, clusterstore.ErrFenced) {
		t.Fatalf("the replaced run's node heartbeats: %v, want fenced", err)
	}
	lines, err := s.History(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	halts := 0
	for _, line := range lines {
		if bytes.Contains(line, []byte(`"command":"halt"`)) {
			halts++
			if !bytes.Contains(line, []byte(`"user":"schedule","reason":"replaced by the run of 2026-11-26T03:02:00Z (Replace)"`)) {
				t.Fatalf("halt record of the replaced run: %s", line)
			}
		}
	}
	if halts != 1 || old.Status != lifecycle.Canceled {
		t.Fatalf("replaced run: %d halt records, status %s; want 1, CANCELED", halts, old.Status)
	}
	if runs[1].Status != lifecycle.Pending {
		t.Fatalf("new run is %s, want PENDING", runs[1].Status)
	}
	// A tick fired already halts nothing again.
	at(t0.Add(100 * time.Second))
	if again, err := s.History(ctx, first); err != nil || len(again) != len(lines) {
		t.Fatalf("history of the replaced run grew on a tick fired already: %d -> %d (%v)", len(lines), len(again), err)
	}
}

// cronScrapes starts n nodes on s, each counting into logistd's metrics
// on a registry of its own, and returns the function that has them all
// look for due ticks at once and the one that sums, over the nodes'
// /metrics, logistd_cron_runs_total by outcome.
func cronScrapes(t *testing.T, s clusterstore.Store, n int) (func(time.Time), func() map[string]int) {
	ctx := context.Background()
	var nodes []*Node
	var regs []*prometheus.Registry
	for i := range n {
		nd := newNode(t, s, fmt.Sprint("n", i), time.Minute)
		reg := prometheus.NewRegistry()
		nd.Cron = metrics.New(reg, "test", "")
		if err := nd.Start(ctx); err != nil {
			t.Fatal(err)
		}
		nodes, regs = append(nodes, nd), append(regs, reg)
	}
	at := func(now time.Time) {
		var wg sync.WaitGroup
		for _, nd := range nodes {
			wg.Go(func() {
				if err := nd.fireDue(ctx, now); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	line := regexp.MustCompile(`(?m)^logistd_cron_runs_total\{outcome="(\w+)"\} (\d+)$`)
	scrape := func() map[string]int {
		sum := map[string]int{}
		for _, reg := range regs {
			rec := httptest.NewRecorder()
			promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
			ms := line.FindAllStringSubmatch(rec.Body.String(), -1)
			if len(ms) == 0 {
				t.Fatalf("a node's /metrics has no logistd_cron_runs_total:\n%s", rec.Body.String())
			}
			for _, m := range ms {
				k, _ := strconv.Atoi(m[2])
				sum[m[1]] += k
			}
		}
		return sum
	}
	return at, scrape
}

// TestCronMetrics: the nodes count the outcomes of the ticks in
// logistd_cron_runs_total as file mode does — created, skipped (Forbid),
// replaced (Replace), missed (a due tick past its starting deadline; one
// a later run caught up within it is not) — each once cluster-wide, by the node
// that fired or decided it, although two nodes find every tick due.
func TestCronMetrics(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	for _, m := range [][]byte{templateWith("keen", "Allow", ""), templateWith("late", "Allow", `, "starting_deadline_seconds": 20`),
		templateWith("solo", "Forbid", ""), templateWith("swap", "Replace", "")} {
		if _, err := Submit(ctx, s, m); err != nil {
			t.Fatal(err)
		}
	}
	at, scrape := cronScrapes(t, s, 2)
	want := func(when string, w map[string]int) {
		t.Helper()
		got := scrape()
		for _, k := range []string{"created", "skipped", "replaced", "missed", "failed"} {
			if got[k] != w[k] {
				t.Fatalf("%s: logistd_cron_runs_total over the nodes %v, want %v", when, got, w)
			}
		}
	}
	t0 := time.Date(2026, 11, 26, 3, 0, 30, 0, time.UTC)
	at(t0)
	want("at first sight", map[string]int{})
	at(t0.Add(31 * time.Second)) // 03:01: a run of each
	at(t0.Add(40 * time.Second)) // the same tick again: nothing more
	want("03:01", map[string]int{"created": 4})
	// 03:02: the runs are unfinished: solo skips, swap replaces its run.
	at(t0.Add(91 * time.Second))
	want("03:02", map[string]int{"created": 7, "skipped": 1, "replaced": 1})
	// 03:06:30: 03:03 to 03:05 were due while no node looked: caught up by
	// 03:06's run (file mode's rule, schedule.CatchUp), missed only past
	// late's 20 s deadline (3); 03:06 is 30 s old: past late's deadline
	// (missed), skipped by solo, replacing for swap.
	at(t0.Add(6 * time.Minute))
	want("03:06", map[string]int{"created": 9, "skipped": 2, "replaced": 2, "missed": 4})
}
