package lifecycle

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// expectedTable is the state machine written out by hand from seed 002
// (Flow Control Logic, Error Escalation Matrix) and the daemon's design:
// every row is (from, event, to). A change to the table in lifecycle.go that
// is not mirrored here fails TestTableIsExactlyTheExpectedOne.
var expectedTable = []Transition{
	// steward activates or cancels a draft
	{Draft, EvActivate, Pending},
	{Draft, EvHalt, Canceled},

	// a pending job enters its first phase, or ends before one
	{Pending, EvStart, Running},
	{Pending, EvStart, Reviewing},
	{Pending, EvSucceed, Success},
	{Pending, EvAgentFailed, InterventionRequired},
	{Pending, EvCostExceeded, HaltedCost},
	{Pending, EvTimeExceeded, HaltedTime},
	{Pending, EvCallsExceeded, InterventionRequired},
	{Pending, EvHalt, Canceled},

	// running
	{Running, EvAdvance, Running},
	{Running, EvAdvance, Reviewing},
	{Running, EvRetry, Running},
	{Running, EvRetry, Reviewing},
	{Running, EvSucceed, Success},
	{Running, EvStuck, InterventionRequired},
	{Running, EvInvalid, InterventionRequired},
	{Running, EvAgentFailed, InterventionRequired},
	{Running, EvRetryLimit, InterventionRequired},
	{Running, EvWorkflowFailed, InterventionRequired},
	{Running, EvAwait, InterventionRequired},
	{Running, EvCostExceeded, HaltedCost},
	{Running, EvTimeExceeded, HaltedTime},
	{Running, EvCallsExceeded, InterventionRequired},
	{Running, EvHalt, Canceled},

	// reviewing: same moves as running
	{Reviewing, EvAdvance, Running},
	{Reviewing, EvAdvance, Reviewing},
	{Reviewing, EvRetry, Running},
	{Reviewing, EvRetry, Reviewing},
	{Reviewing, EvSucceed, Success},
	{Reviewing, EvStuck, InterventionRequired},
	{Reviewing, EvInvalid, InterventionRequired},
	{Reviewing, EvAgentFailed, InterventionRequired},
	{Reviewing, EvRetryLimit, InterventionRequired},
	{Reviewing, EvWorkflowFailed, InterventionRequired},
	{Reviewing, EvAwait, InterventionRequired},
	{Reviewing, EvCostExceeded, HaltedCost},
	{Reviewing, EvTimeExceeded, HaltedTime},
	{Reviewing, EvCallsExceeded, InterventionRequired},
	{Reviewing, EvHalt, Canceled},

	// success can only be rolled back by a steward
	{Success, EvRollback, Pending},

	// waiting statuses: a steward resumes, rolls back or halts
	{InterventionRequired, EvResume, Pending},
	{InterventionRequired, EvHalt, Canceled},
	{InterventionRequired, EvRollback, Pending},
	{HaltedCost, EvResume, Pending},
	{HaltedCost, EvHalt, Canceled},
	{HaltedCost, EvRollback, Pending},
	{HaltedTime, EvResume, Pending},
	{HaltedTime, EvHalt, Canceled},
	{HaltedTime, EvRollback, Pending},
}

func show(t Transition) string { return fmt.Sprintf("%s -(%s)-> %s", t.From, t.Event, t.To) }

func sortedStrings(ts []Transition) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = show(t)
	}
	sort.Strings(out)
	return out
}

func TestTableIsExactlyTheExpectedOne(t *testing.T) {
	got := sortedStrings(Table())
	want := sortedStrings(expectedTable)
	gotSet := map[string]bool{}
	for _, g := range got {
		if gotSet[g] {
			t.Errorf("Table() lists %s twice", g)
		}
		gotSet[g] = true
	}
	wantSet := map[string]bool{}
	for _, w := range want {
		wantSet[w] = true
	}
	for _, w := range want {
		if !gotSet[w] {
			t.Errorf("Table() lacks expected transition %s", w)
		}
	}
	for _, g := range got {
		if !wantSet[g] {
			t.Errorf("Table() has unexpected transition %s", g)
		}
	}
	if len(got) != len(want) {
		t.Errorf("Table() has %d rows, want %d", len(got), len(want))
	}
}

func TestEveryTableRowIsAllowed(t *testing.T) {
	rows := Table()
	if len(rows) == 0 {
		t.Fatal("Table() is empty")
	}
	for _, tr := range rows {
		t.Run(show(tr), func(t *testing.T) {
			if err := Check(tr.From, tr.Event, tr.To); err != nil {
				t.Fatalf("Check(%s) = %v, want nil", show(tr), err)
			}
			if !Allows(tr.From, tr.Event) {
				t.Fatalf("Allows(%s, %s) = false for a row of the table", tr.From, tr.Event)
			}
			if !tr.From.Valid() || !tr.To.Valid() {
				t.Fatalf("row %s uses an invalid status", show(tr))
			}
		})
	}
}

// TestCheckAgreesWithTableEverywhere walks the whole status x event x status
// space: Check allows exactly the rows of the expected table.
func TestCheckAgreesWithTableEverywhere(t *testing.T) {
	allowed := map[Transition]bool{}
	for _, tr := range expectedTable {
		allowed[tr] = true
	}
	for _, from := range All {
		for _, ev := range Events {
			anyOK := false
			for _, to := range All {
				err := Check(from, ev, to)
				tr := Transition{from, ev, to}
				if allowed[tr] {
					anyOK = true
					if err != nil {
						t.Errorf("Check(%s) = %v, want nil", show(tr), err)
					}
					continue
				}
				var it *IllegalTransition
				if !errors.As(err, &it) {
					t.Errorf("Check(%s) = %v, want *IllegalTransition", show(tr), err)
					continue
				}
				if it.From != from || it.To != to || it.Event != ev {
					t.Errorf("IllegalTransition = %+v, want fields of %s", it, show(tr))
				}
			}
			if Allows(from, ev) != anyOK {
				t.Errorf("Allows(%s, %s) = %v, want %v", from, ev, Allows(from, ev), anyOK)
			}
		}
	}
}

func TestIllegalTransitionsRefused(t *testing.T) {
	cases := []Transition{
		{Success, EvResume, Pending},
		{Success, EvHalt, Canceled},
		{Success, EvStart, Running},
		{Draft, EvStart, Running},
		{Draft, EvResume, Pending},
		{Pending, EvAdvance, Success},
		{Pending, EvAdvance, Running},
		{Pending, EvStuck, InterventionRequired},
		{Running, EvActivate, Pending},
		{Running, EvSucceed, Reviewing},
		{Running, EvStart, Running},
		{Reviewing, EvResume, Pending},
		{InterventionRequired, EvStart, Running},
		{InterventionRequired, EvResume, Running},
		{HaltedCost, EvResume, Running},
		{HaltedTime, EvAdvance, Running},
		{Running, EvAdvance, Success},
		{Running, EvStuck, Canceled},
		{Status("BOGUS"), EvStart, Running},
		{Pending, Event("bogus"), Running},
	}
	// CANCELED is terminal: nothing at all leaves it.
	for _, ev := range Events {
		for _, to := range All {
			cases = append(cases, Transition{Canceled, ev, to})
		}
	}
	for _, tr := range cases {
		err := Check(tr.From, tr.Event, tr.To)
		var it *IllegalTransition
		if !errors.As(err, &it) {
			t.Errorf("Check(%s) = %v, want *IllegalTransition", show(tr), err)
			continue
		}
		if it.From != tr.From || it.Event != tr.Event || it.To != tr.To {
			t.Errorf("Check(%s) returned %+v", show(tr), it)
		}
		msg := it.Error()
		for _, part := range []string{string(tr.From), string(tr.Event), string(tr.To)} {
			if !strings.Contains(msg, part) {
				t.Errorf("error %q does not mention %q", msg, part)
			}
		}
	}
	for _, ev := range Events {
		if Allows(Canceled, ev) {
			t.Errorf("Allows(CANCELED, %s) = true, CANCELED is terminal", ev)
		}
	}
}

func TestStatusPredicates(t *testing.T) {
	type preds struct{ valid, terminal, active, waiting bool }
	want := map[Status]preds{
		Draft:                {true, false, false, false},
		Pending:              {true, false, true, false},
		Running:              {true, false, true, false},
		Reviewing:            {true, false, true, false},
		Success:              {true, true, false, false},
		Canceled:             {true, true, false, false},
		InterventionRequired: {true, false, false, true},
		HaltedCost:           {true, false, false, true},
		HaltedTime:           {true, false, false, true},
		"":                   {false, false, false, false},
		"pending":            {false, false, false, false},
		"DONE":               {false, false, false, false},
	}
	for s, w := range want {
		got := preds{s.Valid(), s.Terminal(), s.Active(), s.Waiting()}
		if got != w {
			t.Errorf("%q: predicates %+v, want %+v", s, got, w)
		}
	}
	if len(All) != 9 {
		t.Errorf("len(All) = %d, the seed has nine statuses", len(All))
	}
	seen := map[Status]bool{}
	for _, s := range All {
		if seen[s] {
			t.Errorf("status %s listed twice in All", s)
		}
		seen[s] = true
	}
}

// Terminal statuses other than a steward rollback of SUCCESS never move.
func TestTerminalStatusesOnlyRollback(t *testing.T) {
	for _, tr := range Table() {
		if tr.From.Terminal() && !(tr.From == Success && tr.Event == EvRollback) {
			t.Errorf("terminal status has outgoing transition %s", show(tr))
		}
	}
}

func TestEventsAreDistinct(t *testing.T) {
	seen := map[Event]bool{}
	for _, e := range Events {
		if seen[e] {
			t.Errorf("event %s listed twice", e)
		}
		seen[e] = true
	}
	// Every event the table uses must be listed in Events, or Table()
	// would silently omit its rows: walked in the table itself, not in a
	// copy of it.
	used := map[Event]bool{}
	for k, targets := range table {
		used[k.ev] = true
		if !seen[k.ev] {
			t.Errorf("event %s (from %s) is missing from Events", k.ev, k.from)
		}
		if !k.from.Valid() {
			t.Errorf("the table leaves %q, which is not a status", k.from)
		}
		for _, to := range targets {
			if !to.Valid() {
				t.Errorf("the table leads %s on %s to %q, which is not a status", k.from, k.ev, to)
			}
		}
	}
	for _, e := range Events {
		if !used[e] {
			t.Errorf("event %s is listed in Events but the table never uses it", e)
		}
	}
}
