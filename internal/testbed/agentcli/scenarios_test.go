package agentcli

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/testbed/modelstub"
)

// The scenarios every agent CLI goes through. Each program's test file
// describes the program (a cliProgram), calls the scenarios from its own
// tests and adds its own checks to what a scenario returns.

// stubHello is the content of hello.txt the stub asks a program to write.
const stubHello = "hello from the stub\n"

// taskText starts the job's task description (runJob): the prompt the
// model must see.
const taskText = "Create the file the model asks for"

// retryAnswer asks for one more pass: the phase runs again.
const retryAnswer = `{"action":"RETRY","evidence_files":["hello.txt"],"summary_for_supervisor":"hello.txt is there; one more pass is needed."}`

// gpt4oMini is what two replies of 1200 tokens in (200 of them cached)
// and 80 out cost as gpt-4o-mini (prices.json): 2000 uncached × $0.15 +
// 400 cached × $0.075 + 160 × $0.60 per million. Qwen Code, OpenCode and
// Cline report no cost for it, so Logist prices the tokens.
const gpt4oMini = (2000*0.15 + 400*0.075 + 160*0.6) / 1e6

// gpt4oMiniCost is the cost range succeeds accepts for gpt4oMini.
var gpt4oMiniCost = [2]float64{gpt4oMini * 0.999, gpt4oMini * 1.001}

// cliProgram is what the scenarios need to know of one agent CLI.
type cliProgram struct {
	name  string // as in scripts/agent-versions.txt; also command.preset
	bin   string // the program in node_modules/.bin
	id    string // the prefix of the test jobs' ids
	model string
	// path is added to the stub's URL for command.base_url.
	path string
	// keyVar is the API key variable; the stub takes any key, and the
	// daemon's own key (if any) is not used.
	keyVar, key string
	// usage is what the stub reports per reply.
	usage modelstub.Usage
	// write is the program's own file-write tool.
	write string
	// hello is hello.txt as the program writes the stub's file, when that
	// is not stubHello.
	hello string
	// command adds program-specific fields to command (nil: none).
	command func(t *testing.T, bin string) map[string]any
}

// agent is the role's agent config: the program's preset against the
// stub, with extra command fields.
func (p *cliProgram) agent(t *testing.T, bin string, s *modelstub.Server, extra map[string]any) map[string]any {
	cmd := map[string]any{"preset": p.name, "program": bin, "base_url": s.URL + p.path,
		"env": map[string]any{p.keyVar: p.key}}
	if p.command != nil {
		for k, v := range p.command(t, bin) {
			cmd[k] = v
		}
	}
	for k, v := range extra {
		cmd[k] = v
	}
	return map[string]any{"provider": "command", "model": p.model, "command": cmd}
}

// helloText is hello.txt as the program writes it.
func (p *cliProgram) helloText() string {
	if p.hello != "" {
		return p.hello
	}
	return stubHello
}

// start returns the installed program (or skips the test) and a stub that
// has it write hello.txt, then answers COMPLETED (or answers in turn).
func (p *cliProgram) start(t *testing.T, answers ...string) (string, *modelstub.Server) {
	t.Helper()
	bin := requireAgent(t, p.name, p.bin)
	s := startStub(t, modelstub.Options{Write: modelstub.FileWrite{Path: "hello.txt", Content: stubHello},
		Answer: answer("hello.txt"), Answers: answers, Usage: p.usage})
	return bin, s
}

// run runs the job <id>-<suffix> with the program as its worker.
func (p *cliProgram) run(t *testing.T, suffix, bin string, s *modelstub.Server, cmdExtra, jobExtra map[string]any) *jobRun {
	t.Helper()
	return runJob(t, p.id+"-"+suffix, p.agent(t, bin, s, cmdExtra), jobExtra)
}

// outcome is what a scenario leaves for the program's own checks.
type outcome struct {
	r  *jobRun
	s  *modelstub.Server
	rs []*history.Response
	// main are the main-conversation requests the stub received.
	main []modelstub.Logged
}

// requireHello checks that the program wrote hello.txt.
func (p *cliProgram) requireHello(t *testing.T, r *jobRun) {
	t.Helper()
	if got := r.workspaceFile(t, "hello.txt"); got != p.helloText() {
		t.Errorf("hello.txt = %q", got)
	}
}

// succeeds runs the one-call job: two model requests (the program's own
// write tool, then the answer) make one COMPLETED response with a
// session, the two replies' tokens summed and costing cost[0] to cost[1];
// nothing but the model API was called.
func (p *cliProgram) succeeds(t *testing.T, cost [2]float64) outcome {
	t.Helper()
	return p.succeedsUnder(t, "", cost)
}

// succeedsUnder is succeeds with the job's sandbox set to layer ("": the
// daemon's default).
func (p *cliProgram) succeedsUnder(t *testing.T, layer string, cost [2]float64) outcome {
	t.Helper()
	bin, s := p.start(t)
	var extra map[string]any
	suffix := "ok"
	if layer != "" {
		extra, suffix = map[string]any{"sandbox": layer}, "ok-"+layer
	}
	r := p.run(t, suffix, bin, s, nil, extra)
	r.requireStatus(t, "SUCCESS")
	p.requireHello(t, r)
	rs := r.responses()
	if len(rs) != 1 {
		t.Fatalf("responses %s%s", codes(rs), errorDetails(rs))
	}
	resp := rs[0]
	if resp.Action != "COMPLETED" || resp.SessionID == "" {
		t.Errorf("response %+v", resp)
	}
	if tk, u := resp.Tokens, p.usage; tk == nil || tk.Input != 2*u.Input || tk.Output != 2*u.Output || tk.Cache != 2*u.Cached {
		t.Errorf("tokens %+v", resp.Tokens)
	}
	if resp.CostUSD < cost[0] || resp.CostUSD > cost[1] {
		t.Errorf("cost %v, want %v to %v", resp.CostUSD, cost[0], cost[1])
	}
	main := mainRequests(s)
	if len(main) != 2 {
		t.Fatalf("%d main requests, want 2", len(main))
	}
	p.requireMetered(t, r, resp, main)
	for _, l := range s.Requests() {
		if l.Turn == nil {
			t.Errorf("unexpected request %s %s", l.Method, l.Path)
		}
	}
	if tc := main[0].Reply.ToolCall; tc == nil || tc.Name != p.write {
		t.Errorf("first reply %+v, want a call of %s", main[0].Reply, p.write)
	}
	// The call's scratch folder (its TMPDIR) went with the call.
	if left, _ := filepath.Glob(filepath.Join(r.Dir, r.ID, "requests", "*.d")); len(left) > 0 {
		t.Errorf("call folders left behind: %v", left)
	}
	return outcome{r: r, s: s, rs: rs, main: main}
}

// toolList is the tools a request offered, comma-separated.
func toolList(l modelstub.Logged) string {
	var names []string
	for _, tl := range l.Turn.Tools {
		names = append(names, tl.Name)
	}
	return strings.Join(names, ",")
}

// requireHeader checks a request header.
func requireHeader(t *testing.T, l modelstub.Logged, name, want string) {
	t.Helper()
	if got := l.Header.Get(name); got != want {
		t.Errorf("%s header %q, want %q", name, got, want)
	}
}

// requireSystem checks that the system prompt carries Logist's answer
// contract (the words given).
func requireSystem(t *testing.T, l modelstub.Logged, words ...string) {
	t.Helper()
	for _, w := range words {
		if !strings.Contains(l.Turn.System, w) {
			t.Errorf("the system prompt lacks %q: …%s", w, tail(l.Turn.System, 600))
		}
	}
}

// authFailure: a 401 stops the job for the steward, and it is not asked
// again (the spare 401s are there in case the program retried it).
func (p *cliProgram) authFailure(t *testing.T) {
	t.Helper()
	bin, s := p.start(t)
	s.Fail(modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401}, modelstub.Failure{Status: 401})
	r := p.run(t, "auth", bin, s, nil, nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AUTH_FAILED" {
		t.Fatalf("responses %s%s", codes(rs), errorDetails(rs))
	}
	if n := s.MainTurns(); n != 1 {
		t.Errorf("a 401 was asked again: %d requests", n)
	}
}

// transientErrors is for a program whose own retries are off: a 429, a
// 500 and then serverStatus are each Logist's to retry, and each is on
// the record; then the write call and the answer.
func (p *cliProgram) transientErrors(t *testing.T, serverStatus int) outcome {
	t.Helper()
	bin, s := p.start(t)
	s.Fail(modelstub.Failure{Status: 429, RetryAfter: "1"}, modelstub.Failure{Status: 500}, modelstub.Failure{Status: serverStatus})
	return p.transient(t, bin, s, 4, "ERROR:RATE_LIMITED ERROR:API_ERROR ERROR:API_ERROR SUCCESS", 5)
}

// outlastsRetries is for a program that retries a 429 or 5xx by itself
// (attempts requests in all, not configurable): more failures than that,
// of each kind, so that Logist sees each; retryAfter is sent with them.
func (p *cliProgram) outlastsRetries(t *testing.T, attempts, serverStatus int, retryAfter string) outcome {
	t.Helper()
	bin, s := p.start(t)
	for i := 0; i < attempts; i++ {
		s.Fail(modelstub.Failure{Status: 429, RetryAfter: retryAfter})
	}
	for i := 0; i < attempts; i++ {
		s.Fail(modelstub.Failure{Status: serverStatus, RetryAfter: retryAfter})
	}
	return p.transient(t, bin, s, 3, "ERROR:RATE_LIMITED ERROR:API_ERROR SUCCESS", 2*attempts+2)
}

// transient runs the job against the queued failures: it succeeds with
// the response codes want after requests main requests (failures, the
// write call, the answer).
func (p *cliProgram) transient(t *testing.T, bin string, s *modelstub.Server, retries int, want string, requests int) outcome {
	t.Helper()
	start := time.Now()
	r := p.run(t, "transient", bin, s, nil, limits(retries, 120))
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if got := codes(rs); got != want {
		t.Errorf("responses %s, want %s%s", got, want, errorDetails(rs))
	}
	p.requireHello(t, r)
	if n := s.MainTurns(); n != requests {
		t.Errorf("%d main requests, want %d", n, requests)
	}
	// The programs' own backoff (seconds, doubling) would take far longer.
	t.Logf("%d calls in %v", len(rs), time.Since(start))
	return outcome{r: r, s: s, rs: rs, main: mainRequests(s)}
}

// brokenStreams serves a stream cut in the middle of the answer, then a
// reply that is not JSON: the job still succeeds, with the response codes
// want, both failures served and no partial answer on the record.
func (p *cliProgram) brokenStreams(t *testing.T, want string) outcome {
	t.Helper()
	bin, s := p.start(t)
	s.Fail(modelstub.Failure{Cut: true}, modelstub.Failure{Malformed: true})
	r := p.run(t, "broken", bin, s, nil, limits(3, 120))
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	t.Logf("responses: %s; model requests: %d", codes(rs), s.MainTurns())
	if len(rs) == 0 || rs[len(rs)-1].Action != "COMPLETED" {
		t.Fatalf("responses %s%s", codes(rs), errorDetails(rs))
	}
	if got := codes(rs); got != want {
		t.Errorf("responses %s, want %s%s", got, want, errorDetails(rs))
	}
	for _, resp := range rs[:len(rs)-1] {
		if resp.Status == "SUCCESS" || strings.Contains(resp.RawResponse, `"action"`) {
			t.Errorf("partial answer recorded: %+v", resp)
		}
	}
	p.requireHello(t, r)
	var cut, malformed bool
	for _, l := range s.Requests() {
		if l.Reply != nil && l.Reply.Failure != nil {
			cut = cut || l.Reply.Failure.Cut
			malformed = malformed || l.Reply.Failure.Malformed
		}
	}
	if !cut || !malformed {
		t.Errorf("the broken streams were not served: cut %v malformed %v", cut, malformed)
	}
	return outcome{r: r, s: s, rs: rs, main: mainRequests(s)}
}

// retryThenComplete answers RETRY, then COMPLETED: two responses, each
// with a session.
func (p *cliProgram) retryThenComplete(t *testing.T) outcome {
	t.Helper()
	bin, s := p.start(t, retryAnswer, answer("hello.txt"))
	r := p.run(t, "session", bin, s, nil, nil)
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if len(rs) != 2 || rs[0].Action != "RETRY" || rs[1].Action != "COMPLETED" {
		t.Fatalf("responses %s%s", codes(rs), errorDetails(rs))
	}
	return outcome{r: r, s: s, rs: rs, main: mainRequests(s)}
}

// sessionContinues: the second call continues the first one's session,
// so the program sends the whole first conversation (the task, the write
// call, which reads call there, the RETRY answer) ahead of the new
// request. header, if set, carries the session id on every request.
func (p *cliProgram) sessionContinues(t *testing.T, call, header string) outcome {
	t.Helper()
	o := p.retryThenComplete(t)
	rs := o.rs
	if rs[0].SessionID == "" || rs[1].SessionID != rs[0].SessionID {
		t.Errorf("sessions %q then %q: not continued", rs[0].SessionID, rs[1].SessionID)
	}
	if len(o.main) != 3 {
		t.Fatalf("%d main requests, want 3 (%s, RETRY, COMPLETED)", len(o.main), p.write)
	}
	first, last := o.main[0], o.main[2]
	if h := last.Header.Get(header); header != "" && (h == "" || h != first.Header.Get(header) || h != rs[0].SessionID) {
		t.Errorf("%s headers %q, %q; recorded %q", header, first.Header.Get(header), h, rs[0].SessionID)
	}
	if !strings.Contains(strings.Join(first.Turn.Messages, "\n"), taskText) {
		t.Errorf("the first conversation lacks the task: %.300q", first.Turn.Messages)
	}
	conv := strings.Join(last.Turn.Messages, "\n")
	for _, want := range []string{taskText, call, "one more pass is needed"} {
		if !strings.Contains(conv, want) {
			t.Errorf("the resumed conversation lacks %.80q: %.600q", want, conv)
		}
	}
	return o
}

// maxTurns allows one turn, which the write call uses: the job stops for
// the steward, and the turn that was paid for is on the record.
func (p *cliProgram) maxTurns(t *testing.T) {
	t.Helper()
	bin, s := p.start(t)
	r := p.run(t, "turns", bin, s, map[string]any{"max_turns": 1}, nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "MAX_TURNS" || rs[0].CostUSD <= 0 {
		t.Fatalf("responses %s (%+v)", codes(rs), rs)
	}
}

// timeoutKillsGroup has the model hang past the call timeout (seconds):
// the call is a TIMEOUT and none of its processes is left running. At
// least procs of them must have been seen at once while the job ran.
func (p *cliProgram) timeoutKillsGroup(t *testing.T, timeout float64, procs int) outcome {
	t.Helper()
	bin, s := p.start(t)
	s.Fail(modelstub.Failure{Delay: 2 * time.Minute})
	marker := fmt.Sprintf("%s-slow-%d-%d", p.id, os.Getpid(), time.Now().UnixNano())
	agentCfg := p.agent(t, bin, s, nil)
	agentCfg["command"].(map[string]any)["env"].(map[string]any)["LOGIST_TEST_MARK"] = marker
	stop := watchProcs(marker)
	r := runJob(t, p.id+"-slow", agentCfg, limits(3, timeout))
	most := stop()
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].Status != history.StatusTimeout {
		t.Fatalf("responses %s%s", codes(rs), errorDetails(rs))
	}
	if most < procs {
		t.Errorf("%s was seen running as at most %d processes at once, want %d", p.bin, most, procs)
	}
	if left := markedProcs(marker); len(left) > 0 {
		t.Errorf("processes left running after the timeout: %v", left)
	}
	return outcome{r: r, s: s, rs: rs, main: mainRequests(s)}
}

// closedURL is a base URL whose port nobody listens on: every connection
// is refused at once.
func closedURL(t *testing.T, path string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + path
}

// connectionRefused points the program at a closed port: the call is a
// transient API_ERROR (Logist's own retry policy decides what comes next)
// classified within bound — not after minutes of the program's own
// retries. It logs the time to classify.
func (p *cliProgram) connectionRefused(t *testing.T, bound time.Duration) outcome {
	t.Helper()
	bin := requireAgent(t, p.name, p.bin)
	agentCfg := p.agent(t, bin, &modelstub.Server{URL: closedURL(t, "")}, nil)
	start := time.Now()
	r := runJob(t, p.id+"-refused", agentCfg, limits(0, 600))
	took := time.Since(start)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "API_ERROR" {
		t.Fatalf("responses %s (%+v)", codes(rs), rs)
	}
	t.Logf("%s: connection refused classified %s in %.1fs (job %v): %s", p.name, rs[0].ErrorCode,
		rs[0].ExecutionTimeSeconds, took.Round(100*time.Millisecond), firstLine(rs[0].Error))
	if d := time.Duration(rs[0].ExecutionTimeSeconds * float64(time.Second)); d > bound {
		t.Errorf("connection refused took %v to classify, want at most %v", d.Round(time.Second), bound)
	}
	return outcome{r: r, rs: rs}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return tail(s, 300)
}

// refusedBound is how long a refused connection may take to classify.
// Logist checks that the model API accepts connections before it starts
// the program: qwen, opencode and cline would retry it by themselves for
// 80 to 100 s (185 s on a loaded machine), and cannot be told not to.
const refusedBound = 20 * time.Second
