package runner

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testkit"
)

// A run whose calls follow one another in one step (each outcome held for
// the next call's intent) is pruned as it goes, every agent.KeepRequests
// calls: its requests/ folder stays bounded, and the files of calls it
// drops are recycled for later calls (requests/.free/), not left behind
// while new inodes are made for every call.
func TestALongChainIsPrunedAsItGoes(t *testing.T) {
	const calls = 5*agent.KeepRequests + 7
	var maxFiles int
	var dir string
	m := longChain(t, calls, func(_ context.Context, req *agent.Request) error {
		dir = req.JobDir
		maxFiles = max(maxFiles, countRequestFiles(t, dir))
		return nil
	})
	if maxFiles > 2*agent.KeepRequests+1 {
		t.Errorf("requests/ held %d request files during the run of %d calls; want at most %d (pruned every %d calls)",
			maxFiles, m.Metrics.AgentCalls, 2*agent.KeepRequests+1, agent.KeepRequests)
	}
	pool, err := os.ReadDir(filepath.Join(dir, "requests", agent.FreeDir))
	if err != nil || len(pool) == 0 || len(pool) > agent.KeepRequests {
		t.Errorf("requests/%s: %d files (%v); want 1 to %d: dropped request files recycled", agent.FreeDir, len(pool), err, agent.KeepRequests)
	}
}

var requestFileName = regexp.MustCompile(`^\d{6,}\.json$`)

func countRequestFiles(t *testing.T, jobDir string) int {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(jobDir, "requests"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if requestFileName.MatchString(e.Name()) {
			n++
		}
	}
	return n
}

// A long chain of uncontained calls (a RETRY loop up to its calls budget)
// keeps its job's pid log bounded: the run's agent.PidFile compacts it
// as it passes agent.PidLogMax bytes, dropping the lines of calls whose
// agent has ended. It grew by a line per call, never rewritten.
func TestALongChainKeepsThePidLogBounded(t *testing.T) {
	const calls = 5*agent.KeepRequests + 7
	var log string
	m := longChain(t, calls, func(ctx context.Context, req *agent.Request) error {
		log = filepath.Join(req.JobDir, "requests", agent.PidLog)
		if err := os.MkdirAll(filepath.Dir(log), 0o700); err != nil {
			return err
		}
		spec := agent.ProcSpec{Argv: []string{"true"}, Dir: req.Workspace, PidLog: log, Interaction: req.Interaction}
		_, err := agent.RunProcess(ctx, spec)
		return err
	})
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			lines++
		}
	}
	t.Logf("the pid log after %d calls: %d lines, %d bytes", m.Metrics.AgentCalls, lines, len(b))
	// Its lines are 14 bytes or more (pids of 3 digits, start times of 5).
	if lines == 0 || lines > calls/2 || len(b) > agent.PidLogMax+64 {
		t.Errorf("the pid log after %d calls: %d lines, %d bytes; want 1 to %d lines, at most %d bytes and a line",
			m.Metrics.AgentCalls, lines, len(b), calls/2, agent.PidLogMax)
	}
}

// longChain runs job "long", whose supervisor answers RETRY until the job
// has made calls calls, each call's agent doing onCall first; it fails
// the test unless the job ends SUCCESS after them, and returns its
// manifest.
func longChain(t *testing.T, calls int, onCall func(context.Context, *agent.Request) error) *manifest.Manifest {
	t.Helper()
	k := testkit.New(t)
	e := NewEngine(k.Env, builtins.Effects())
	k.Runner = e
	e.NewProvider = func(manifest.AgentConfig) (agent.Provider, error) {
		return providerFunc(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
			if err := onCall(ctx, req); err != nil {
				return nil, err
			}
			if req.Role == "supervisor" && req.Interaction < calls-1 {
				return answer("RETRY", "again"), nil
			}
			return answer("COMPLETED", "done"), nil
		}), nil
	}
	j := job(map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"true"}}},
		map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"true"}}})
	j["limits"] = map[string]any{"max_retries": 1000}
	k.WriteJob("long", j)
	if err := e.Run(context.Background(), "long"); err != nil {
		t.Fatal(err)
	}
	m := k.Load("long")
	if m.Status != "SUCCESS" || m.Metrics.AgentCalls < calls {
		t.Fatalf("%s after %d calls (%s)", m.Status, m.Metrics.AgentCalls, m.Run.Reason)
	}
	return m
}
