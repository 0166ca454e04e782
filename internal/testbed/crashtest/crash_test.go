// Package crashtest kills the real logistd with SIGKILL at random moments
// while it runs many jobs, restarts it, and checks that nothing was lost,
// duplicated or corrupted: every interaction has exactly one response, every
// history verifies (chain, signatures, replay), every job ends where a run
// without kills ends, and the manifest's counters match the history.
//
//	go test ./internal/testbed/crashtest                      # 200 kills
//	go test ./internal/testbed/crashtest -crash.kills=2000    # more
//	go test ./internal/testbed/crashtest -crash.seed=N        # replay a run's choices
package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/verify"
)

var (
	flagKills = flag.Int("crash.kills", 200, "SIGKILLs to deliver to logistd")
	flagSeed  = flag.Uint64("crash.seed", 0, "random seed (0: from the clock); the test logs the seed it used")
	flagJobs  = flag.Int("crash.jobs", 30, "jobs per batch (another batch is added whenever all are done before the kills are)")
	flagLimit = flag.Duration("crash.limit", 0, "stop delivering kills after this long and check those made, if at least a quarter of -crash.kills (0: 80s, or 150ms per kill if more)")
)

// daemonBin is logistd built once, without the race detector.
func buildDaemon(t *testing.T) string {
	t.Helper()
	// go test puts its own toolchain's bin first on the PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "logistd")
	cmd := exec.Command(goBin, "build", "-o", bin, "github.com/logist/logist/cmd/logistd")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build logistd: %v\n%s", err, out)
	}
	return bin
}

// jobSpec is one job of the workload and what a run without kills must end
// in (checked against such a run, too).
type jobSpec struct {
	id       string
	kind     string
	manifest map[string]any
	files    map[string]string // extra files in the job folder (agent scripts)
	want     string
}

type step = map[string]any

func agentScript(steps ...step) map[string]any {
	s := make([]any, len(steps))
	for i := range steps {
		s[i] = steps[i]
	}
	return map[string]any{"provider": "script", "script": s}
}

// hangOnceAgent writes work/agent.sh, a worker run as `sh agent.sh
// {answer_file} MARK`: its first attempt writes its pid to MARK and hangs
// (the test kills the daemon then), a later one answers COMPLETED.
func hangOnceAgent(t *testing.T, work string) string {
	t.Helper()
	agent := filepath.Join(work, "agent.sh")
	script := "mark=\"$2\"\nif [ ! -e \"$mark\" ]; then echo $$ > \"$mark.tmp\" && mv \"$mark.tmp\" \"$mark\"; sleep 30; exit 1; fi\n" +
		"printf '{\"action\": \"COMPLETED\", \"evidence_files\": [], \"summary_for_supervisor\": \"done\"}' > \"$1.$$\" && mv \"$1.$$\" \"$1\"\n"
	if err := os.WriteFile(agent, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return agent
}

// killAtMark waits for hangOnceAgent's first attempt to write mark, then
// kills the daemon cmd (logging to logFile) and the agent's process
// group, which outlives its daemon.
func killAtMark(t *testing.T, cmd *exec.Cmd, mark, logFile string) {
	t.Helper()
	var pid int
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(mark); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker never started; log:\n%s", tail(logFile, 0))
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// agentCommand runs argv; with answerFile, the agent writes its answer to
// the file named by {answer_file} in argv instead of stdout.
//
// The answering agents here use the file. (They were moved to it when a
// stdout answer could be lost under heavy load: exec's WaitDelay closed the
// pipes before the copying goroutine had read them. internal/agent's
// runDirect has since read its own pipes to EOF, 9ef93fd.) The answer file
// is written by rename: the agent of a killed daemon is not killed with it
// and may still be writing the same answer when the call is re-attempted.
func agentCommand(answerFile bool, argv ...string) map[string]any {
	a := make([]any, len(argv))
	for i := range argv {
		a[i] = argv[i]
	}
	c := map[string]any{"argv": a}
	if answerFile {
		c["answer"] = "file"
	}
	return map[string]any{"provider": "command", "command": c}
}

// workload makes n jobs of varied shape and speed. Everything the engine
// decides depends only on the answers, which depend only on how many the
// role gave before (scripts) or on the interaction number (commands), so
// a run with kills must end exactly where a run without them does.
func workload(rng *rand.Rand, batch, n int) []jobSpec {
	delay := func() int64 {
		// Mostly quicker than a kill delay, so that jobs progress between
		// kills; a few slower than any, so that they are always killed in
		// the call until the final run.
		switch r := rng.IntN(20); {
		case r == 0:
			return int64(80 + rng.IntN(71))
		case r < 6:
			return int64(30 + rng.IntN(31))
		}
		return int64(rng.IntN(30))
	}
	cost := func() float64 { return float64(rng.IntN(5)) / 100 } // 0–4 cents
	s := func(action, summary string) step {
		return step{"action": action, "summary": summary, "delay_ms": delay(), "cost_usd": cost()}
	}
	api := func() step { return step{"error": "api", "delay_ms": delay(), "cost_usd": cost()} }
	var out []jobSpec
	for i := range n {
		id := fmt.Sprintf("b%02d-j%03d", batch, i)
		m := map[string]any{"schema_version": 1, "job_id": id, "task_description": "crash test job " + id}
		sp := jobSpec{id: id}
		switch i % 14 {
		case 0:
			sp.kind, sp.want = "success", "SUCCESS"
			m["agents"] = map[string]any{"worker": agentScript(s("COMPLETED", "done")), "supervisor": agentScript(s("COMPLETED", "ok"))}
		case 1:
			sp.kind, sp.want = "supervisor-retry", "SUCCESS"
			m["agents"] = map[string]any{
				"worker":     agentScript(s("COMPLETED", "first try"), s("COMPLETED", "second try")),
				"supervisor": agentScript(s("RETRY", "add tests"), s("COMPLETED", "good"))}
			m["cost_threshold"] = 1000
		case 2:
			sp.kind, sp.want = "worker-retries", "SUCCESS"
			m["agents"] = map[string]any{
				"worker":     agentScript(s("RETRY", "again"), s("RETRY", "again"), s("COMPLETED", "done")),
				"supervisor": agentScript(s("COMPLETED", "ok"))}
		case 3:
			sp.kind, sp.want = "retry-limit", "INTERVENTION_REQUIRED"
			m["agents"] = map[string]any{"worker": agentScript(s("RETRY", "never done")), "supervisor": agentScript(s("COMPLETED", "ok"))}
			m["limits"] = map[string]any{"max_retries": 2}
		case 4:
			sp.kind, sp.want = "stuck", "INTERVENTION_REQUIRED"
			m["agents"] = map[string]any{"worker": agentScript(s("COMPLETED", "done")), "supervisor": agentScript(s("STUCK", "need a human"))}
		case 5:
			sp.kind, sp.want = "cost-halt", "HALTED_COST"
			m["agents"] = map[string]any{
				"worker":     agentScript(step{"action": "RETRY", "summary": "expensive", "cost_usd": 0.2, "delay_ms": delay()}),
				"supervisor": agentScript(s("COMPLETED", "ok"))}
			m["cost_threshold"] = 50
			m["limits"] = map[string]any{"max_retries": 10}
		case 6:
			sp.kind, sp.want = "api-errors", "SUCCESS"
			m["agents"] = map[string]any{
				"worker":     agentScript(api(), api(), s("COMPLETED", "done after errors")),
				"supervisor": agentScript(api(), s("COMPLETED", "ok"))}
			m["limits"] = map[string]any{"backoff_initial_ms": 1 + rng.IntN(5)}
		case 7:
			sp.kind, sp.want = "api-exhausted", "INTERVENTION_REQUIRED"
			m["agents"] = map[string]any{"worker": agentScript(api()), "supervisor": agentScript(s("COMPLETED", "ok"))}
			m["limits"] = map[string]any{"max_api_retries": 2, "backoff_initial_ms": 1 + rng.IntN(3)}
		case 8:
			sp.kind, sp.want = "invalid-answer", "INTERVENTION_REQUIRED"
			raw := `{"action": "COMPLETED", "evidence_files": "x", "summary_for_supervisor": "bad"}`
			m["agents"] = map[string]any{
				"worker":     agentScript(step{"raw": raw, "delay_ms": delay(), "cost_usd": cost()}),
				"supervisor": agentScript(s("COMPLETED", "ok"))}
		case 9:
			sp.kind, sp.want = "long-review", "SUCCESS"
			m["agents"] = map[string]any{
				"worker":     agentScript(s("COMPLETED", "v1"), s("COMPLETED", "v2"), s("COMPLETED", "v3"), s("COMPLETED", "v4")),
				"supervisor": agentScript(s("RETRY", "r1"), s("RETRY", "r2"), s("RETRY", "r3"), s("COMPLETED", "ok"))}
			m["limits"] = map[string]any{"max_retries": 5}
		case 10:
			sp.kind, sp.want = "files", "SUCCESS"
			w := s("COMPLETED", "wrote the module")
			w["files"] = map[string]any{"mod.py": "def f():\n    return 1\n", "sub/notes.md": "notes\n"}
			w["evidence_files"] = []any{"mod.py", "sub/notes.md"}
			sup := s("COMPLETED", "reviewed")
			sup["evidence_files"] = []any{"mod.py"}
			m["agents"] = map[string]any{"worker": agentScript(w), "supervisor": agentScript(sup)}
		case 11:
			sp.kind, sp.want = "command", "SUCCESS"
			sp.files = map[string]string{"agent.sh": fmt.Sprintf(
				"sleep 0.0%d\nprintf '{\"action\": \"COMPLETED\", \"evidence_files\": [], \"summary_for_supervisor\": \"%%s done\", \"cost_usd\": 0.01}' \"$LOGIST_ROLE\" > \"$1.$$\" && mv \"$1.$$\" \"$1\"\n", rng.IntN(6))}
			m["agents"] = map[string]any{"worker": agentCommand(true, "sh", "../agent.sh", "{answer_file}"), "supervisor": agentCommand(true, "sh", "../agent.sh", "{answer_file}")}
		case 12:
			// A stateless command supervisor that sends the first review back.
			sp.kind, sp.want = "command-retry", "SUCCESS"
			sp.files = map[string]string{"review.sh": fmt.Sprintf("sleep 0.0%d\n", rng.IntN(6)) +
				"if [ \"$LOGIST_INTERACTION\" = 1 ]; then a=RETRY; else a=COMPLETED; fi\n" +
				"printf '{\"action\": \"%s\", \"evidence_files\": [], \"summary_for_supervisor\": \"review at %s\"}' \"$a\" \"$LOGIST_INTERACTION\" > \"$1.$$\" && mv \"$1.$$\" \"$1\"\n"}
			m["agents"] = map[string]any{
				"worker":     agentScript(s("COMPLETED", "w1"), s("COMPLETED", "w2")),
				"supervisor": agentCommand(true, "sh", "../review.sh", "{answer_file}")}
		case 13:
			sp.kind, sp.want = "command-crash", "INTERVENTION_REQUIRED"
			m["agents"] = map[string]any{
				"worker":     agentCommand(false, "sh", "-c", "sleep 0.01; echo 'disk on fire' >&2; exit 3"),
				"supervisor": agentScript(s("COMPLETED", "ok"))}
			m["limits"] = map[string]any{"max_api_retries": 1, "backoff_initial_ms": 1}
		}
		sp.manifest = m
		out = append(out, sp)
	}
	return out
}

func writeJobs(t *testing.T, dir string, specs []jobSpec) {
	t.Helper()
	for _, sp := range specs {
		jd := filepath.Join(dir, sp.id)
		if err := os.MkdirAll(jd, 0o700); err != nil {
			t.Fatal(err)
		}
		b, err := json.MarshalIndent(sp.manifest, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		for name, body := range sp.files {
			if err := os.WriteFile(filepath.Join(jd, name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// The manifest last: the daemon may see the folder at any moment.
		tmp := filepath.Join(jd, ".job.json.tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(jd, jobstore.ManifestFile)); err != nil {
			t.Fatal(err)
		}
	}
}

// jobState is what the kill loop reads of a job between kills: cheaply,
// without the full manifest validation (the final checks do that).
type jobState struct {
	active    bool
	responses int   // response records in the active history file
	torn      int64 // offset of an incomplete last line, -1 if none
}

func readState(t *testing.T, jd string) jobState {
	t.Helper()
	mb, err := os.ReadFile(filepath.Join(jd, jobstore.ManifestFile))
	var head struct {
		Status string `json:"status"`
	}
	if err == nil {
		err = json.Unmarshal(mb, &head)
	}
	if err != nil {
		t.Fatalf("job %s: manifest unreadable between kills: %v", filepath.Base(jd), err)
	}
	st := lifecycle.Status(head.Status)
	if st == "" {
		st = lifecycle.Pending
	}
	hb, _ := os.ReadFile(history.Path(jd))
	return jobState{active: st.Active(), responses: bytes.Count(hb, []byte(`"type":"response"`)), torn: tornAt(hb)}
}

// tear is a torn last record: bytes of a record that never completed.
type tear struct {
	job    string
	offset int64
}

// tornAt reports where the open of a history cuts it (-1: nowhere): at an
// incomplete last line, and before a last unit whose final record is
// missing (history.Record.More; a kill can stop a unit's write part way).
func tornAt(data []byte) int64 {
	cut, end := int64(-1), len(data)
	if end > 0 && data[end-1] != '\n' {
		end = bytes.LastIndexByte(data, '\n') + 1
		cut = int64(end)
	}
	for end > 0 {
		start := bytes.LastIndexByte(data[:end-1], '\n') + 1
		e, err := history.ParseLine(data[start:end])
		if err != nil || !e.More {
			break
		}
		cut, end = int64(start), start
	}
	return cut
}

// injectTear appends the first part of a copy of the history's last record,
// without its end: what a write cut short by a crash leaves.
func injectTear(file string, rng *rand.Rand) (int64, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return 0, errors.New("history empty or already torn")
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	last := lines[len(lines)-2]
	part := last[:1+rng.IntN(len(last)-1)] // never the newline
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	if _, err := f.Write(part); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}

// logEvent is the part of logistd's JSON log lines the test reads.
type logEvent struct {
	Msg       string `json:"msg"`
	Level     string `json:"level"`
	JobID     string `json:"job_id"`
	ErrorCode string `json:"error_code"`
	Offset    *int64 `json:"offset"`
}

func readLog(t *testing.T, file string, from int64) []logEvent {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		t.Fatal(err)
	}
	var out []logEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev logEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			out = append(out, ev)
		}
	}
	return out
}

func readFrom(file string, from int64) []byte {
	b, _ := os.ReadFile(file)
	if int64(len(b)) < from {
		return nil
	}
	return b[from:]
}

func hasTornLog(evs []logEvent, tr tear) bool {
	for _, ev := range evs {
		if ev.ErrorCode == "HISTORY_TORN_TAIL" && ev.JobID == tr.job && ev.Offset != nil && *ev.Offset == tr.offset {
			return true
		}
	}
	return false
}

type daemon struct {
	bin, dir, logFile string
}

// start starts logistd on d's folder, its output appended to d's log:
// at --max-parallel 64 unless args say otherwise (the last value of a
// flag is the one taken).
func (d daemon) start(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	lf, err := os.OpenFile(d.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.Command(d.bin, append([]string{"--jobs-dir", d.dir, "--max-parallel", "64"}, args...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

func logSize(file string) int64 {
	fi, err := os.Stat(file)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// runOnce runs logistd --once to the end (bounded), with args added.
func (d daemon) runOnce(t *testing.T, limit time.Duration, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	lf, err := os.OpenFile(d.logFile, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	cmd := exec.CommandContext(ctx, d.bin, append([]string{"--once", "--jobs-dir", d.dir, "--max-parallel", "64"}, args...)...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Run(); err != nil {
		t.Fatalf("logistd --once on %s: %v (ctx: %v); log in %s", d.dir, err, ctx.Err(), d.logFile)
	}
}

func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("crash harness: skipped with -short")
	}
	seed := *flagSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -crash.seed=%d)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x10615))
	limit := *flagLimit
	if limit == 0 {
		limit = max(80*time.Second, time.Duration(*flagKills)*150*time.Millisecond)
	}

	bin := buildDaemon(t)
	work := t.TempDir()
	dir := filepath.Join(work, "jobs")
	doneDir := filepath.Join(work, "done") // finished jobs, out of the daemon's way
	for _, p := range []string{dir, doneDir} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	d := daemon{bin: bin, dir: dir, logFile: filepath.Join(work, "logistd.log")}

	batch := 0
	live := workload(rng, batch, *flagJobs)
	all := append([]jobSpec(nil), live...)
	writeJobs(t, dir, live)
	where := func(sp jobSpec) string {
		if _, err := os.Stat(filepath.Join(doneDir, sp.id)); err == nil {
			return filepath.Join(doneDir, sp.id)
		}
		return filepath.Join(dir, sp.id)
	}

	began := time.Now()
	kills, injected, natural, unloggedRepairs, finished := 0, 0, 0, 0, 0
	states := map[string]jobState{}
	for _, sp := range live {
		states[sp.id] = readState(t, filepath.Join(dir, sp.id))
	}
	stalled := 0               // kills since a live job last recorded a response
	torn := map[string]int64{} // job -> offset of a tear not yet seen repaired
	var tears []tear           // every tear seen (natural or injected)
	var logged []tear          // tears the daemon logged, by the run that repaired them
	for kills < *flagKills {
		if time.Since(began) > limit {
			// A loaded machine (CI runs packages side by side) is slow to
			// start and kill: the run still checks what its kills did, as
			// long as there were enough of them to mean something.
			if kills < *flagKills/4 {
				t.Fatalf("only %d of %d kills within %s", kills, *flagKills, limit)
			}
			t.Logf("time limit %s reached after %d of %d kills: checking those", limit, kills, *flagKills)
			break
		}
		// Keep work in flight: a step slower than the kill delay only
		// finishes in the final run, so when the jobs left make no more
		// progress, or few are left, a new batch joins them.
		if len(live) < max(1, *flagJobs/3) || (stalled >= 10 && len(live) < 2**flagJobs) {
			batch++
			more := workload(rng, batch, *flagJobs)
			writeJobs(t, dir, more)
			for _, sp := range more {
				states[sp.id] = readState(t, filepath.Join(dir, sp.id))
			}
			live = append(live, more...)
			all = append(all, more...)
			stalled = 0
		}
		// Now and then, tear the last record of an active job's history as
		// a crash in the middle of a write would (SIGKILL alone rarely
		// does: a small write(2) to a file is not interrupted).
		var inj *tear
		if rng.IntN(6) == 0 {
			sp := live[rng.IntN(len(live))]
			hf := history.Path(filepath.Join(dir, sp.id))
			if st := states[sp.id]; st.active && st.torn < 0 {
				if off, err := injectTear(hf, rng); err == nil {
					inj = &tear{sp.id, off}
					torn[sp.id] = off
					tears = append(tears, *inj)
					injected++
				}
			}
		}
		from := logSize(d.logFile)
		cmd := d.start(t)
		started := time.Now()
		if rng.IntN(4) != 0 {
			// Mostly, count the delay from when the daemon is up, so that
			// the kill finds it at work rather than starting.
			deadline := time.Now().Add(5 * time.Second)
			for !bytes.Contains(readFrom(d.logFile, from), []byte(`"msg":"logistd starting"`)) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			started = time.Now()
		}
		if inj != nil {
			// Let this run reach the torn job and repair it before the kill.
			deadline := time.Now().Add(10 * time.Second)
			for !hasTornLog(readLog(t, d.logFile, from), *inj) {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("injected tear %+v: not repaired and logged within 10s; log:\n%s", *inj, tail(d.logFile, from))
				}
				time.Sleep(2 * time.Millisecond)
			}
			started = time.Now()
		}
		time.Sleep(time.Duration(5+rng.IntN(76))*time.Millisecond - time.Since(started))
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill: %v", err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			// It exited on its own before the kill: it could not start on
			// the state an earlier kill left.
			t.Fatalf("logistd exited before it was killed (%v) after %s; log from byte %d:\n%s", err, time.Since(started), from, tail(d.logFile, from))
		}
		kills++

		evs := readLog(t, d.logFile, from)
		progress := false
		for _, sp := range live {
			st := readState(t, filepath.Join(dir, sp.id))
			if st.responses != states[sp.id].responses {
				progress = true
			}
			states[sp.id] = st
		}
		if progress {
			stalled = 0
		} else {
			stalled++
		}
		// Tears repaired by this run must have been logged by it.
		for job, off := range torn {
			if states[job].torn == off {
				continue // still torn: not reached yet
			}
			delete(torn, job)
			if hasTornLog(evs, tear{job, off}) {
				logged = append(logged, tear{job, off})
			} else {
				// Cut, and killed between the cut and the log line: the
				// log is not atomic with the repair. Counted, not failed.
				unloggedRepairs++
			}
		}
		for _, ev := range evs {
			if ev.ErrorCode == "HISTORY_TORN_TAIL" && !containsTear(tears, ev) {
				t.Errorf("logistd logged a torn tail nobody made: %+v", ev)
			}
			if ev.ErrorCode == "COMMIT_FINISHED" {
				finished++
			}
		}
		// Tears the kill itself made; finished jobs moved aside, so that
		// each start scans only the jobs at work.
		kept := live[:0]
		for _, sp := range live {
			st := states[sp.id]
			if _, ok := torn[sp.id]; !ok && st.torn >= 0 {
				torn[sp.id] = st.torn
				tears = append(tears, tear{sp.id, st.torn})
				natural++
			}
			if _, isTorn := torn[sp.id]; !st.active && !isTorn {
				if err := os.Rename(filepath.Join(dir, sp.id), filepath.Join(doneDir, sp.id)); err != nil {
					t.Fatal(err)
				}
				continue
			}
			kept = append(kept, sp)
		}
		live = kept
	}
	killPhase := time.Since(began)
	killPhaseResponses := 0
	for _, sp := range all {
		recs, _ := history.ReadAll(where(sp))
		for _, r := range recs {
			if r.Type == history.TypeResponse {
				killPhaseResponses++
			}
		}
	}

	// Finish every job without kills.
	from := logSize(d.logFile)
	d.runOnce(t, 60*time.Second)
	evs := readLog(t, d.logFile, from)
	for job, off := range torn {
		if !hasTornLog(evs, tear{job, off}) {
			t.Errorf("job %s: torn tail at %d not repaired and logged by the final run", job, off)
		} else {
			logged = append(logged, tear{job, off})
		}
	}
	for _, ev := range evs {
		if ev.ErrorCode == "HISTORY_TORN_TAIL" && !containsTear(tears, ev) {
			t.Errorf("final run logged a torn tail nobody made: %+v", ev)
		}
		if ev.ErrorCode == "COMMIT_FINISHED" {
			finished++
		}
		if ev.Level == "ERROR" && (ev.ErrorCode == "RUN_FAILED" || ev.ErrorCode == "HISTORY_WRITE" || ev.ErrorCode == "MANIFEST_WRITE") ||
			ev.Msg == "uncommitted history records dropped" {
			t.Errorf("final run: %s %s: %s", ev.JobID, ev.ErrorCode, ev.Msg)
		}
	}
	if injected > 0 && len(logged) == 0 {
		t.Errorf("%d tears injected, none logged", injected)
	}

	// The same jobs once more, without kills: where they must end.
	refDir := filepath.Join(work, "ref")
	writeJobs(t, refDir, all)
	ref := daemon{bin: bin, dir: refDir, logFile: filepath.Join(work, "ref.log")}
	refStart := time.Now()
	ref.runOnce(t, 60*time.Second)
	refTime := time.Since(refStart)
	for _, ev := range readLog(t, ref.logFile, 0) {
		if ev.Level == "ERROR" && (ev.ErrorCode == "RUN_FAILED" || ev.ErrorCode == "HISTORY_WRITE" || ev.ErrorCode == "MANIFEST_WRITE") ||
			ev.Msg == "uncommitted history records dropped" || ev.ErrorCode == "COMMIT_FINISHED" || ev.ErrorCode == "HISTORY_TORN_TAIL" {
			t.Errorf("run without kills: %s %s: %s", ev.JobID, ev.ErrorCode, ev.Msg)
		}
	}

	key, err := signing.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	refKey, err := signing.Load(refDir)
	if err != nil {
		t.Fatal(err)
	}
	byStatus := map[string]int{}
	totalResponses, totalRecords := 0, 0
	for _, sp := range all {
		got := checkJob(t, where(sp), sp, key.Public())
		want := checkJob(t, filepath.Join(refDir, sp.id), sp, refKey.Public())
		totalResponses += got.responses
		totalRecords += got.records
		byStatus[got.status]++
		if want.status != sp.want {
			t.Errorf("job %s (%s): a run without kills ends %s (last answer: %s), the workload says %s", sp.id, sp.kind, want.status, want.last, sp.want)
		}
		if got.status != want.status || got.phase != want.phase {
			t.Errorf("job %s (%s): ends %s in phase %s after kills (last answer: %s), %s in phase %s without (last answer: %s)",
				sp.id, sp.kind, got.status, got.phase, got.last, want.status, want.phase, want.last)
		}
		if got.responses != want.responses {
			t.Errorf("job %s (%s): %d responses after kills, %d without", sp.id, sp.kind, got.responses, want.responses)
		}
		if math.Abs(got.cost-want.cost) > 1e-6 {
			t.Errorf("job %s (%s): cost %.4f cents after kills, %.4f without (a crash lost or double counted a call)", sp.id, sp.kind, got.cost, want.cost)
		}
		if got.responseCost != want.responseCost {
			t.Errorf("job %s (%s): recorded response costs %.4f USD after kills, %.4f without", sp.id, sp.kind, got.responseCost, want.responseCost)
		}
	}
	statuses := make([]string, 0, len(byStatus))
	for s, n := range byStatus {
		statuses = append(statuses, fmt.Sprintf("%s=%d", s, n))
	}
	sort.Strings(statuses)
	t.Logf("%d kills in %s (%d batches, %d jobs: %s); %d responses (%d before the final run), %d records; "+
		"%d interrupted commits finished; tears: %d injected, %d natural, %d logged, %d repaired by a run killed before it logged; run without kills: %s",
		kills, killPhase.Round(time.Millisecond), batch+1, len(all), strings.Join(statuses, " "), totalResponses, killPhaseResponses, totalRecords,
		finished, injected, natural, len(logged), unloggedRepairs, refTime.Round(time.Millisecond))
}

func containsTear(tears []tear, ev logEvent) bool {
	for _, tr := range tears {
		if ev.JobID == tr.job && ev.Offset != nil && *ev.Offset == tr.offset {
			return true
		}
	}
	return false
}

type outcome struct {
	status, phase string
	responses     int
	records       int
	cost          float64 // manifest, cents
	responseCost  float64 // sum of recorded responses, USD
	last          string  // the last response, for messages
}

// checkJob asserts the invariants of one finished job and returns what it
// ended as.
func checkJob(t *testing.T, jd string, sp jobSpec, pub []byte) outcome {
	t.Helper()
	dir := filepath.Dir(jd)
	m, err := manifest.ReadFile(filepath.Join(jd, jobstore.ManifestFile))
	if err != nil {
		t.Errorf("job %s: %v", sp.id, err)
		return outcome{}
	}
	o := outcome{status: string(m.Status), phase: m.Phase(), cost: m.Metrics.CumulativeCost}
	if m.Status.Active() {
		t.Errorf("job %s (%s, %s): still %s after the final run", sp.id, sp.kind, dir, m.Status)
	}
	es, err := history.ReadEntries(jd)
	if err != nil {
		t.Errorf("job %s: read history: %v", sp.id, err)
		return o
	}
	o.records = len(es)

	// (a) Every interaction: one intent, one response; none open.
	intents, responses := map[int]int{}, map[int]int{}
	var lastTr *history.Transition
	for _, e := range es {
		r := e.Record
		switch r.Type {
		case history.TypeIntent:
			intents[*r.Interaction]++
		case history.TypeResponse:
			responses[*r.Interaction]++
			o.responses++
			o.responseCost += r.Response.CostUSD
			o.last = fmt.Sprintf("%s %s %s %s %q", r.Role, r.Response.Status, r.Response.Action, r.Response.ErrorCode, r.Response.Error)
			if intents[*r.Interaction] == 0 {
				t.Errorf("job %s: response (record %d) for interaction %d before any intent", sp.id, r.Seq, *r.Interaction)
			}
		case history.TypeTransition:
			lastTr = r.Transition
		}
	}
	for n, c := range intents {
		if c != 1 || responses[n] != 1 {
			t.Errorf("job %s (%s, %s): interaction %d has %d intents and %d responses, want 1 and 1", sp.id, sp.kind, dir, n, c, responses[n])
		}
	}
	for n := range responses {
		if intents[n] == 0 {
			t.Errorf("job %s: interaction %d has a response but no intent", sp.id, n)
		}
	}
	l, torn, err := history.Open(jd) // read-only use: the daemon is gone
	if err != nil {
		t.Errorf("job %s: open history: %v", sp.id, err)
	} else {
		if torn != nil {
			t.Errorf("job %s: torn tail left after the final run: %+v", sp.id, *torn)
		}
		if oi := l.State().OpenIntent; oi != nil {
			t.Errorf("job %s: interaction %d still open after the final run", sp.id, *oi.Interaction)
		}
		// The manifest file is the one the history's last unit committed;
		// or still that unit's base (killed before the file was replaced)
		// on a job the daemon does not come back to, restored by the next
		// transaction anyone makes.
		if lc := l.State().LastCommit; lc != nil {
			mb, _ := os.ReadFile(filepath.Join(jd, jobstore.ManifestFile))
			sum := sha256.Sum256(mb)
			if got := hex.EncodeToString(sum[:]); got != lc.Sum && (got != lc.Base || m.Status.Active()) {
				t.Errorf("job %s (%s, %s): manifest %s is neither the committed %s nor its base %s", sp.id, sp.kind, dir, got, lc.Sum, lc.Base)
			}
		}
		l.Close()
	}

	// (b) Chain, signatures and replay.
	rep, err := verify.Job(sp.id, jd, verify.Options{Public: pub, Manifest: m})
	if err != nil {
		t.Errorf("job %s: verify: %v", sp.id, err)
	} else if !rep.OK() {
		t.Errorf("job %s (%s, %s): verify: %d problems, first: %s", sp.id, sp.kind, dir, len(rep.Problems), rep.First())
	}

	// The manifest is where the history says the job is.
	if lastTr == nil || lastTr.To != string(m.Status) || lastTr.ToPhase != m.Phase() {
		t.Errorf("job %s (%s, %s): manifest says %s/%s, last transition %+v", sp.id, sp.kind, dir, m.Status, m.Phase(), lastTr)
	}

	// (d) One agent call counted per response recorded.
	if m.Metrics.AgentCalls != o.responses {
		t.Errorf("job %s (%s, %s): metrics.agent_calls %d, %d response records", sp.id, sp.kind, dir, m.Metrics.AgentCalls, o.responses)
	}
	if math.Abs(m.Metrics.CumulativeCost-o.responseCost*100) > 1e-6 {
		t.Errorf("job %s (%s, %s): cumulative_cost %.4f cents, responses cost %.4f cents", sp.id, sp.kind, dir, m.Metrics.CumulativeCost, o.responseCost*100)
	}
	return o
}

func tail(file string, from int64) string {
	b, _ := os.ReadFile(file)
	if int64(len(b)) > from {
		b = b[from:]
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
