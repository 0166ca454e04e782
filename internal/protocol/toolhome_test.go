package protocol

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/sandbox"
)

func TestMain(m *testing.M) {
	// This binary is the sandbox's launcher and helper in the contained
	// tool runs' tests.
	sandbox.Helper()
	os.Exit(m.Run())
}

// homeRun runs a shell tool of the job in jobDir that reports its HOME
// and TMPDIR and writes in both, and returns what it printed.
func homeRun(t *testing.T, ctx context.Context, jobDir, ws, id string) (home, tmp string) {
	t.Helper()
	in := Intent{ID: id, ProposalID: "p", Tool: ToolShell, RiskClass: "low", Input: map[string]any{
		"command": `echo "$HOME"; echo "$TMPDIR"; echo x > "$HOME/.rc" && mkdir "$TMPDIR/t" && echo y > "$TMPDIR/t/f" && ls -d "$HOME"/.rc "$TMPDIR"/t/f >/dev/null`}}
	res, err := ExecuteAt(ctx, ws, RunDir(jobDir, id), in, NewStore(jobDir), Policy{}.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewStore(jobDir).Get(res.OutputArtifact)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	if !res.OK {
		t.Fatalf("the run could not write in its HOME and TMPDIR: %+v %v", res, out)
	}
	lines := strings.Split(strings.TrimSpace(out["stdout"].(string)), "\n")
	if len(lines) != 2 {
		t.Fatalf("stdout %q", out["stdout"])
	}
	return lines[0], lines[1]
}

// staleHome is what a daemon killed during a tool run of the job in
// jobDir leaves: the run's home, with a folder the run made unreadable.
func staleHome(t *testing.T, jobDir string) string {
	t.Helper()
	stale := filepath.Join(jobDir, "requests", "logist-tool-home-"+"killed")
	if err := os.MkdirAll(filepath.Join(stale, "locked", "deep"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, "locked", "deep", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(stale, "locked"), 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(stale, "locked"), 0o700) }) // should it stay
	return stale
}

// toolHomeJob is a job folder with its workspace, and the system's
// temporary folder pointed at an empty folder of the test's.
func toolHomeJob(t *testing.T) (jobDir, ws, sysTmp string) {
	t.Helper()
	jobDir, sysTmp = t.TempDir(), t.TempDir()
	ws = filepath.Join(jobDir, "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", sysTmp)
	return jobDir, ws, sysTmp
}

// checkToolHome: the run's home (HOME and TMPDIR) was in the job's
// requests folder, outside the workspace, and went with the run; the
// stale home of a killed run went at its start; nothing was left in the
// workspace or the job's requests folder.
func checkToolHome(t *testing.T, jobDir, ws, home, tmp, stale string) {
	t.Helper()
	reqs := filepath.Join(jobDir, "requests")
	if filepath.Dir(home) != reqs || !strings.HasPrefix(filepath.Base(home), "logist-tool-home-") || tmp != home {
		t.Errorf("HOME %q, TMPDIR %q; want one %s* folder in %s", home, tmp, "logist-tool-home-", reqs)
	}
	if _, err := os.Lstat(home); !os.IsNotExist(err) {
		t.Errorf("the run's home outlived it: %v", err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the killed run's home %s was not removed: %v", stale, err)
	}
	if ents, _ := os.ReadDir(ws); len(ents) != 0 {
		t.Errorf("the run left %v in the workspace", ents)
	}
	if ents, _ := os.ReadDir(reqs); len(ents) != 0 {
		t.Errorf("the run left %v in the requests folder", ents)
	}
}

// A tool run's scratch home is the job's, in its requests folder: none
// is made in the system's temporary folder (a daemon killed mid-run left
// one there for good), and one a killed run left goes at the next run.
func TestToolHomeIsInTheJobFolder(t *testing.T) {
	jobDir, ws, sysTmp := toolHomeJob(t)
	stale := staleHome(t, jobDir)
	home, tmp := homeRun(t, context.Background(), jobDir, ws, "intent-1")
	checkToolHome(t, jobDir, ws, home, tmp, stale)
	if ents, _ := os.ReadDir(sysTmp); len(ents) != 0 {
		t.Errorf("the run left %v in the temporary folder", ents)
	}
}

// The same in a sandbox: the home, outside the workspace, is writable
// there (HOME and TMPDIR alike).
func TestContainedToolHomeIsInTheJobFolder(t *testing.T) {
	for _, layer := range []sandbox.Layer{sandbox.LayerBwrap, sandbox.LayerLandlock} {
		t.Run(string(layer), func(t *testing.T) {
			cont := &agent.Containment{Exec: &sandbox.Local{}, Status: sandbox.Probe()}
			ex, err := cont.For(&manifest.Manifest{Sandbox: string(layer)})
			if err != nil {
				t.Skip(err)
			}
			jobDir, ws, sysTmp := toolHomeJob(t)
			stale := staleHome(t, jobDir)
			home, tmp := homeRun(t, agent.WithExecutor(context.Background(), ex), jobDir, ws, "intent-1")
			checkToolHome(t, jobDir, ws, home, tmp, stale)
			ents, _ := os.ReadDir(sysTmp)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), "logist-tool-home-") {
					t.Errorf("the run left %s in the temporary folder", e.Name())
				}
			}
		})
	}
}
