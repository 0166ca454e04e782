package workflow

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/logist/logist/internal/lifecycle"
)

func TestSupervisedGraph(t *testing.T) {
	w, err := Builtin("supervised")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct{ phase, action, want string }{
		{"work", ActionCompleted, "review"},
		{"work", ActionRetry, "work"},
		{"work", ActionStuck, TargetIntervention},
		{"review", ActionCompleted, TargetSuccess},
		{"review", ActionRetry, "work"},
		{"review", ActionStuck, TargetIntervention},
	}
	for _, c := range cases {
		got, err := w.Next(c.phase, c.action)
		if err != nil || got != c.want {
			t.Errorf("Next(%s, %s) = %q, %v; want %q", c.phase, c.action, got, err, c.want)
		}
	}
	if w.Phases["work"].Status != lifecycle.Running || w.Phases["review"].Status != lifecycle.Reviewing {
		t.Errorf("phase statuses: %+v", w.Phases)
	}
	if got := strings.Join(w.Roles(), ","); got != "supervisor,worker" {
		t.Errorf("roles = %s", got)
	}
	if _, err := w.Next("nope", ActionCompleted); err == nil {
		t.Error("unknown phase accepted")
	}
	for _, role := range []string{"worker", "supervisor"} {
		if !strings.Contains(DefaultPrompt(role), "summary_for_supervisor") {
			t.Errorf("%s prompt does not state the answer contract", role)
		}
	}
	if DefaultPrompt("nobody") != "" {
		t.Error("prompt for an unknown role")
	}
}

func TestCheckRefusesBrokenGraphs(t *testing.T) {
	on := func(c, r, s string) map[string]string {
		return map[string]string{ActionCompleted: c, ActionRetry: r, ActionStuck: s}
	}
	cases := map[string]struct {
		w    Workflow
		want string
	}{
		"missing start":  {Workflow{Name: "x", Start: "a", Phases: map[string]Phase{"b": {Role: "r", On: on("SUCCESS", "b", "INTERVENTION_REQUIRED")}}}, `start phase "a"`},
		"unknown target": {Workflow{Name: "x", Start: "a", Phases: map[string]Phase{"a": {Role: "r", On: on("zzz", "a", "INTERVENTION_REQUIRED")}}}, `unknown phase "zzz"`},
		"missing action": {Workflow{Name: "x", Start: "a", Phases: map[string]Phase{"a": {Role: "r", On: map[string]string{ActionCompleted: "SUCCESS"}}}}, "no target for"},
		"bad status":     {Workflow{Name: "x", Start: "a", Phases: map[string]Phase{"a": {Role: "r", Status: lifecycle.Success, On: on("SUCCESS", "a", "a")}}}, "status must be RUNNING or REVIEWING"},
		"no role":        {Workflow{Name: "x", Start: "a", Phases: map[string]Phase{"a": {On: on("SUCCESS", "a", "a")}}}, "role is empty"},
	}
	for name, c := range cases {
		err := c.w.Check()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", name, err, c.want)
		}
	}
	ok := Workflow{Name: "x", Start: "a", Phases: map[string]Phase{"a": {Role: "r", On: on("SUCCESS", "a", "INTERVENTION_REQUIRED")}}}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	if ok.Phases["a"].Status != lifecycle.Running {
		t.Error("a phase without status should run as RUNNING")
	}
	if _, err := Builtin("nope"); err == nil || !strings.Contains(err.Error(), "supervised") {
		t.Errorf("unknown built-in: %v", err)
	}
}

// Builtin hands out copies: changing one does not change the next.
func TestBuiltinReturnsACopy(t *testing.T) {
	a, err := Builtin("supervised")
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range a.Phases {
		p.On["COMPLETED"] = "changed"
		a.Phases[name] = p
	}
	a.Start = "changed"
	b, err := Builtin("supervised")
	if err != nil {
		t.Fatal(err)
	}
	if b.Start == "changed" {
		t.Error("Start shared between calls")
	}
	for name, p := range b.Phases {
		if p.On["COMPLETED"] == "changed" {
			t.Errorf("phase %s: On shared between calls", name)
		}
	}
}

// Hostile input H106: an inline workflow whose COMPLETED leads back round
// ran 58,540 calls in 5 minutes. Loops names such a cycle; the built-in
// workflows have none.
func TestLoopsWarnOfCyclesWithNoExit(t *testing.T) {
	t.Parallel()
	on := func(completed string) map[string]string {
		return map[string]string{ActionCompleted: completed, "RETRY": "work", "STUCK": TargetIntervention}
	}
	w := &Workflow{Name: "spin", Start: "work", Phases: map[string]Phase{
		"work":   {Role: "worker", On: on("review")},
		"review": {Role: "supervisor", On: on("work")},
		"side":   {Role: "worker", On: on("work")},
		"fine":   {Role: "worker", On: on(TargetSuccess)},
	}}
	if err := w.Check(); err != nil {
		t.Fatal(err)
	}
	got := w.Loops()
	if len(got) != 1 || !strings.Contains(got[0], `(review → work → review)`) || !strings.Contains(got[0], "never reaches SUCCESS") {
		t.Errorf("Loops: %q", got)
	}
	for _, name := range BuiltinNames() {
		b, _ := Builtin(name)
		if l := b.Loops(); len(l) != 0 {
			t.Errorf("built-in %s: %v", name, l)
		}
	}
}

// FuzzOutcomeName holds outcomeName to the regular expression it replaced.
func FuzzOutcomeName(f *testing.F) {
	re := regexp.MustCompile(`^[A-Z][A-Z_]{1,39}$`)
	for _, o := range []string{"", "A", "AB", "A_", "_A", "DONE_NOW", "done", "AÉ", strings.Repeat("A", 40), strings.Repeat("A", 41), "A\n"} {
		f.Add(o)
	}
	f.Fuzz(func(t *testing.T, o string) {
		if got, want := outcomeName(o), re.MatchString(o); got != want {
			t.Fatalf("outcomeName(%q) = %v, the expression says %v", o, got, want)
		}
	})
}

// Seed 002: STUCK means a human is needed, RETRY that the work is not
// done. Routing is the one rule: neither may lead to SUCCESS (Routes
// refuses it, naming the field; the manifest's validation applies it),
// and STUCK led to a phase is warned of (Warnings, naming the field). The
// built-in workflows keep to it.
func TestRoutingOfStuckAndRetry(t *testing.T) {
	t.Parallel()
	on := func(c, r, s string) map[string]string {
		return map[string]string{ActionCompleted: c, ActionRetry: r, ActionStuck: s}
	}
	for _, c := range []struct{ name, ptr string }{{ActionRetry, "/phases/a/on/RETRY"}, {ActionStuck, "/phases/a/on/STUCK"}} {
		o := on("SUCCESS", "a", TargetIntervention)
		o[c.name] = TargetSuccess
		w := Workflow{Name: "x", Start: "a", Phases: map[string]Phase{"a": {Role: "r", On: o}}}
		if err := w.Check(); err != nil {
			t.Errorf("%s to SUCCESS: Check = %v; the engine reads it (a history recorded on it replays)", c.name, err)
		}
		refused, _ := w.Routes()
		if len(refused) != 1 || refused[0].Pointer != c.ptr || !strings.Contains(refused[0].Reason, c.name+" leads to SUCCESS") {
			t.Errorf("%s to SUCCESS: refused %+v, want one at %s", c.name, refused, c.ptr)
		}
	}
	self := Workflow{Name: "x", Start: "a", Phases: map[string]Phase{"a": {Role: "r", On: on("SUCCESS", "a", "a")}}}
	if err := self.Check(); err != nil {
		t.Fatal(err)
	}
	refused, _ := self.Routes()
	ws := self.Warnings()
	if len(refused) != 0 || len(ws) != 1 || ws[0].Pointer != "/phases/a/on/STUCK" || !strings.Contains(ws[0].Reason, "not to INTERVENTION_REQUIRED") {
		t.Errorf("refused %+v, Warnings = %+v, want one warning at /phases/a/on/STUCK", refused, ws)
	}
	for _, name := range BuiltinNames() {
		b, _ := Builtin(name)
		if refused, ws := b.Routes(); len(refused)+len(ws) != 0 || len(b.Warnings()) != 0 {
			t.Errorf("built-in %s: refused %+v, warned %+v", name, refused, ws)
		}
	}
}

// Check's problems name the field (a JSON pointer within the workflow)
// and what would be right: the ends a target may be, the answer schemas
// a phase may name.
func TestCheckNamesTheFieldAndTheChoices(t *testing.T) {
	t.Parallel()
	on := func(c string) map[string]string {
		return map[string]string{ActionCompleted: c, ActionRetry: "a", ActionStuck: TargetIntervention}
	}
	cases := []struct {
		name string
		w    Workflow
		ptr  string
		want []string
	}{
		{"unknown end", Workflow{Start: "a", Phases: map[string]Phase{"a": {Role: "r", On: on("CANCELED")}}},
			"/phases/a/on/COMPLETED", []string{`unknown phase "CANCELED"`, "SUCCESS, INTERVENTION_REQUIRED", "(a)"}},
		{"bad schema", Workflow{Start: "a", Phases: map[string]Phase{"a": {Role: "r", Schema: "job-manifest-schema.json", On: on("SUCCESS")}}},
			"/phases/a/schema", []string{"protocol-answer-planner.json", "not one of Logist's answer schemas"}},
		{"missing start", Workflow{Start: "b", Phases: map[string]Phase{"a": {Role: "r", On: on("SUCCESS")}}},
			"/start", []string{`"b"`, "(phases: a)"}},
		{"a slash in a phase name", Workflow{Start: "a/b", Phases: map[string]Phase{"a/b": {Role: "", On: on("SUCCESS")}}},
			"/phases/a~1b/role", []string{"role is empty"}},
	}
	for _, c := range cases {
		var p *Problem
		err := c.w.Check()
		if !errors.As(err, &p) || p.Pointer != c.ptr {
			t.Errorf("%s: Check = %v, want a problem at %s", c.name, err, c.ptr)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(p.Reason, w) {
				t.Errorf("%s: %q lacks %q", c.name, p.Reason, w)
			}
		}
	}
}
