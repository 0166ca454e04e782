package negotiation

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas"
)

// engine is a fake of the lead's engine: it loads the Session from the
// committed messages every step, commits Step.Emit, answers the turns
// (validating each answer against Turn.Schema like the real one), passes
// the results to Apply and commits what it returns.
type engine struct {
	t      *testing.T
	env    deliberation.Env
	msgs   []deliberation.Message
	answer func(e *engine, t deliberation.Turn, call int) deliberation.Result
	// hook runs before each step; it may call Input.
	hook func(e *engine, step int)
	// extra are results added to a step's (stray, late or stale ones).
	extra   func(e *engine, turns []deliberation.Turn) []deliberation.Result
	calls   map[string]int
	turns   []deliberation.Turn // every turn asked, in order
	steps   [][]deliberation.Turn
	done    bool
	outcome string
	clock   time.Time
}

func newEngine(t *testing.T, env deliberation.Env) *engine {
	e := &engine{t: t, env: env, calls: map[string]int{}, clock: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	e.env.Now = func() time.Time { e.clock = e.clock.Add(time.Second); return e.clock }
	e.answer = func(e *engine, t deliberation.Turn, call int) deliberation.Result {
		return deliberation.Result{Turn: t, Answer: defaultAnswer(t, call)}
	}
	return e
}

func (e *engine) load() deliberation.Session {
	e.t.Helper()
	env := e.env
	env.Messages = append([]deliberation.Message(nil), e.msgs...)
	s, err := Game{}.Load(env)
	if err != nil {
		e.t.Fatalf("Load: %v", err)
	}
	return s
}

// commit stamps and stores messages through JSON, like the history.
func (e *engine) commit(ms []deliberation.Message) {
	e.t.Helper()
	for _, m := range ms {
		m.ID = fmt.Sprintf("msg-%03d", len(e.msgs)+1)
		m.Timestamp = e.env.Now().Format(time.RFC3339)
		if m.Round == 0 {
			e.t.Fatalf("message without a round: %+v", m)
		}
		b, err := json.Marshal(m)
		if err != nil {
			e.t.Fatal(err)
		}
		var back deliberation.Message
		if err := json.Unmarshal(b, &back); err != nil {
			e.t.Fatal(err)
		}
		e.msgs = append(e.msgs, back)
	}
}

func (e *engine) input(in deliberation.Input) error {
	ms, err := e.load().Input(in)
	if err == nil {
		e.commit(ms)
	}
	return err
}

// step plays one step; false when the session is done.
func (e *engine) step(n int) bool {
	e.t.Helper()
	if e.hook != nil {
		e.hook(e, n)
	}
	s := e.load()
	st, err := s.Next()
	if err != nil {
		e.t.Fatalf("Next: %v", err)
	}
	again, err := s.Next()
	if err != nil || !reflect.DeepEqual(st, again) {
		e.t.Fatalf("Next is not pure: %v\n%+v\n%+v", err, st, again)
	}
	e.commit(st.Emit)
	if st.Done {
		e.done, e.outcome = true, st.Outcome
		return false
	}
	if len(st.Turns) == 0 {
		e.t.Fatalf("a step with neither turns nor the end: %+v", st)
	}
	// After a crash the engine reloads and asks again: the same turns.
	if len(st.Emit) > 0 {
		re, err := e.load().Next()
		if err != nil || len(re.Emit) != 0 || !reflect.DeepEqual(re.Turns, st.Turns) {
			e.t.Fatalf("after committing Emit, Next differs: %v\n%+v\n%+v", err, re.Turns, st.Turns)
		}
	}
	e.steps = append(e.steps, st.Turns)
	var results []deliberation.Result
	for _, t := range st.Turns {
		e.turns = append(e.turns, t)
		call := e.calls[t.Role]
		e.calls[t.Role]++
		r := e.answer(e, t, call)
		if r.Error == "" && r.Answer != nil {
			b, _ := json.Marshal(r.Answer)
			var doc map[string]any
			_ = json.Unmarshal(b, &doc)
			if err := schemas.Validate(t.Schema, doc); err != nil {
				r = deliberation.Result{Turn: t, Error: "invalid answer: " + err.Error()}
			} else {
				r.Answer = doc
			}
		}
		results = append(results, r)
	}
	if e.extra != nil {
		results = append(results, e.extra(e, st.Turns)...)
	}
	// Apply on the session that made the step (Emit not in its messages)
	// or on a reloaded one (Emit committed): both must work.
	if n%2 == 1 {
		s = e.load()
	}
	ms, err := s.Apply(results)
	if err != nil {
		e.t.Fatalf("Apply: %v", err)
	}
	e.commit(ms)
	files, err := e.load().Files()
	if err != nil {
		e.t.Fatalf("Files: %v", err)
	}
	for name, b := range files {
		if !json.Valid(b) {
			e.t.Fatalf("%s is not JSON", name)
		}
	}
	return true
}

func (e *engine) run() *engine {
	e.t.Helper()
	for n := 0; n < 5000; n++ {
		if !e.step(n) {
			return e
		}
	}
	e.t.Fatal("the session does not end")
	return e
}

// defaultAnswer is a valid answer for each turn kind.
func defaultAnswer(t deliberation.Turn, call int) map[string]any {
	switch t.Kind {
	case kindVote:
		return map[string]any{"vote": "YES"}
	case kindHelper:
		return map[string]any{"changed": false}
	case kindSpeech:
		return map[string]any{"text": fmt.Sprintf("%s speaks on %v (call %d).", t.Participant, t.Data["issue"], call)}
	}
	return map[string]any{"text": fmt.Sprintf("%s says %s (call %d).", t.Participant, t.Data["step"], call), "issues": []any{"allocation"}}
}

// demoScenario is the example scenario as a generic document to modify.
func demoScenario(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../../../jobs/demo-negotiation/scenario.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// setup writes a scenario into a job folder and returns the Env.
func setup(t *testing.T, scenario any, cfg map[string]any, seed int64) deliberation.Env {
	t.Helper()
	dir := t.TempDir()
	b, err := json.MarshalIndent(scenario, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "scenario.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if cfg == nil {
		cfg = map[string]any{}
	}
	if cfg["scenario"] == nil {
		cfg["scenario"] = "scenario.json"
	}
	cb, _ := json.Marshal(cfg)
	return deliberation.Env{Config: cb, Seed: seed, Dir: dir, Workspace: dir, Task: "negotiate"}
}

func ofType(ms []deliberation.Message, typ string) []deliberation.Message {
	var out []deliberation.Message
	for _, m := range ms {
		if m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

func str(m deliberation.Message, k string) string {
	s, _ := m.Content[k].(string)
	return s
}

func types(ms []deliberation.Message) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Type)
	}
	return strings.Join(out, " ")
}

// ledgerJSON is the ledger with the timestamps blanked.
func ledgerJSON(t *testing.T, ms []deliberation.Message) string {
	t.Helper()
	cp := append([]deliberation.Message(nil), ms...)
	for i := range cp {
		cp[i].Timestamp = ""
	}
	b, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
