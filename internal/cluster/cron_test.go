package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/lifecycle"
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
