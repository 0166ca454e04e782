package parliament

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
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/schemas"
)

// harness is a fake engine, as the real one will run a game: each step it
// reloads the session from the committed messages (JSON round-tripped like
// the history), calls Next (twice: it must be pure), commits Emit, plays
// the turns with scripted answers validated against Turn.Schema, commits
// what Apply returns, and writes file_write contents into the workspace.
type harness struct {
	t        *testing.T
	cfg      Config
	raw      json.RawMessage // overrides cfg when set
	seed     int64
	ws, dir  string
	msgs     []deliberation.Message
	answer   func(h *harness, t deliberation.Turn) (map[string]any, string)
	turns    []deliberation.Turn
	speaker  [][]string // scripted Speaker tool calls, in order
	statuses []string
	calls    map[string]int
}

var fixedNow = func() time.Time { return time.Date(2026, 2, 10, 14, 30, 0, 0, time.UTC) }

func testConfig() Config {
	return Config{ProblemStatement: "How should the city fund its parks?", MaxRounds: 3, Drafter: "rep_1",
		Representatives: []RepConfig{
			{ID: "rep_1", Name: "Rep. Pragmatis", Motives: []string{"cost", "speed"}},
			{ID: "rep_2", Name: "Rep. Securitas", Motives: []string{"security"}},
			{ID: "rep_3", Name: "Rep. Usabilis", Motives: []string{"usability"}},
		}}
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, cfg: cfg, seed: 1, ws: ws, dir: dir, answer: (*harness).defaultAnswer, calls: map[string]int{}}
}

func (h *harness) env() deliberation.Env {
	raw := h.raw
	if raw == nil {
		raw, _ = json.Marshal(h.cfg)
	}
	msgs := []deliberation.Message{}
	b, _ := json.Marshal(h.msgs)
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber() // the replay must read numbers either way
	if err := dec.Decode(&msgs); err != nil {
		h.t.Fatal(err)
	}
	return deliberation.Env{Config: raw, Seed: h.seed, Task: "the task", Messages: msgs, Workspace: h.ws, Dir: h.dir, Now: fixedNow}
}

func (h *harness) load() *Session {
	h.t.Helper()
	s, err := Game{}.Load(h.env())
	if err != nil {
		h.t.Fatalf("load: %v", err)
	}
	return s.(*Session)
}

func (h *harness) commit(ms []deliberation.Message) {
	h.t.Helper()
	for _, m := range ms {
		if want := fmt.Sprintf("msg-%03d", len(h.msgs)+1); m.ID != want {
			h.t.Fatalf("message id %s, want %s", m.ID, want)
		}
		if m.Timestamp == "" {
			h.t.Fatalf("unstamped message %+v", m)
		}
		var back deliberation.Message
		b, _ := json.Marshal(m)
		if err := json.Unmarshal(b, &back); err != nil {
			h.t.Fatal(err)
		}
		if err := schemas.Validate(schemaMessage, normalize(map[string]any{"m": back})["m"]); err != nil {
			h.t.Fatalf("committed message breaks its schema: %v", err)
		}
		if fw := obj(back.Content[deliberation.FileWriteKey]); fw != nil {
			p, _, err := pathguard.Resolve(h.ws, str(fw["path"]))
			if err != nil {
				h.t.Fatal(err)
			}
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			if err := os.WriteFile(p, []byte(str(fw["content"])), 0o644); err != nil {
				h.t.Fatal(err)
			}
		}
		h.msgs = append(h.msgs, back)
	}
}

// step runs one engine step.
func (h *harness) step() *deliberation.Step {
	h.t.Helper()
	s := h.load()
	h.statuses = append(h.statuses, s.st.status)
	step, err := s.Next()
	if err != nil {
		h.t.Fatalf("Next: %v", err)
	}
	again, err := h.load().Next()
	if err != nil || !reflect.DeepEqual(normalize(step), normalize(again)) {
		h.t.Fatalf("Next is not pure: %v\n%s\n%s", err, jsonOf(step), jsonOf(again))
	}
	if len(step.Emit) > 0 && len(step.Turns) > 0 {
		h.t.Fatal("a step both emits and asks for turns")
	}
	if !step.Done && step.Wait == "" && len(step.Emit) == 0 && len(step.Turns) == 0 {
		h.t.Fatal("a step that does nothing")
	}
	h.commit(step.Emit)
	if len(step.Turns) > 0 {
		var res []deliberation.Result
		for _, t := range step.Turns {
			h.turns = append(h.turns, t)
			ans, errText := h.answer(h, t)
			h.calls[t.Role]++
			r := deliberation.Result{Turn: t, Answer: ans, Error: errText}
			if len(ans) > 0 {
				if err := schemas.Validate(t.Schema, normalize(ans)); err != nil {
					r = deliberation.Result{Turn: t, Error: err.Error()}
				}
			}
			res = append(res, r)
		}
		// Fan-out answers may arrive in any order.
		for i, j := 0, len(res)-1; i < j; i, j = i+1, j-1 {
			res[i], res[j] = res[j], res[i]
		}
		out, err := s.Apply(res)
		if err != nil {
			h.t.Fatalf("Apply: %v", err)
		}
		h.commit(out)
	}
	return step
}

// run steps until the session waits or ends (or stop says so).
func (h *harness) run(stop func(st *state) bool) *deliberation.Step {
	h.t.Helper()
	for i := 0; i < 400; i++ {
		if stop != nil && stop(h.load().st) {
			return nil
		}
		st := h.step()
		if st.Wait != "" || st.Done {
			return st
		}
	}
	h.t.Fatal("the session does not end")
	return nil
}

func (h *harness) input(decision, reason, guidance string) error {
	ms, err := h.load().Input(deliberation.Input{Kind: "pm_decision", From: deliberation.Steward, Content: map[string]any{"decision": decision, "reason": reason, "guidance": guidance}})
	if err == nil {
		h.commit(ms)
	}
	return err
}

func (h *harness) motives(id string) []string {
	for _, r := range h.cfg.Representatives {
		if r.ID == id {
			return r.Motives
		}
	}
	h.t.Fatalf("no member %s", id)
	return nil
}

func (h *harness) scores(id string, n int) map[string]any {
	m := map[string]any{}
	for _, mo := range h.motives(id) {
		m[mo] = n
	}
	return m
}

func opening(id string) map[string]any {
	return map[string]any{"type": "OPENING_STATEMENT", "content": map[string]any{
		"briefing":  map[string]any{"facts": []any{"fact of " + id}, "constraints": []any{}, "precedents": []any{}, "open_questions": []any{}},
		"direction": map[string]any{"approach": "Approach of " + id + ".", "principle": "Principle.", "trade_offs": "Some."}}}
}

func draft(title string) map[string]any {
	return map[string]any{"type": "BILL_DRAFT", "content": map[string]any{"title": title, "summary": "A bill.", "sections": map[string]any{
		"problem": "Parks lack funds.", "scope": map[string]any{"in_scope": []any{"parks"}, "out_of_scope": []any{}, "assumptions": []any{}},
		"solution": "A levy.", "implementation": "Phased."}}}
}

func askQ(to, topic, text string) map[string]any {
	return map[string]any{"type": "QUESTION", "to": to, "content": map[string]any{"topic": topic, "question": text, "motive_context": "Constituents ask."}}
}

func (h *harness) answerWith(id string, score int, stance string) map[string]any {
	return map[string]any{"type": "ANSWER", "content": map[string]any{"answer": "An answer from " + id + ".", "stance": stance, "motive_scores": h.scores(id, score)}}
}

func (h *harness) voteWith(id, v string, score int) map[string]any {
	return map[string]any{"type": "VOTE", "content": map[string]any{"vote": v, "reasoning": "Reasons of " + id + ".", "motive_scores": h.scores(id, score), "reservations": "reservation of " + id}}
}

func (h *harness) defaultAnswer(t deliberation.Turn) (map[string]any, string) {
	switch t.Kind {
	case kOpening:
		return opening(t.Participant), ""
	case kDraft:
		return draft("Parks Funding Act"), ""
	case kFloor:
		to := str(t.Data["to"])
		if to == "" {
			to = map[bool]string{true: "rep_1", false: "rep_2"}[t.Participant == "rep_2"]
		}
		return askQ(to, "topic of "+t.Participant, fmt.Sprintf("Question %d of %s in round %d?", h.calls[t.Role], t.Participant, h.load().st.round)), ""
	case kAnswer:
		return h.answerWith(t.Participant, 4, "maintain"), ""
	case kVote:
		return h.voteWith(t.Participant, "YES", 4), ""
	case kSpeaker:
		if len(h.speaker) == 0 {
			return nil, "no scripted Speaker call left"
		}
		c := h.speaker[0]
		h.speaker = h.speaker[1:]
		return map[string]any{"tool": c[0], "args": toAny(c[1:])}, ""
	}
	return nil, "unknown kind " + t.Kind
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func (h *harness) byType(typ string) []deliberation.Message {
	var out []deliberation.Message
	for _, m := range h.msgs {
		if m.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

func (h *harness) last(typ string) deliberation.Message {
	ms := h.byType(typ)
	if len(ms) == 0 {
		h.t.Fatalf("no %s message", typ)
	}
	return ms[len(ms)-1]
}

// rulings are the actions of the Speaker's rulings, in order.
func (h *harness) rulings() []string {
	var out []string
	for _, m := range h.byType(tRuling) {
		out = append(out, str(m.Content["action"]))
	}
	return out
}

// toolCalls are the Speaker's calls as "tool args... => exit".
func (h *harness) toolCalls() []string {
	var out []string
	for _, m := range h.byType(tTool) {
		n, _ := intOf(m.Content["exit_code"])
		out = append(out, fmt.Sprintf("%s %s => %d", str(m.Content["tool"]), strings.Join(strs(m.Content["args"]), " "), n))
	}
	return out
}
