package play_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/deliberation/play"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/workflow"
)

// relay is a minimal game that exercises the engine's deliberation
// machinery: the chair opens, every member speaks at once (a fan-out),
// the steward decides, done.
type relay struct{}

type relayCfg struct {
	Members []string `json:"members"`
}

type relaySession struct {
	cfg  relayCfg
	env  deliberation.Env
	msgs []deliberation.Message
}

func (relay) Name() string { return "relay" }

func (relay) Load(env deliberation.Env) (deliberation.Session, error) {
	var c relayCfg
	if err := json.Unmarshal(env.Config, &c); err != nil {
		return nil, fmt.Errorf("game: %w", err)
	}
	return &relaySession{cfg: c, env: env, msgs: env.Messages}, nil
}

func (s *relaySession) stamp(m deliberation.Message, i int) deliberation.Message {
	m.ID = fmt.Sprintf("msg-%03d", len(s.msgs)+i+1)
	m.Timestamp = s.env.Now().Format(time.RFC3339)
	return m
}

func (s *relaySession) spoke() map[string]bool {
	out := map[string]bool{}
	for _, m := range s.msgs {
		if m.Type == "SPEECH" || m.Type == deliberation.Skipped {
			out[m.From] = true
		}
	}
	return out
}

func (s *relaySession) has(typ string) bool {
	for _, m := range s.msgs {
		if m.Type == typ {
			return true
		}
	}
	return false
}

func (s *relaySession) Next() (*deliberation.Step, error) {
	if len(s.msgs) == 0 {
		return &deliberation.Step{Emit: []deliberation.Message{s.stamp(deliberation.Message{Type: "OPEN", From: "chair", Content: map[string]any{"line": "The floor is open."}}, 0)}}, nil
	}
	spoke := s.spoke()
	var turns []deliberation.Turn
	for _, p := range s.cfg.Members {
		if !spoke[p] {
			turns = append(turns, deliberation.Turn{Participant: p, Role: p, Kind: "speak", Schema: "llm-chat-schema.json",
				Prompt: fmt.Sprintf("You are %s. %d messages so far. Speak.", p, len(deliberation.Visible(s.msgs, p)))})
		}
	}
	if len(turns) > 0 {
		return &deliberation.Step{Turns: turns}, nil
	}
	if !s.has("DECISION") {
		return &deliberation.Step{Wait: "the steward decides: logist pm JOB approve"}, nil
	}
	return &deliberation.Step{Done: true, Outcome: "decided"}, nil
}

func (s *relaySession) Apply(results []deliberation.Result) ([]deliberation.Message, error) {
	var out []deliberation.Message
	for i, r := range results {
		m := deliberation.Message{Type: "SPEECH", From: r.Turn.Participant, Content: map[string]any{"summary": r.Answer["summary_for_supervisor"]}}
		if r.Answer == nil {
			m = deliberation.Message{Type: deliberation.Skipped, From: r.Turn.Participant, Content: map[string]any{"line": r.Turn.Participant + " yields.", "reason": r.Error}}
		}
		out = append(out, s.stamp(m, i))
	}
	return out, nil
}

func (s *relaySession) Input(in deliberation.Input) ([]deliberation.Message, error) {
	if d, _ := in.Content["decision"].(string); d == "bogus" {
		return nil, fmt.Errorf("%w: decision %q is not one", deliberation.ErrInvalidInput, d)
	}
	if len(s.spoke()) < len(s.cfg.Members) || s.has("DECISION") {
		return nil, errors.New("no decision is due")
	}
	return []deliberation.Message{s.stamp(deliberation.Message{Type: "DECISION", From: "prime_minister", Content: in.Content}, 0)}, nil
}

func (s *relaySession) Files() (map[string][]byte, error) {
	b, err := json.MarshalIndent(s.msgs, "", "  ")
	return map[string][]byte{"relay/ledger.json": b}, err
}

func (s *relaySession) State() string {
	switch {
	case len(s.msgs) == 0:
		return "closed"
	case s.has("DECISION"):
		return "decided"
	case len(s.spoke()) == len(s.cfg.Members):
		return "awaiting decision"
	}
	return "speeches"
}

type fx struct {
	*testkit.Fixture
	eng *runner.Engine
	st  *steward.Steward
}

func newFx(t *testing.T) *fx {
	t.Helper()
	k := testkit.New(t)
	// The built-in effects and the test's own game, as a composition
	// root would hand them over.
	effects := builtins.Effects()
	effect.Add(effects, play.Effects(relay{}))
	eng := runner.NewEngine(k.Env, effects)
	eng.Sleep = func(ctx context.Context, _ time.Duration) error { return ctx.Err() }
	k.Runner = eng
	return &fx{Fixture: k, eng: eng, st: steward.New(k.Env, effects)}
}

func (f *fx) write(id string, agents map[string]any) {
	wf := map[string]any{"name": "relay", "start": "session", "phases": map[string]any{
		"session": map[string]any{"role": "logist", "status": "RUNNING", "effect": "deliberation.relay",
			"on": map[string]any{"COMPLETED": "SUCCESS", "RETRY": "session", "STUCK": "INTERVENTION_REQUIRED"}}}}
	members := []string{}
	for k := range agents {
		members = append(members, k)
	}
	if len(members) > 1 && members[0] > members[1] {
		members[0], members[1] = members[1], members[0]
	}
	m := map[string]any{"schema_version": 1, "job_id": id, "task_description": "Relay.", "workflow": wf, "agents": agents,
		"game": map[string]any{"members": members}, "metrics": map[string]any{"cumulative_cost": 0, "cumulative_time_seconds": 0}}
	f.WriteJob(id, m)
}

// run runs job id until it stops or ctx ends, and returns its manifest.
func (f *fx) run(ctx context.Context, id string) *manifest.Manifest {
	f.T.Helper()
	if err := f.eng.Run(ctx, id); err != nil {
		f.T.Fatal(err)
	}
	return f.Load(id)
}

func (f *fx) ledger(id string) string {
	var out []string
	for _, r := range f.Records(id) {
		if r.Type == history.TypeMessage {
			var m deliberation.Message
			if err := json.Unmarshal(r.Message, &m); err != nil {
				f.T.Fatal(err)
			}
			out = append(out, m.Type+":"+m.From)
		}
	}
	return strings.Join(out, " ")
}

func answer(summary string) *agent.Result {
	b, _ := json.Marshal(map[string]any{"action": "COMPLETED", "evidence_files": []string{}, "summary_for_supervisor": summary})
	return &agent.Result{Raw: b}
}

type provider func(ctx context.Context, req *agent.Request) (*agent.Result, error)

func (p provider) Call(ctx context.Context, req *agent.Request) (*agent.Result, error) {
	return p(ctx, req)
}

func script() map[string]any {
	return map[string]any{"provider": "script", "script": []any{map[string]any{"action": "COMPLETED", "summary": "hi"}}}
}

func TestFanOutWaitDecideDone(t *testing.T) {
	f := newFx(t)
	f.write("j", map[string]any{"a": script(), "b": script()})
	var inFlight, most atomic.Int32
	var calls sync.Map
	f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			n := inFlight.Add(1)
			defer inFlight.Add(-1)
			for {
				if m := most.Load(); n <= m || most.CompareAndSwap(m, n) {
					break
				}
			}
			c, _ := calls.LoadOrStore(req.Role, new(atomic.Int32))
			c.(*atomic.Int32).Add(1)
			time.Sleep(150 * time.Millisecond) // long enough for the other member to be called too
			return answer(req.Role + " speaks"), nil
		}), nil
	}
	m := f.run(context.Background(), "j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingSteward || m.Run.WorkflowState != "awaiting decision" {
		t.Fatalf("job %s %s %q (%s)", m.Status, m.Run.ErrorCode, m.Run.WorkflowState, m.Run.Reason)
	}
	if most.Load() != 2 {
		t.Errorf("the fan-out ran %d calls at once, want 2", most.Load())
	}
	if got := f.ledger("j"); got != "OPEN:chair SPEECH:a SPEECH:b" {
		t.Errorf("ledger %s", got)
	}
	if _, err := f.st.Decide("j", deliberation.Input{Kind: "pm_decision", Content: map[string]any{"decision": "approve"}}); err != nil {
		t.Fatal(err)
	}
	// A decision that is not due is out of order.
	if _, err := f.st.Decide("j", deliberation.Input{Kind: "pm_decision"}); !jobtx.IsOutOfOrder(err) {
		t.Errorf("second decision: %v", err)
	}
	m = f.run(context.Background(), "j")
	if m.Status != lifecycle.Success || m.Run.WorkflowState != "decided" {
		t.Fatalf("job %s %q (%s)", m.Status, m.Run.WorkflowState, m.Run.Reason)
	}
	for _, role := range []string{"a", "b"} {
		if c, _ := calls.Load(role); c.(*atomic.Int32).Load() != 1 {
			t.Errorf("%s was called %d times", role, c.(*atomic.Int32).Load())
		}
	}
	b, err := os.ReadFile(filepath.Join(f.Dir, "j", "relay", "ledger.json"))
	if err != nil || !strings.Contains(string(b), "DECISION") {
		t.Errorf("materialised ledger: %v %s", err, b)
	}
}

// A step that only emits (the chair opens) leaves the job showing the
// game's state after what it emitted, even when the job stops right after
// it: here the next step cannot go on (a member has no agent).
func TestEmitStepKeepsTheStateItLeaves(t *testing.T) {
	f := newFx(t)
	f.write("j", map[string]any{"a": script()})
	p := filepath.Join(f.Dir, "j", jobstore.ManifestFile)
	b, _ := os.ReadFile(p)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["game"] = map[string]any{"members": []string{"a", "nobody"}}
	b, _ = json.Marshal(m)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	got := f.run(context.Background(), "j")
	if got.Run.ErrorCode != codes.GameRole {
		t.Fatalf("job %s %s (%s)", got.Status, got.Run.ErrorCode, got.Run.Reason)
	}
	if got.Run.WorkflowState != "speeches" {
		t.Errorf("workflow_state = %q, want the state the OPEN left (speeches)", got.Run.WorkflowState)
	}
	if l := f.ledger("j"); l != "OPEN:chair" {
		t.Errorf("ledger %s", l)
	}
}

func TestFailedTurnIsSkipped(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", map[string]any{"a": script(), "b": script()})
	f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			if req.Role == "b" {
				return &agent.Result{Raw: []byte("not json at all")}, nil
			}
			return answer("a speaks"), nil
		}), nil
	}
	f.run(context.Background(), "j")
	if got := f.ledger("j"); got != "OPEN:chair SPEECH:a SKIPPED:b" {
		t.Errorf("ledger %s", got)
	}
}

func TestHumanRoleWaitsForReply(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", map[string]any{"a": script(), "b": map[string]any{"provider": "human"}})
	var aCalls atomic.Int32
	inner := f.eng.NewProvider
	f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		p, err := inner(cfg)
		if cfg.Provider == "script" {
			return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
				aCalls.Add(1)
				return p.Call(ctx, req)
			}), err
		}
		return p, err
	}
	m := f.run(context.Background(), "j")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.AwaitingReply || !strings.Contains(m.Run.Reason, "logist reply") {
		t.Fatalf("job %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	// A reply that would fail an agent's validation is refused.
	var inv *steward.InvalidReplyError
	if _, err := f.st.Reply("j", "b", []byte(`{"action": "COMPLETED"}`)); !errors.As(err, &inv) {
		t.Fatalf("invalid reply: %v", err)
	}
	if _, err := f.st.Reply("j", "a", answer("x").Raw); !jobtx.IsOutOfOrder(err) {
		t.Errorf("reply for a role that is not waiting: %v", err)
	}
	if _, err := f.st.Reply("j", "b", answer("the human speaks").Raw); err != nil {
		t.Fatal(err)
	}
	m = f.run(context.Background(), "j")
	if m.Run.ErrorCode != codes.AwaitingSteward {
		t.Fatalf("after the reply: %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if got := f.ledger("j"); got != "OPEN:chair SPEECH:a SPEECH:b" {
		t.Errorf("ledger %s", got)
	}
	if aCalls.Load() != 1 {
		t.Errorf("a was asked %d times; its answer waited with the human's turn and must not be paid twice", aCalls.Load())
	}
}

func TestRestartMidFanOutAsksTheSameTurnsAgain(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", map[string]any{"a": script(), "b": script()})
	var prompts sync.Map
	started := make(chan struct{}, 2)
	block := true
	var mu sync.Mutex
	f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			prev, loaded := prompts.LoadOrStore(req.Role, req.Prompt)
			if loaded && prev != req.Prompt {
				t.Errorf("%s asked again with another prompt", req.Role)
			}
			mu.Lock()
			b := block
			mu.Unlock()
			if b {
				started <- struct{}{}
				<-ctx.Done() // the daemon stops mid-call
				return nil, ctx.Err()
			}
			return answer(req.Role + " speaks"), nil
		}), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; <-started; cancel() }()
	_ = f.eng.Run(ctx, "j") // stopped mid-call on purpose: what it left is checked below
	mu.Lock()
	block = false
	mu.Unlock()
	f.run(context.Background(), "j")
	if got := f.ledger("j"); got != "OPEN:chair SPEECH:a SPEECH:b" {
		t.Errorf("ledger %s", got)
	}
	recs := f.Records("j")
	interrupted := 0
	for _, r := range recs {
		if r.Response != nil && r.Response.ErrorCode == codes.AgentInterrupted {
			interrupted++
		}
	}
	if interrupted != 2 {
		t.Errorf("%d cut-off calls recorded as interrupted, want 2", interrupted)
	}
	var _ = workflow.OutcomeContinue
}

// logLines are the JSON lines a test logger wrote.
func logLines(t *testing.T, buf *testkit.SyncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// A turn's failed attempts are never silent: each retried attempt is
// logged with seed 004 §7.2's fields and recorded as an error event, the
// turn's response carries its last attempt's number, and a turn that
// still fails is logged and its skip too.
func TestTurnFailuresAreLoggedAndRecorded(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	var buf testkit.SyncBuffer
	f.Env.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	f.write("j", map[string]any{"a": script(), "b": script()})
	var bCalls atomic.Int32
	f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			if req.Role == "a" {
				return nil, &agent.Error{Code: codes.APIError, Msg: "400 bad request"}
			}
			if bCalls.Add(1) == 1 {
				return nil, &agent.Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: "stream broke"}
			}
			return answer("b speaks"), nil
		}), nil
	}
	f.run(context.Background(), "j")
	if got := f.ledger("j"); got != "OPEN:chair SKIPPED:a SPEECH:b" {
		t.Errorf("ledger %s", got)
	}
	recs := f.Records("j")
	var errRecs []string
	for _, r := range recs {
		if r.Type == history.TypeError {
			errRecs = append(errRecs, fmt.Sprintf("%s/%s/%d", r.Role, r.Error.Code, r.Attempt))
		}
		if r.Type == history.TypeResponse && r.Role == "b" && r.Attempt != 2 {
			t.Errorf("b's response records attempt %d, want 2", r.Attempt)
		}
	}
	if strings.Join(errRecs, " ") != "b/"+codes.StreamCut+"/1" {
		t.Errorf("error records %v, want b's cut first attempt", errRecs)
	}
	want := map[string]string{"b/" + codes.StreamCut: "error", "a/" + codes.APIError: "error", "a/" + codes.TurnSkipped: "warning"}
	for _, l := range logLines(t, &buf) {
		k := fmt.Sprint(l["actor"], "/", l["error_code"])
		typ, ok := want[k]
		if !ok {
			continue
		}
		for _, field := range []string{"job_id", "status", "attempt", "checkpoint_id", "phase"} {
			if _, ok := l[field]; !ok {
				t.Errorf("log line %v lacks %s", l, field)
			}
		}
		if l["type"] != typ || l["job_id"] != "j" || l["phase"] != "session" {
			t.Errorf("log line %v", l)
		}
		delete(want, k)
	}
	if len(want) != 0 {
		t.Errorf("not logged: %v\n%s", want, buf.String())
	}
}

// demoNegotiation writes the shipped negotiation demo as job id, with a
// stance helper played by role "helper" if helper is set.
func (f *fx) demoNegotiation(id string, helper bool) {
	f.T.Helper()
	root := filepath.Join("..", "..", "..", "jobs", "demo-negotiation")
	b, err := os.ReadFile(filepath.Join(root, "job.json"))
	if err != nil {
		f.T.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		f.T.Fatal(err)
	}
	m["job_id"] = id
	if helper {
		m["game"].(map[string]any)["helper"] = "helper"
		m["agents"].(map[string]any)["helper"] = map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"true"}}}
	}
	f.WriteJob(id, m)
	sc, err := os.ReadFile(filepath.Join(root, "scenario.json"))
	if err != nil {
		f.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.Dir, id, "scenario.json"), sc, 0o600); err != nil {
		f.T.Fatal(err)
	}
}

// Seed 004 §4.4: the game never waits for the stance helper. A helper that
// takes far longer than the parties' turns does not slow the game; each of
// its cut calls is recorded late and the game logs why it ignored it.
func TestStanceHelperNeverBlocksTheGame(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.demoNegotiation("j", true)
	inner := f.eng.NewProvider
	var helperCalls atomic.Int32
	f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		if cfg.Provider == "command" {
			return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
				helperCalls.Add(1)
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(5 * time.Second):
					return nil, errors.New("the helper was waited for")
				}
			}), nil
		}
		return inner(cfg)
	}
	start := time.Now()
	m := f.run(context.Background(), "j")
	if took := time.Since(start); took > 60*time.Second {
		t.Errorf("the game took %s: it waited for the helper", took)
	}
	if m.Status != lifecycle.Success {
		t.Fatalf("job %s %s (%s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if helperCalls.Load() == 0 {
		t.Fatal("the helper was never asked")
	}
	late := 0
	for _, r := range f.Records("j") {
		if r.Type == history.TypeResponse && r.Role == "helper" {
			if r.Response.ErrorCode != codes.TurnLate {
				t.Errorf("a helper response %s: %s", r.Response.ErrorCode, r.Response.Error)
			}
			late++
		}
	}
	ignored := strings.Count(f.ledger("j"), "HELPER_IGNORED")
	if late == 0 || ignored != late {
		t.Errorf("%d late helper responses, %d HELPER_IGNORED messages", late, ignored)
	}
}

// A steward's input the game refuses for what it says is invalid input
// (exit code 1), not out of order (2), whatever the job's state.
func TestMalformedDecisionIsInvalidInput(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", map[string]any{"a": script()})
	f.run(context.Background(), "j")
	_, err := f.st.Decide("j", deliberation.Input{Kind: "pm_decision", Content: map[string]any{"decision": "bogus"}})
	if err == nil || jobtx.IsOutOfOrder(err) || !errors.Is(err, deliberation.ErrInvalidInput) {
		t.Fatalf("a malformed decision: %v (out of order: %v)", err, jobtx.IsOutOfOrder(err))
	}
	if _, err := f.st.Decide("j", deliberation.Input{Kind: "pm_decision", Content: map[string]any{"decision": "approve"}}); err != nil {
		t.Fatalf("the refused input changed the job: %v", err)
	}
}

// A halted job no longer waits for anyone: it does not keep the waiting
// code (AWAITING_REPLY) it had.
func TestHaltClearsTheWaitingCode(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", map[string]any{"a": script(), "b": map[string]any{"provider": "human"}})
	if m := f.run(context.Background(), "j"); m.Run.ErrorCode != codes.AwaitingReply {
		t.Fatalf("job %s %s", m.Status, m.Run.ErrorCode)
	}
	if _, err := f.st.Halt("j", "enough"); err != nil {
		t.Fatal(err)
	}
	if m := f.Load("j"); m.Status != lifecycle.Canceled || m.Run.ErrorCode != "" {
		t.Errorf("halted job: %s, error code %q", m.Status, m.Run.ErrorCode)
	}
}

// A game that ends says so: its last transition names the game and its
// outcome, not "phase session had nothing to do".
func TestFinishedGameSaysItIsOver(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", map[string]any{"a": script()})
	f.run(context.Background(), "j")
	if _, err := f.st.Decide("j", deliberation.Input{Kind: "pm_decision", Content: map[string]any{"decision": "approve"}}); err != nil {
		t.Fatal(err)
	}
	if m := f.run(context.Background(), "j"); m.Status != lifecycle.Success {
		t.Fatalf("job %s", m.Status)
	}
	var last *history.Transition
	for _, r := range f.Records("j") {
		if r.Transition != nil {
			last = r.Transition
		}
	}
	if last == nil || last.To != string(lifecycle.Success) || last.Reason != "the relay is over: decided" {
		t.Errorf("last transition %+v", last)
	}
}

// A configuration naming a role with no agent in the manifest (here the
// stance helper) is refused before any turn is asked, with the check
// logist validate makes (deliberation.CheckRoles), naming the field.
func TestRunRefusesARoleWithoutAnAgentFirst(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.demoNegotiation("j", true)
	p := filepath.Join(f.Dir, "j", "job.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"helper": "helper"`, `"helper": "ghost"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	m := f.run(context.Background(), "j")
	if m.Run.ErrorCode != codes.GameRole || !strings.Contains(m.Run.Reason, `game.helper: "ghost" is not an agent of the manifest`) {
		t.Errorf("job %s %s (%s), want GAME_ROLE naming game.helper", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if n := len(testkit.OfType(f.Records("j"), history.TypeIntent)); n != 0 {
		t.Errorf("%d turns were asked before the refusal", n)
	}
}

// A member's turn whose CLI reported a cost of its own that disagrees with
// the metering proxy's is recorded like a supervised answer: the proxy's
// figure is the cost of record, the CLI's is kept beside it, and the
// turn's response carries the COST_DISAGREEMENT warning, logged with seed
// 004 §7's fields.
func TestTurnCostDisagreementWarns(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	var buf testkit.SyncBuffer
	f.Env.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	f.write("j", map[string]any{"a": script(), "b": script()})
	reported := 0.5
	f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			r := answer(req.Role + " speaks")
			r.CostUSD = 0.01
			if req.Role == "a" {
				r.Metered = &agent.Metered{Requests: 1, ReportedUSD: &reported, Disagreement: "metered $0.01, agent reported $0.5"}
			} else {
				r.Metered = &agent.Metered{Requests: 1}
			}
			return r, nil
		}), nil
	}
	f.run(context.Background(), "j")
	if got := f.ledger("j"); got != "OPEN:chair SPEECH:a SPEECH:b" {
		t.Fatalf("ledger %s", got)
	}
	for _, r := range testkit.OfType(f.Records("j"), history.TypeResponse) {
		resp := r.Response
		if !resp.Metered || resp.CostUSD != 0.01 {
			t.Errorf("%s: response %+v", r.Role, resp)
		}
		warned := len(resp.Warnings) == 1 && strings.HasPrefix(resp.Warnings[0], codes.CostDisagreement+": ")
		if r.Role == "a" && (!warned || resp.ReportedCostUSD == nil || *resp.ReportedCostUSD != 0.5) {
			t.Errorf("a: warnings %q reported %v, want COST_DISAGREEMENT and $0.5", resp.Warnings, resp.ReportedCostUSD)
		}
		if r.Role == "b" && len(resp.Warnings) != 0 {
			t.Errorf("b: warnings %q, want none", resp.Warnings)
		}
	}
	var logged bool
	for _, l := range logLines(t, &buf) {
		if l["error_code"] != codes.CostDisagreement {
			continue
		}
		logged = true
		if l["actor"] != "a" || l["type"] != "warning" || l["job_id"] != "j" || l["phase"] != "session" {
			t.Errorf("log line %v", l)
		}
		for _, field := range []string{"status", "attempt", "checkpoint_id"} {
			if _, ok := l[field]; !ok {
				t.Errorf("log line %v lacks %s", l, field)
			}
		}
	}
	if !logged {
		t.Errorf("COST_DISAGREEMENT not logged:\n%s", buf.String())
	}
}

// A turn's call runs on a goroutine of its own; its panic ends the run
// (RunFrom returns the fault, with the turn's stack) instead of the
// process, after the other turns have come back. Run again without the
// fault, the step's turns are asked again and the game goes on.
func TestTurnPanicEndsTheRunNotTheProcess(t *testing.T) {
	t.Parallel()
	f := newFx(t)
	f.write("j", map[string]any{"a": script(), "b": script()})
	var faulty atomic.Bool
	faulty.Store(true)
	f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
		return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			if req.Role == "b" && faulty.Load() {
				var none map[string][]int
				return answer(fmt.Sprint(none[req.Role][1])), nil
			}
			return answer(req.Role + " speaks"), nil
		}), nil
	}
	err := f.eng.Run(context.Background(), "j")
	if err == nil || !strings.Contains(err.Error(), "fault of Logist's (panic: runtime error: index out of range [1] with length 0)") {
		t.Fatalf("Run: %v", err)
	}
	faulty.Store(false)
	f.run(context.Background(), "j")
	if got := f.ledger("j"); got != "OPEN:chair SPEECH:a SPEECH:b" {
		t.Errorf("ledger %s", got)
	}
}

// H140: the storage refuses a turn's request file (requests/NNNNNN.json of
// a command agent): a full disk, or access denied. It is the job's storage
// failing, not the turn's agent: no agent is started, no turn is skipped
// or recorded as failed, and the job stalls (STORAGE_WRITE,
// STORAGE_DENIED) and is run again with backoff; once the file is taken,
// every turn is asked once and the game goes on. Before, the provider
// wrote the file itself and the turn ended in AGENT_START, skipped.
func TestTurnRequestFileRefusedStallsJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		errno syscall.Errno
		code  string
	}{{syscall.ENOSPC, codes.StorageWrite}, {syscall.EACCES, codes.StorageDenied}} {
		t.Run(tc.code, func(t *testing.T) {
			t.Parallel()
			f := newFx(t)
			var buf testkit.SyncBuffer
			f.Env.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
			speak := func(role string) map[string]any {
				ans := fmt.Sprintf(`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"%s speaks"}`, role)
				return map[string]any{"provider": "command", "command": map[string]any{
					"argv": []string{"sh", "-c", `cat "$1" >/dev/null && echo "$2"`, "agent", "{request_file}", ans}}}
			}
			f.write("j", map[string]any{"a": speak("a"), "b": speak("b")})
			var refusing atomic.Bool
			refusing.Store(true)
			var refused atomic.Int32
			f.eng.WriteRequest = func(jobDir string, n int, body []byte) error {
				// b's file only: a's is taken, and a is not asked either.
				if refusing.Load() && strings.Contains(string(body), `"role": "b"`) {
					refused.Add(1)
					return &os.PathError{Op: "open", Path: agent.RequestFile(jobDir, n), Err: tc.errno}
				}
				return agent.WriteRequest(jobDir, n, body)
			}
			var asked sync.Map
			f.eng.NewProvider = func(cfg manifest.AgentConfig) (agent.Provider, error) {
				p, err := agent.New(cfg)
				if err != nil {
					return nil, err
				}
				return provider(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
					c, _ := asked.LoadOrStore(req.Role, new(atomic.Int32))
					c.(*atomic.Int32).Add(1)
					return p.Call(ctx, req)
				}), nil
			}
			timesAsked := func(role string) int32 {
				if c, ok := asked.Load(role); ok {
					return c.(*atomic.Int32).Load()
				}
				return 0
			}
			stalled := func() int {
				n := 0
				for _, l := range logLines(t, &buf) {
					if l["job_id"] == "j" && l["error_code"] == tc.code && l["msg"] == "storage error: job paused, will run again" {
						n++
					}
				}
				return n
			}
			s := runner.NewScheduler(context.Background(), f.eng, 4, f.Env.Logger)
			s.StorageRetryInitial, s.StorageRetryMax = 10*time.Millisecond, 40*time.Millisecond
			t.Cleanup(func() { s.Stop(runner.ErrShutdown) })
			s.Nudge("j")

			// (Or an agent asked: it would not be again.)
			testkit.WaitFor(t, "three stalled attempts", 10*time.Second, func() bool {
				return stalled() >= 3 || timesAsked("a")+timesAsked("b") > 0
			})
			if a, b := timesAsked("a"), timesAsked("b"); a+b != 0 {
				t.Errorf("agents asked while the storage refused b's request file: a %d, b %d", a, b)
			}
			if st, ok := f.Env.Store.ReadStall("j"); !ok || st.Code != tc.code || st.Refused || !strings.Contains(st.Reason, "request file") ||
				!strings.Contains(st.Reason, tc.errno.Error()) {
				t.Errorf("stall note %+v, %v", st, ok)
			}
			if m := f.Load("j"); !m.Status.Active() || m.Run.ErrorCode != "" || m.Run.APIFailures != 0 || m.Metrics.AgentCalls != 0 {
				t.Errorf("while stalled: %s, error code %q, api failures %d, agent calls %d", m.Status, m.Run.ErrorCode, m.Run.APIFailures, m.Metrics.AgentCalls)
			}
			// Nothing recorded for the turns while it stalls: no intent to
			// abandon and make again at every attempt.
			for _, r := range f.Records("j") {
				if r.Type == history.TypeIntent || r.Type == history.TypeResponse {
					t.Errorf("recorded while stalled: %s of %s (interaction %v)", r.Type, r.Role, *r.Interaction)
				}
			}
			if l := f.ledger("j"); l != "OPEN:chair" {
				t.Errorf("ledger while stalled %s", l)
			}

			refusing.Store(false)
			testkit.WaitFor(t, "the turns played once the file is taken", 10*time.Second, func() bool {
				return f.Load("j").Run.ErrorCode == codes.AwaitingSteward
			})
			if l := f.ledger("j"); l != "OPEN:chair SPEECH:a SPEECH:b" {
				t.Errorf("ledger %s, want both turns played", l)
			}
			if a, b := timesAsked("a"), timesAsked("b"); a != 1 || b != 1 {
				t.Errorf("a asked %d times, b %d; want once each", a, b)
			}
			intents := 0
			for _, r := range f.Records("j") {
				if r.Type == history.TypeIntent {
					intents++
				}
				if r.Response != nil && r.Response.Status == history.StatusError {
					t.Errorf("an error response was recorded: %s %s", r.Response.ErrorCode, r.Response.Error)
				}
			}
			if intents != 2 {
				t.Errorf("%d intents, want 2", intents)
			}
			for _, l := range logLines(t, &buf) {
				if c := l["error_code"]; c == codes.AgentStart || c == codes.TurnSkipped || c == codes.RunFailed {
					t.Errorf("logged %s: %v", c, l)
				}
			}
			if m := f.Load("j"); m.Run.APIFailures != 0 || m.Metrics.AgentCalls != 2 {
				t.Errorf("api failures %d, agent calls %d; want 0 and 2", m.Run.APIFailures, m.Metrics.AgentCalls)
			}
			// The scheduler clears the note as the run that got past the
			// stall ends, a moment after the job's last commit.
			testkit.WaitFor(t, "the stall note cleared", 10*time.Second, func() bool {
				_, ok := f.Env.Store.ReadStall("j")
				return !ok
			})
			if refused.Load() < 3 {
				t.Errorf("the storage refused %d writes", refused.Load())
			}
		})
	}
}
