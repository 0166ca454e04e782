// Package clusterchaos runs a cluster of real logistd processes on one
// throwaway PostgreSQL and, while they run scripted jobs (multi-phase,
// sent back, transient API failures, budget halts, a human's wait that the
// test answers as a steward, the agent protocol), SIGKILLs random nodes
// at random moments (restarting them), SIGSTOPs others for longer than a
// lease (the zombie), and cuts nodes off from the database through a TCP
// proxy each. Then it checks that every job ended where its script says,
// every interaction has one response, every human wait one reply, every
// tool intent one run, no budget was overspent or debited twice, and
// every history verifies, and prints one line of figures:
//
//	cluster-chaos: nodes=N jobs=J kills=K pauses=P cuts=C lost=L duplicated=D overspent=O verify=ok|failed
//
// go test runs a short form; make cluster-chaos the full one.
package clusterchaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/pgtest"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/verify"
)

var slogDiscard = slog.New(slog.DiscardHandler)

var (
	flagNodes  = flag.Int("chaos.nodes", 3, "logistd nodes")
	flagJobs   = flag.Int("chaos.jobs", 24, "jobs (at least; batches are added while the chaos goes on)")
	flagKills  = flag.Int("chaos.kills", 6, "SIGKILLs of random nodes")
	flagPauses = flag.Int("chaos.pauses", 2, "SIGSTOPs longer than a lease, then SIGCONT")
	flagCuts   = flag.Int("chaos.cuts", 1, "cuts of a node from the database longer than a lease")
	flagLease  = flag.Duration("chaos.lease", 2*time.Second, "the nodes' lease")
	flagSeed   = flag.Uint64("chaos.seed", 0, "random seed (0: from the clock)")
	flagLimit  = flag.Duration("chaos.limit", 4*time.Minute, "give up after this long")
)

func TestMain(m *testing.M) { pgtest.Main(m) }

type node struct {
	id    string
	dir   string
	url   string
	proxy *proxy
	log   *os.File
	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
}

func (n *node) start(bin string, lease time.Duration) error {
	cmd := exec.Command(bin, "--database-url", n.url, "--node-id", n.id, "--jobs-dir", n.dir,
		"--lease", lease.String(), "--max-parallel", "4", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = n.log, n.log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	n.mu.Lock()
	n.cmd, n.done = cmd, done
	n.mu.Unlock()
	return nil
}

// signal sends sig to the node's process group (its agents too).
func (n *node) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil {
		_ = syscall.Kill(-n.cmd.Process.Pid, sig)
	}
}

func (n *node) wait() {
	n.mu.Lock()
	done := n.done
	n.mu.Unlock()
	<-done
}

type kind struct {
	name   string
	want   lifecycle.Status
	render func(id string, r *rand.Rand) []byte
	// wants, if set, is where the job's script takes it given what its
	// history says happened (nil: want).
	wants func(lines [][]byte) lifecycle.Status
}

// claimedRun is the tool intent whose output the protocol job's scripted
// Executor cites as its claim's evidence (tool:t2), whatever happened
// before: the demo's cat, here an echo that reads no file.
const claimedRun = "t2"

// protocolWants says where the protocol job ends, from how the run of
// claimedRun ended in its history. The claim guard accepts the claim only
// if that run completed (seed 003: evidence is what a completed run
// produced); the session then goes on to SUCCESS. A run that a node's
// death interrupted is recorded as failed and never run again (a retry is
// a new intent), so the scripted Executor, which cannot ask again, claims
// with evidence of no completed run until the phase's retry limit stops
// the job for a steward. A death after t1 started but before t2 did (each
// start is a unit of its own) interrupts t1 only: the next node records
// it as failed and runs t2, whose output is evidence all the same.
func protocolWants(lines [][]byte) lifecycle.Status {
	if runCompleted(lines, claimedRun) {
		return lifecycle.Success
	}
	return lifecycle.InterventionRequired
}

// runCompleted says whether tool intent id's run completed: the first
// record that ends it after its start says so.
func runCompleted(lines [][]byte, id string) bool {
	started := false
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil || e.Event == nil || e.Event.Subject != id {
			continue
		}
		switch e.Event.Type {
		case protocol.ToolExecutionStarted:
			started = true
		case protocol.ToolExecutionCompleted, protocol.ToolExecutionFailed:
			if started {
				return e.Event.Type == protocol.ToolExecutionCompleted
			}
		}
	}
	return false
}

// reruns are the tool intents a history starts more than once: a run is
// never run again (seed 003), an interrupted one least of all.
func reruns(lines [][]byte) []string {
	starts := map[string]int{}
	var out []string
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil || e.Event == nil || e.Event.Type != protocol.ToolExecutionStarted {
			continue
		}
		if starts[e.Event.Subject]++; starts[e.Event.Subject] == 2 {
			out = append(out, e.Event.Subject)
		}
	}
	return out
}

func delay(r *rand.Rand) int { return 50 + r.IntN(700) }

var kinds = []kind{
	{"sent-back", lifecycle.Success, func(id string, r *rand.Rand) []byte {
		return fmt.Appendf(nil, `{"schema_version": 1, "job_id": %q, "task_description": "Write greet.py with tests.",
 "agents": {
  "worker": {"provider": "script", "script": [
   {"action": "COMPLETED", "summary": "Wrote greet.py.", "evidence_files": ["greet.py"], "files": {"greet.py": "x"}, "cost_usd": 0.02, "delay_ms": %d},
   {"action": "COMPLETED", "summary": "Added tests.", "evidence_files": ["greet.py"], "cost_usd": 0.02, "delay_ms": %d}]},
  "supervisor": {"provider": "script", "script": [
   {"action": "RETRY", "summary": "Add tests.", "evidence_files": ["greet.py"], "cost_usd": 0.01, "delay_ms": %d},
   {"action": "COMPLETED", "summary": "Good.", "evidence_files": ["greet.py"], "cost_usd": 0.01, "delay_ms": %d}]}},
 "cost_threshold": 100, "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}}`, id, delay(r), delay(r), delay(r), delay(r))
	}, nil},
	{"transient", lifecycle.Success, func(id string, r *rand.Rand) []byte {
		return fmt.Appendf(nil, `{"schema_version": 1, "job_id": %q, "task_description": "Survive an API failure.",
 "agents": {
  "worker": {"provider": "script", "script": [
   {"error": "api", "cost_usd": 0.001, "delay_ms": %d},
   {"action": "COMPLETED", "summary": "Done.", "cost_usd": 0.02, "delay_ms": %d}]},
  "supervisor": {"provider": "script", "script": [
   {"action": "COMPLETED", "summary": "Good.", "cost_usd": 0.01, "delay_ms": %d}]}},
 "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}}`, id, delay(r), delay(r), delay(r))
	}, nil},
	// A human plays the supervisor: the job waits (holding no lease) until
	// the test's steward answers through cluster.Steer, as logist reply
	// does; the node that claims it next reads the filed reply.
	{"human", lifecycle.Success, func(id string, r *rand.Rand) []byte {
		return fmt.Appendf(nil, `{"schema_version": 1, "job_id": %q, "task_description": "Write greet.py; a human reviews.",
 "agents": {
  "worker": {"provider": "script", "script": [
   {"action": "COMPLETED", "summary": "Wrote greet.py.", "evidence_files": ["greet.py"], "files": {"greet.py": "x"}, "cost_usd": 0.02, "delay_ms": %d}]},
  "supervisor": {"provider": "human"}},
 "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}}`, id, delay(r))
	}, nil},
	// The agent protocol (seed 003) on the scripted agent: the demo job,
	// whose tool runs and check here read no file of the workspace (its
	// artifacts move with the job: Unit.Files; a workspace restored on the
	// rescuing node is another matter).
	{"protocol", lifecycle.Success, func(id string, _ *rand.Rand) []byte {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "jobs", "demo-protocol", "job.json"))
		if err != nil {
			panic(err)
		}
		if !bytes.Contains(b, []byte(`"evidence": ["tool:`+claimedRun+`"]`)) {
			panic("demo-protocol changed: its claim does not cite tool:" + claimedRun)
		}
		for from, to := range map[string]string{
			`"command": "cat greeting.txt"`:                     `"command": "echo hello, protocol"`,
			`["grep", "-q", "hello, protocol", "greeting.txt"]`: `["sh", "-c", "echo hello, protocol | grep -q protocol"]`,
		} {
			if !bytes.Contains(b, []byte(from)) {
				panic("demo-protocol changed: no " + from)
			}
			b = bytes.ReplaceAll(b, []byte(from), []byte(to))
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			panic(err)
		}
		m["job_id"] = id
		b, err = json.Marshal(m)
		if err != nil {
			panic(err)
		}
		return b
	}, protocolWants},
	{"budget-halt", lifecycle.HaltedCost, func(id string, r *rand.Rand) []byte {
		return fmt.Appendf(nil, `{"schema_version": 1, "job_id": %q, "task_description": "Too expensive.",
 "agents": {
  "worker": {"provider": "script", "script": [{"action": "RETRY", "summary": "Still slow.", "cost_usd": 0.20, "delay_ms": %d}]},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}},
 "cost_threshold": 50, "limits": {"max_retries": 10}, "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}}`, id, delay(r))
	}, nil},
}

func buildDaemon(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "logistd")
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/logist/logist/cmd/logistd").CombinedOutput(); err != nil {
		t.Fatalf("go build logistd: %v\n%s", err, out)
	}
	return bin
}

func TestClusterChaos(t *testing.T) {
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-chaos.seed=%d replays the choices)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	bin := buildDaemon(t)
	url := pgtest.DB(t)
	ctx := context.Background()
	store, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cfg, err := upstream(url)
	if err != nil {
		t.Fatal(err)
	}
	lease := *flagLease
	var nodes []*node
	work := t.TempDir()
	for i := range *flagNodes {
		p, err := newProxy(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer p.close()
		lf, err := os.Create(filepath.Join(work, fmt.Sprintf("n%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		defer lf.Close()
		n := &node{id: fmt.Sprintf("n%d", i), dir: filepath.Join(work, fmt.Sprintf("n%d", i)), proxy: p, log: lf,
			url: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", p.port(), dbName(url))}
		if err := n.start(bin, lease); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	expect := map[string]kind{}
	submit := func(k int) {
		for range k {
			kd := kinds[rng.IntN(len(kinds))]
			id := fmt.Sprintf("%s-%03d", kd.name, len(expect))
			if _, err := cluster.Submit(ctx, store, kd.render(id, rng)); err != nil {
				t.Fatal(err)
			}
			expect[id] = kd
		}
	}
	submit(*flagJobs)
	for _, kd := range kinds { // every kind at least once
		id := fmt.Sprintf("%s-%03d", kd.name, len(expect))
		if _, err := cluster.Submit(ctx, store, kd.render(id, rng)); err != nil {
			t.Fatal(err)
		}
		expect[id] = kd
	}
	answered := make(chan struct{})
	stopAnswering := make(chan struct{})
	go func() { defer close(answered); answerHumans(t, store, work, stopAnswering) }()

	var kills, pauses, cuts int
	var wg sync.WaitGroup
	deadline := time.Now().Add(*flagLimit)
	allDone := func() bool {
		js, err := store.Jobs(ctx)
		if err != nil {
			return false
		}
		for _, j := range js {
			if j.Status.Active() {
				return false
			}
		}
		return true
	}
	for kills < *flagKills || pauses < *flagPauses || cuts < *flagCuts {
		if time.Now().After(deadline) {
			t.Fatalf("chaos not delivered within %s: kills %d pauses %d cuts %d", *flagLimit, kills, pauses, cuts)
		}
		time.Sleep(time.Duration(300+rng.IntN(900)) * time.Millisecond)
		if allDone() {
			submit(10) // keep work in flight while the chaos goes on
		}
		n := nodes[rng.IntN(len(nodes))]
		switch pick(rng, *flagKills-kills, *flagPauses-pauses, *flagCuts-cuts) {
		case 0:
			kills++
			n.signal(syscall.SIGKILL)
			n.wait()
			time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
			if err := n.start(bin, lease); err != nil {
				t.Fatal(err)
			}
		case 1:
			pauses++
			n.signal(syscall.SIGSTOP)
			wg.Go(func() {
				time.Sleep(lease + time.Second)
				n.signal(syscall.SIGCONT)
			})
		case 2:
			cuts++
			n.proxy.setCut(true)
			wg.Go(func() {
				time.Sleep(lease + time.Second)
				n.proxy.setCut(false)
			})
		}
	}
	wg.Wait()
	for !allDone() {
		if time.Now().After(deadline) {
			t.Fatalf("jobs still running after %s", *flagLimit)
		}
		time.Sleep(200 * time.Millisecond)
	}
	close(stopAnswering)
	<-answered
	for _, n := range nodes {
		n.signal(syscall.SIGCONT)
		n.signal(syscall.SIGTERM)
	}
	for _, n := range nodes {
		n.wait()
	}

	var rescues int64
	if js, err := store.Jobs(ctx); err == nil {
		for _, j := range js {
			rescues += j.Rescues
		}
	}
	t.Logf("rescues: %d (jobs claimed from a node whose lease had expired)", rescues)
	lost, duplicated, overspent, failed := 0, 0, 0, 0
	for id, kd := range expect {
		j, err := store.Job(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		lines, err := store.History(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want := kd.want
		if kd.wants != nil {
			want = kd.wants(lines)
		}
		if j.Status != want {
			lost++
			var m struct {
				Run struct {
					ErrorCode string `json:"error_code"`
					Reason    string `json:"reason"`
				} `json:"run"`
			}
			_ = json.Unmarshal(j.Manifest, &m)
			t.Errorf("job %s ended %s (%s: %s; rescues %d), its script says %s", id, j.Status, m.Run.ErrorCode, m.Run.Reason, j.Rescues, want)
			logHistory(t, id, lines)
		}
		responses := map[int]int{}
		replies := 0
		var spent int64
		var threshold int64 = -1
		if kd.want == lifecycle.HaltedCost {
			threshold = 500_000
		}
		overspentHere := false
		for _, line := range lines {
			e, err := history.ParseLine(line)
			if err != nil {
				t.Fatal(err)
			}
			if e.Type == history.TypeIntent && threshold >= 0 && spent >= threshold {
				overspentHere = true // a call started with the budget spent
			}
			if e.Type == history.TypeSteward && e.Steward != nil && e.Steward.Command == history.CommandReply {
				replies++
			}
			if e.Type == history.TypeResponse && e.Response != nil {
				if e.Interaction != nil {
					responses[*e.Interaction]++
				}
				spent += int64(e.Response.CostUSD*1e6 + 0.5)
			}
		}
		if kd.name == "human" && replies != 1 {
			duplicated += max(replies-1, 0) // no answer committed twice
			t.Errorf("job %s: %d replies committed, want 1", id, replies)
		}
		if kd.name == "protocol" {
			for _, run := range reruns(lines) {
				duplicated++
				t.Errorf("job %s: tool intent %s was run more than once", id, run)
			}
		}
		for i, c := range responses {
			if c > 1 {
				duplicated += c - 1
				t.Errorf("job %s: interaction %d has %d responses", id, i, c)
			}
		}
		if spent != j.SpentMicros {
			overspentHere = true
			t.Errorf("job %s: responses cost %d µ$, the database debited %d µ$", id, spent, j.SpentMicros)
			logHistory(t, id, lines)
		}
		if overspentHere {
			overspent++
		}
		if !verified(t, store, id) {
			failed++
		}
	}
	result := "ok"
	if failed > 0 {
		result = "failed"
	}
	line := fmt.Sprintf("cluster-chaos: nodes=%d jobs=%d kills=%d pauses=%d cuts=%d lost=%d duplicated=%d overspent=%d verify=%s",
		len(nodes), len(expect), kills, pauses, cuts, lost, duplicated, overspent, result)
	t.Log(line)
	fmt.Println(line)
	if lost+duplicated+overspent+failed > 0 {
		t.Fatal("chaos found problems (node logs in the test's temp folder)")
	}
}

// answerHumans answers every human job that waits for a reply, as a
// steward through cluster.Steer (what logist reply does in cluster mode),
// under one idempotency key per job: an answer sent again (the test's own
// retry) is the same command and changes nothing.
func answerHumans(t *testing.T, s *pgstore.Store, work string, stop <-chan struct{}) {
	ctx := context.Background()
	keyDir := filepath.Join(work, "steward")
	key, err := signing.LoadOrCreate(keyDir)
	if err != nil {
		t.Error(err)
		return
	}
	if err := s.RegisterSteward(ctx, "steward-chaos", key.Public()); err != nil {
		t.Error(err)
		return
	}
	answer := []byte(`{"action": "COMPLETED", "summary": "Reviewed by a human.", "summary_for_supervisor": "ok", "evidence_files": ["greet.py"]}`)
	for {
		select {
		case <-stop:
			return
		case <-time.After(200 * time.Millisecond):
		}
		js, err := s.Jobs(ctx)
		if err != nil {
			continue
		}
		for _, j := range js {
			if !strings.HasPrefix(j.ID, "human-") || j.Status != lifecycle.InterventionRequired {
				continue
			}
			_, err := cluster.Steer(ctx, s, cluster.Steering{Job: j.ID, Key: "reply-" + j.ID, Command: "reply " + j.ID + " as supervisor",
				Apply: func(jobsDir string) error {
					st := steward.New(&jobtx.Env{Store: jobstore.New(jobsDir), Logger: slogDiscard,
						History: history.Options{Signer: key, MaxBytes: -1}}, builtins.Effects())
					_, err := st.Reply(j.ID, "supervisor", answer)
					return err
				}})
			if err != nil && !errors.Is(err, clusterstore.ErrConflict) && !jobtx.IsOutOfOrder(err) {
				t.Errorf("reply to %s: %v", j.ID, err)
			}
		}
	}
}

// pick chooses one of the actions still owed (0 kill, 1 pause, 2 cut).
func pick(rng *rand.Rand, owed ...int) int {
	var choices []int
	for a, n := range owed {
		if n > 0 {
			choices = append(choices, a)
		}
	}
	return choices[rng.IntN(len(choices))]
}

// upstream is the database server's host:port, dbName its database.
func upstream(u string) (string, error) {
	p, err := neturl.Parse(u)
	if err != nil {
		return "", err
	}
	return p.Host, nil
}

func dbName(u string) string {
	p, _ := neturl.Parse(u)
	return strings.TrimPrefix(p.Path, "/")
}

func verified(t *testing.T, s *pgstore.Store, id string) bool {
	dir := t.TempDir()
	if err := cluster.Export(context.Background(), s, id, dir); err != nil {
		t.Errorf("export %s: %v", id, err)
		return false
	}
	keys, err := signing.LoadKeyring(filepath.Join(dir, signing.Dir, signing.PublicFile))
	if err != nil {
		t.Error(err)
		return false
	}
	m, err := manifest.ReadFile(filepath.Join(dir, id, "job.json"))
	if err != nil {
		t.Error(err)
		return false
	}
	rep, err := verify.Job(id, filepath.Join(dir, id), verify.Options{Public: keys[0], Keyring: keys[1:], Manifest: m})
	if err != nil || !rep.OK() {
		t.Errorf("job %s does not verify: %v %v", id, err, rep.Problems)
		return false
	}
	return true
}

// logHistory logs a job's records in short, one a line (the node logs go
// with the test's temp folder): what a failure's seed alone cannot replay.
func logHistory(t *testing.T, id string, lines [][]byte) {
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			t.Logf("%s: %v", id, err)
			continue
		}
		what := ""
		switch {
		case e.Event != nil:
			what = e.Event.Type + " " + e.Event.Subject
		case e.Error != nil:
			what = e.Error.Code
		case e.Transition != nil:
			what = e.Transition.From + "->" + e.Transition.To
		case e.Response != nil:
			what = fmt.Sprintf("%s %s $%g", e.Response.Status, e.Response.Action, e.Response.CostUSD)
		}
		in := ""
		if e.Interaction != nil {
			in = fmt.Sprint(*e.Interaction)
		}
		t.Logf("%s #%d %s %s/%s i%s a%d key %.8s %s %s", id, e.Seq, e.Time, e.Type, e.Phase, in, e.Attempt, e.Key, e.Role, what)
	}
}
