// Package agentcli runs Logist jobs through the real agent CLIs (installed
// from npm at pinned versions by scripts/install-agents.sh into
// .cache/agents) against the model-API stub (internal/testbed/modelstub). Locally a
// missing program skips its test with the reason; with CI=true it fails.
package agentcli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/daemon"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testbed/modelstub"
)

// agentsDir is where scripts/install-agents.sh puts the programs.
func agentsDir(t *testing.T) string {
	if d := os.Getenv("LOGIST_AGENTS_DIR"); d != "" {
		return d
	}
	d, err := filepath.Abs("../../../.cache/agents")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// ciAgents run in `make test` (and CI); the others run under
// `make test-agents` (LOGIST_TEST_AGENTS=all, or a comma-separated list).
var ciAgents = map[string]bool{"claude-code": true, "codex": true, "opencode": true}

// requireAgent skips a test of an agent outside the CI set unless
// make test-agents asked for it, and returns the installed program.
func requireAgent(t *testing.T, name, bin string) string {
	t.Helper()
	sel := os.Getenv("LOGIST_TEST_AGENTS")
	if !ciAgents[name] && sel != "all" && !strings.Contains(","+sel+",", ","+name+",") {
		t.Skip(name + " runs under `make test-agents` (LOGIST_TEST_AGENTS=all)")
	}
	return program(t, name, bin)
}

// program returns the installed program of an agent (name as in
// scripts/agent-versions.txt) or skips/fails the test when it is missing.
func program(t *testing.T, name, bin string) string {
	t.Helper()
	p := filepath.Join(agentsDir(t), name, "node_modules", ".bin", bin)
	if _, err := os.Stat(p); err != nil {
		msg := "agent CLI " + name + " is not installed (" + p + "); run: sh scripts/install-agents.sh " + name
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip("SKIPPED LOUDLY: " + msg)
	}
	return p
}

// answer is a valid Logist answer naming the file the stub had written.
func answer(file string) string {
	b, _ := json.Marshal(map[string]any{"action": "COMPLETED", "evidence_files": []string{file},
		"summary_for_supervisor": "Wrote " + file + " with the program's own write tool."})
	return string(b)
}

// jobRun is one job run by logistd --once.
type jobRun struct {
	Dir      string // the jobs folder
	ID       string
	Manifest *manifest.Manifest
	Records  []history.Record
	Log      string // the daemon's JSON log
}

// runJob writes a one-phase job whose "worker" role is the given agent
// config into a fresh jobs folder and runs logistd --once on it.
func runJob(t *testing.T, id string, agentCfg map[string]any, extra map[string]any) *jobRun {
	t.Helper()
	jobs := t.TempDir()
	m := map[string]any{
		"schema_version":   1,
		"job_id":           id,
		"description":      "agent CLI end-to-end test",
		"task_description": "Create the file the model asks for, then answer.",
		"workflow": map[string]any{"name": "solo", "start": "work", "phases": map[string]any{
			"work": map[string]any{"role": "worker", "status": "RUNNING", "on": map[string]any{"COMPLETED": "SUCCESS", "RETRY": "work", "STUCK": "INTERVENTION_REQUIRED"}},
		}},
		"agents": map[string]any{"worker": agentCfg},
		"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": 3, "call_timeout_seconds": 180},
	}
	for k, v := range extra {
		m[k] = v
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(jobs, id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jobs, id, "job.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return rerun(t, jobs, id)
}

// rerun runs logistd --once on a jobs folder again.
func rerun(t *testing.T, jobs, id string) *jobRun {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	code := daemon.Main(ctx, []string{"logistd", "--jobs-dir", jobs, "--once", "--listen", ""}, os.Getenv, &out, &errb)
	if code != 0 {
		t.Fatalf("logistd exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	r := &jobRun{Dir: jobs, ID: id, Log: out.String() + errb.String()}
	store := jobstore.New(jobs)
	m, err := store.Load(id)
	if err != nil {
		t.Fatalf("load %s: %v\n%s", id, err, r.Log)
	}
	r.Manifest = m
	recs, err := history.ReadAll(filepath.Join(jobs, id))
	if err != nil {
		t.Fatalf("history of %s: %v", id, err)
	}
	r.Records = recs
	return r
}

// responses are the job's response records.
func (r *jobRun) responses() []*history.Response {
	var out []*history.Response
	for i := range r.Records {
		if r.Records[i].Response != nil {
			out = append(out, r.Records[i].Response)
		}
	}
	return out
}

// workspaceFile reads a file of the job's workspace.
func (r *jobRun) workspaceFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, r.ID, "workspace", rel))
	if err != nil {
		t.Fatalf("workspace file %s: %v\nlog:\n%s", rel, err, tail(r.Log, 4000))
	}
	return string(b)
}

func (r *jobRun) requireStatus(t *testing.T, want string) {
	t.Helper()
	if got := string(r.Manifest.Status); got != want {
		var sb strings.Builder
		for _, resp := range r.responses() {
			j, _ := json.Marshal(resp)
			sb.Write(j)
			sb.WriteByte('\n')
		}
		t.Fatalf("job %s is %s, want %s\nresponses:\n%s\nlog:\n%s", r.ID, got, want, sb.String(), tail(r.Log, 6000))
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// startStub starts the model stub for a test.
func startStub(t *testing.T, opts modelstub.Options) *modelstub.Server {
	t.Helper()
	s, err := modelstub.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// limits are a job's limits with the given retries and call timeout (and
// a short backoff, so that Logist's own retries cost little time).
func limits(retries int, timeout float64) map[string]any {
	return map[string]any{"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": retries, "call_timeout_seconds": timeout}}
}

// codes lists the responses' status/error codes, for assertions and
// failure messages.
func codes(rs []*history.Response) string {
	var out []string
	for _, r := range rs {
		c := r.Status
		if r.ErrorCode != "" {
			c += ":" + r.ErrorCode
		}
		out = append(out, c)
	}
	return strings.Join(out, " ")
}

// errorDetails is what each error response says (its error and the end of
// its stderr), for a failure message that shows why a call failed.
func errorDetails(rs []*history.Response) string {
	var b strings.Builder
	for i, r := range rs {
		if r.ErrorCode == "" {
			continue
		}
		fmt.Fprintf(&b, "\n  response %d %s: %s", i, r.ErrorCode, r.Error)
		if r.Stderr != "" {
			e := r.Stderr
			if len(e) > 2000 {
				e = e[len(e)-2000:]
			}
			fmt.Fprintf(&b, "\n    stderr: %s", e)
		}
	}
	return b.String()
}

// mainRequests are the main-conversation requests the stub received.
func mainRequests(s *modelstub.Server) []modelstub.Logged {
	var out []modelstub.Logged
	for _, l := range s.Requests() {
		if l.Turn != nil && !l.Turn.Side {
			out = append(out, l)
		}
	}
	return out
}

// markedProcs lists the pids of processes that carry the marker in their
// environment (command.env): a call's whole process group inherits it.
func markedProcs(marker string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err == nil && bytes.Contains(env, []byte("LOGIST_TEST_MARK="+marker+"\x00")) {
			out = append(out, e.Name())
		}
	}
	return out
}

// watchProcs counts the marked processes every 100 ms until the returned
// stop is called, which gives the most seen at once: a check that none is
// left afterwards then is known to see them when they are there.
func watchProcs(marker string) (stop func() int) {
	quit := make(chan struct{})
	done := make(chan int)
	go func() {
		most := 0
		for {
			most = max(most, len(markedProcs(marker)))
			select {
			case <-quit:
				done <- most
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() int {
		close(quit)
		return <-done
	}
}
