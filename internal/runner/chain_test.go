package runner

import (
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// A call's outcome (its response and the transition it implies) is not
// committed on its own when a plain agent call follows at once: it is
// held, and the next intent's commit takes it into its unit (Engine.chains).
// One unit, one write and one fsync: the response of call n and the intent
// of call n+1 reach the history together or not at all. A RETRY back into
// the same phase chains too; the held response closes the intent it
// answers, so the next call is a new interaction, not a re-attempt.
func TestCallOutcomeJoinsTheNextIntentsUnit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.WriteJob("j", job(testkit.Script(testkit.Step("RETRY", "Not yet."), testkit.Step("COMPLETED", "Done.")), okSupervisor()))
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s), want SUCCESS", m.Status, m.Run.Reason)
	}
	recs := f.Records("j")
	if errs := testkit.OfType(recs, history.TypeError); len(errs) != 0 {
		t.Fatalf("error records %+v: a held response was taken for a cut-off call", errs)
	}
	intents := testkit.OfType(recs, history.TypeIntent)
	if len(intents) != 3 {
		t.Fatalf("%d intents, want 3 (worker RETRY, worker COMPLETED, supervisor)", len(intents))
	}
	for i, in := range intents {
		if *in.Interaction != i {
			t.Errorf("intent %d is interaction %d", i, *in.Interaction)
		}
	}
	// Each intent ends a unit (it carries the commit); each unit after the
	// first begins with the response of the call before.
	unitStart := 0
	for i, r := range recs {
		if r.More {
			continue
		}
		unit := recs[unitStart : i+1]
		unitStart = i + 1
		last := unit[len(unit)-1]
		if last.Commit == nil {
			t.Errorf("unit ending at seq %d has no commit", last.Seq)
		}
		if last.Type != history.TypeIntent {
			continue
		}
		n := *last.Interaction
		if n == 0 {
			continue
		}
		first := unit[0]
		if first.Type != history.TypeResponse || *first.Interaction != n-1 {
			t.Errorf("the unit of intent %d begins with %s (interaction %v), want the response of interaction %d", n, first.Type, first.Interaction, n-1)
		}
	}
	responsesOnce(t, f, "j", 3)
	checkIntact(t, f, "j")
}
