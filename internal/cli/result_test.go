package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/testkit"
)

// runGitJob runs a job on a test repository to SUCCESS: the worker writes
// result.txt (and a terminal escape in its summary), the supervisor
// approves.
func runGitJob(t *testing.T) (jobs, repo string) {
	t.Helper()
	k := testkit.New(t)
	k.Runner = runner.NewEngine(k.Env, builtins.Effects())
	repo = testkit.GitRepo(t)
	step := testkit.Step("COMPLETED", "wrote result.txt \x1b[2J", "result.txt")
	step["files"] = map[string]string{"result.txt": "the result\n", "new-name.txt": "rewritten\n"}
	k.WriteJob("g", map[string]any{
		"workspace": map[string]any{"git": map[string]any{"repo": repo}},
		"agents":    map[string]any{"worker": testkit.Script(step), "supervisor": testkit.Script(testkit.Step("COMPLETED", "fine"))},
	})
	k.WriteJob("plain", map[string]any{"agents": map[string]any{"worker": testkit.Script(step), "supervisor": testkit.Script(testkit.Step("COMPLETED", "fine"))}})
	k.Run("g")
	k.Run("plain")
	return k.Dir, repo
}

func TestResultDiffPatchAndPush(t *testing.T) {
	t.Parallel()
	jobs, repo := runGitJob(t)
	base := testkit.Git(t, repo, "rev-parse", "main")
	ws := filepath.Join(jobs, "g", "workspace")
	tip := testkit.Git(t, ws, "rev-parse", "logist/g")

	code, out, errb := runMain(t, nil, "result", "g", "--jobs-dir", jobs)
	if code != 0 {
		t.Fatalf("result: %d %s %s", code, out, errb)
	}
	for _, want := range []string{"Branch:", "logist/g", "Base:", base, "Head:", tip, "result.txt", "2 files changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("result lacks %q:\n%s", want, out)
		}
	}

	patch := filepath.Join(t.TempDir(), "g.patch")
	if code, out, errb := runMain(t, nil, "result", "g", "--jobs-dir", jobs, "--patch", patch); code != 0 {
		t.Fatalf("result --patch: %d %s %s", code, out, errb)
	}
	check := t.TempDir()
	testkit.Git(t, check, "clone", "-q", repo, ".")
	testkit.Git(t, check, "checkout", "-q", base)
	testkit.Git(t, check, "apply", "--index", patch)
	if got, want := testkit.Git(t, check, "write-tree"), testkit.Git(t, ws, "rev-parse", tip+"^{tree}"); got != want {
		t.Errorf("the patch on the base gives tree %s, the branch has %s", got, want)
	}

	if code, _, errb := runMain(t, nil, "result", "g", "--jobs-dir", jobs, "--push", "main"); code != ExitUsage || !strings.Contains(errb, "current branch") {
		t.Errorf("push to the source's current branch: %d %s", code, errb)
	}
	if code, out, errb := runMain(t, nil, "result", "g", "--jobs-dir", jobs, "--push", "review/g", "--format", "json"); code != 0 {
		t.Fatalf("result --push: %d %s %s", code, out, errb)
	} else {
		var env map[string]any
		if err := json.Unmarshal([]byte(out), &env); err != nil || env["pushed"] != "review/g" || env["head_commit"] != tip || env["base_commit"] != base {
			t.Errorf("json: %v %s", err, out)
		}
	}
	if got := testkit.Git(t, repo, "rev-parse", "review/g"); got != tip {
		t.Errorf("pushed branch at %s, want %s", got, tip)
	}

	// logist diff: the commits' diff, the agent's text escaped.
	code, out, errb = runMain(t, nil, "diff", "g", "--jobs-dir", jobs)
	if code != 0 || !strings.Contains(out, "+the result") || !strings.Contains(out, "cp-start ("+base+")") {
		t.Errorf("diff: %d %s %s", code, out, errb)
	}
	code, out, _ = runMain(t, nil, "diff", "g", "--jobs-dir", jobs, "--from", "cp-0000-work", "--to", "cp-0001-review")
	if code != 0 || !strings.Contains(out, "no change") {
		t.Errorf("diff work→review: %d %s", code, out)
	}
	if code, _, errb := runMain(t, nil, "diff", "g", "--jobs-dir", jobs, "--from", "cp-9"); code != ExitNotFound || !strings.Contains(errb, "cp-0000-work") {
		t.Errorf("diff from an unknown checkpoint: %d %s", code, errb)
	}
	// Without git: the snapshots' files.
	code, out, _ = runMain(t, nil, "diff", "plain", "--jobs-dir", jobs)
	if code != 0 || !strings.Contains(out, "added") || !strings.Contains(out, "result.txt") || !strings.Contains(out, "new-name.txt") {
		t.Errorf("diff of a plain workspace: %d %s", code, out)
	}
	// A job without git is not a mistake of the command line: out of
	// order (the job is not of result's kind), no usage line, and the
	// command that shows its changes.
	if code, _, errb := runMain(t, nil, "result", "plain", "--jobs-dir", jobs); code != ExitOutOfOrder ||
		!strings.Contains(errb, "plain folder, not a git workspace") || !strings.Contains(errb, "logist diff plain shows its changes") || strings.Contains(errb, "usage:") {
		t.Errorf("result of a plain workspace: %d %s", code, errb)
	}
	if _, err := os.Stat(filepath.Join(repo, ".git", "refs", "heads", "logist")); err == nil {
		t.Error("the job branch leaked into the source repository")
	}
}

// logist result --patch refuses a FILE that is there and is not a regular
// file, naming what it is: opening a named pipe to write waited for a
// reader for ever.
func TestResultPatchRefusesNonRegularFile(t *testing.T) {
	t.Parallel()
	jobs, _ := runGitJob(t)
	fifo := mkfifo(t, filepath.Join(t.TempDir(), "g.patch"))
	code, _, errb := runMainWithin(t, "result", "g", "--jobs-dir", jobs, "--patch", fifo)
	if code != ExitUsage || !strings.Contains(errb, fifo+": not a regular file: it is a named pipe") {
		t.Fatalf("result --patch FIFO: exit %d:\n%s", code, errb)
	}
}

// result --patch writes no file into the jobs folder: one in the job's
// workspace would go into its next recovery point (and its branch), one
// beside the jobs would be taken for a job's folder. The same rule as
// discarded --into (outsideJobs).
func TestResultPatchRefusesTheJobsFolder(t *testing.T) {
	t.Parallel()
	jobs, _ := runGitJob(t)
	for _, p := range []string{
		filepath.Join(jobs, "g", "workspace", "g.patch"),
		filepath.Join(jobs, "g.patch"),
	} {
		code, _, errb := runMain(t, nil, "result", "g", "--jobs-dir", jobs, "--patch", p)
		if code != ExitUsage || !strings.Contains(errb, "inside the jobs folder") {
			t.Errorf("result --patch %s: exit %d:\n%s", p, code, errb)
		}
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("result --patch %s wrote the file", p)
		}
	}
}

// An explicitly empty path (result --patch "", discarded --into "") is
// refused as a usage error naming the flag: taken as absent, result
// wrote no patch and discarded listed the rollbacks, and both said
// nothing of it. Absent flags are still fine.
func TestEmptyPathFlagsRefused(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "j", jobJSON("PENDING", ""))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"result", "j", "--patch", ""}, "--patch: empty path"},
		{[]string{"result", "j", "--patch="}, "--patch: empty path"},
		{[]string{"discarded", "j", "--into", ""}, "--into: empty path"},
		{[]string{"discarded", "j", "--rollback", "x", "--into="}, "--into: empty path"},
	} {
		code, out, errb := runMain(t, nil, append(c.args, "--jobs-dir", jobs)...)
		if code != ExitUsage || !strings.Contains(errb, c.want) || !strings.Contains(errb, "usage: logist "+c.args[0]) {
			t.Errorf("logist %q: exit %d, stdout %q, stderr %q; want exit %d and %q", c.args, code, out, errb, ExitUsage, c.want)
		}
	}
	if code, out, errb := runMain(t, nil, "discarded", "j", "--jobs-dir", jobs); code != 0 || !strings.Contains(out, "no rollback discarded") {
		t.Errorf("discarded without --into: exit %d %s %s", code, out, errb)
	}
}
