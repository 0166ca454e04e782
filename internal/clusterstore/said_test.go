package clusterstore

import (
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// TestSaidIsWhatTheManifestSays: every unit a transaction commits says,
// with the manifest it commits (history.Commit.Said, which the owner's
// store reads in place of the manifest: unitHead), exactly the status,
// budget and spending that manifest's bytes say (readHead), whatever the
// budget and cost, so "the manifest the unit commits says the job's
// status, budget and spending" holds either way.
func TestSaidIsWhatTheManifestSays(t *testing.T) {
	t.Parallel()
	f := testkit.New(t)
	var commits []*history.Commit
	f.Env.History.Commit = func(u history.Unit) error {
		if c := u.Records[len(u.Records)-1].Commit; c != nil {
			commits = append(commits, c)
		}
		return u.Write()
	}
	f.WriteJob("a", map[string]any{"status": "PENDING", "current_phase": "work"})
	budget := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		status lifecycle.Status
		budget *float64
		cost   float64
	}{
		{lifecycle.Running, nil, 0},
		{lifecycle.Running, budget(100), 0.1 + 0.2},
		{lifecycle.Running, budget(0.3), 0.29999999999999999},
		{lifecycle.Running, budget(0), 1e-9},
		{lifecycle.Running, budget(-1), 12345.6789},
		{lifecycle.Running, budget(12345.6789), 12345.67885},
		{lifecycle.Reviewing, budget(1e300), 1e-300},
		{lifecycle.Running, nil, 3.0000000000000004},
		{lifecycle.Success, budget(5), 5},
	} {
		tx, err := jobtx.Begin(f.Env, "a", nil)
		if err != nil {
			t.Fatal(err)
		}
		tx.M.Status, tx.M.CostThreshold, tx.M.Metrics.CumulativeCost = c.status, c.budget, c.cost
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		tx.Close()
	}
	if len(commits) != 9 {
		t.Fatalf("%d commits, want 9", len(commits))
	}
	for i, c := range commits {
		if c.Said == nil || c.Plain == nil {
			t.Fatalf("commit %d: said %v, plain %d bytes", i, c.Said, len(c.Plain))
		}
		said, read := unitHead(&Unit{Manifest: c.Plain, Said: c.Said}), readHead(c.Plain)
		if said.Status != read.Status || said.budget() != read.budget() || said.cost() != read.cost() {
			t.Fatalf("commit %d says %s, budget %d, cost %d µ$; its manifest %s, %d, %d", i, said.Status, said.budget(), said.cost(), read.Status, read.budget(), read.cost())
		}
	}
}
