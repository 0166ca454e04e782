package cluster

import (
	"errors"
	"testing"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// TestOwnCommitIsTheStoresCommit: file mode's transactions (logistd's
// env, history.Options.Commit = OwnCommit) commit each unit through the
// jobs folder's store, which applies the one rule (clusterstore.Apply)
// and writes the unit itself: a call that would start with the job's
// budget spent — the spending read from the manifest the unit commits —
// is refused and nothing of its unit reaches the history. A steward's
// change made by another process (the CLI: no hook) moves the history on;
// the store reads the job again (its raised budget) and the owner's next
// call starts: the owner is not fenced by it.
func TestOwnCommitIsTheStoresCommit(t *testing.T) {
	f := testkit.New(t)
	f.Env.History.Commit = OwnCommit(f.Env)
	f.WriteJob("a", map[string]any{"status": "RUNNING", "current_phase": "work", "cost_threshold": 1.0})
	intent := func() *history.Record {
		n := 0
		return &history.Record{Type: history.TypeIntent, Interaction: &n, Phase: "work", Role: "worker"}
	}
	tx, err := jobtx.Begin(f.Env, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.RecordError("TEST", "SYSTEM", 0, "first"); err != nil {
		t.Fatal(err)
	}
	tx.M.Metrics.CumulativeCost = 1.0 // the budget, spent
	err = tx.CommitWithIntent(intent())
	tx.Close()
	if !errors.Is(err, clusterstore.ErrBudget) {
		t.Fatalf("a call with the budget spent: %v, want ErrBudget from the store", err)
	}
	if recs := f.Records("a"); len(recs) != 1 {
		t.Fatalf("history holds %d records, want 1: the refused unit was written", len(recs))
	}

	// The steward raises the budget, in another process (no hook).
	cli := &jobtx.Env{Store: jobstore.New(f.Dir), Logger: testkit.Logger(), Obs: jobtx.Nop{}}
	tx, err = jobtx.Begin(cli, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	raised, spent := 5.0, 1.0
	tx.M.CostThreshold, tx.M.Metrics.CumulativeCost = &raised, spent
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx.Close()

	tx, err = jobtx.Begin(f.Env, "a", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = tx.Append(intent())
	tx.Close()
	if err != nil {
		t.Fatalf("the owner's call after the steward raised the budget: %v", err)
	}
	recs := f.Records("a")
	if len(recs) != 3 || recs[2].Type != history.TypeIntent {
		t.Fatalf("history: %d records, want the error, the steward's commit and the intent", len(recs))
	}
	if m := f.Load("a"); m.Status != lifecycle.Running {
		t.Fatalf("status %s", m.Status)
	}
}
