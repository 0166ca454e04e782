package runner

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

func gitJob(repo, ref string, worker map[string]any) map[string]any {
	m := job(worker, okSupervisor())
	g := map[string]any{"repo": repo}
	if ref != "" {
		g["ref"] = ref
	}
	m["workspace"] = map[string]any{"git": g}
	return m
}

func writes(action, summary string, files map[string]string, evidence ...string) map[string]any {
	s := testkit.Step(action, summary, evidence...)
	s["files"] = files
	return s
}

// points are the job's recovery points, in order.
func points(recs []history.Record) []*history.RecoveryPoint {
	var out []*history.RecoveryPoint
	for _, r := range testkit.OfType(recs, history.TypeRecoveryPoint) {
		out = append(out, r.RecoveryPoint)
	}
	return out
}

// A source that cannot be had stops the job before any agent runs, with
// WORKSPACE_SOURCE and a reason naming what is wrong.
func TestWorkspaceFailsBeforeAnyAgent(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	repo := testkit.GitRepo(t)
	f.WriteJob("badref", gitJob(repo, "no-such-ref", okSupervisor()))
	f.WriteJob("norepo", gitJob(filepath.Join(t.TempDir(), "nothing"), "", okSupervisor()))
	f.WriteJob("nocopy", map[string]any{"agents": job(okSupervisor(), okSupervisor())["agents"], "workspace": map[string]any{"copy": filepath.Join(t.TempDir(), "nothing")}})
	for id, want := range map[string]string{"badref": `ref "no-such-ref"`, "norepo": "cannot clone", "nocopy": "workspace copy"} {
		f.Run(id)
		m := f.Load(id)
		if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.WorkspaceSource || !strings.Contains(m.Run.Reason, want) {
			t.Errorf("%s: %s %s %q, want INTERVENTION_REQUIRED WORKSPACE_SOURCE %q", id, m.Status, m.Run.ErrorCode, m.Run.Reason, want)
		}
		if n := len(testkit.OfType(f.Records(id), history.TypeIntent)); n != 0 {
			t.Errorf("%s: %d agent calls recorded", id, n)
		}
	}
}

func TestWorkspaceCopy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	src := testkit.GitRepo(t)
	f.WriteJob("c", map[string]any{"agents": job(okSupervisor(), okSupervisor())["agents"], "workspace": map[string]any{"copy": src}})
	f.Run("c")
	if m := f.Load("c"); m.Status != lifecycle.Success {
		t.Fatalf("%s %s", m.Status, m.Run.Reason)
	}
	ws := filepath.Join(f.Dir, "c", "workspace")
	if b, err := os.ReadFile(filepath.Join(ws, "logo.bin")); err != nil || !bytes.Equal(b, append(testkit.BinaryFile(), 0, 7)) {
		t.Errorf("logo.bin not copied: %v", err)
	}
	if _, err := os.Stat(filepath.Join(ws, ".git")); err == nil {
		t.Error(".git was copied")
	}
	if p := points(f.Records("c"))[0]; p.Snapshot == nil || p.Snapshot.Files != 5 || p.Git != nil {
		t.Errorf("cp-start: %+v", p)
	}
}

// Every recovery point of a git workspace is a commit on the job branch:
// cp-start the base, each phase's a commit on top of the previous one,
// named in the point (and in jobHistory.json); the branch ends at the
// last point's commit.
func TestGitWorkspaceCommitsEachPoint(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	repo := testkit.GitRepo(t)
	base := testkit.Git(t, repo, "rev-parse", "feature")
	f.WriteJob("g", gitJob(repo, "feature", testkit.Script(
		writes("RETRY", "not yet", map[string]string{"draft.txt": "draft"}),
		writes("COMPLETED", "wrote the result", map[string]string{"result.txt": "done\n"}, "result.txt"))))
	f.Run("g")
	m := f.Load("g")
	if m.Status != lifecycle.Success {
		t.Fatalf("%s %s", m.Status, m.Run.Reason)
	}
	ps := points(f.Records("g"))
	if len(ps) != 3 {
		t.Fatalf("%d points", len(ps))
	}
	if g := ps[0].Git; g == nil || g.Commit != base || g.Repo != repo || g.Ref != "feature" || g.Branch != "logist/g" {
		t.Errorf("cp-start's git: %+v, want base %s", ps[0].Git, base)
	}
	ws := filepath.Join(f.Dir, "g", "workspace")
	prev := base
	for _, p := range ps[1:] {
		if p.Git == nil {
			t.Fatalf("%s has no commit", p.CheckpointID)
		}
		if got := testkit.Git(t, ws, "rev-parse", p.Git.Commit+"^1"); got != prev {
			t.Errorf("%s's commit's parent %s, want %s", p.CheckpointID, got, prev)
		}
		msg := testkit.Git(t, ws, "log", "-1", "--format=%B", p.Git.Commit)
		if !strings.Contains(msg, "Logist-Checkpoint: "+p.CheckpointID) {
			t.Errorf("%s's message:\n%s", p.CheckpointID, msg)
		}
		prev = p.Git.Commit
	}
	if msg := testkit.Git(t, ws, "log", "-1", "--format=%B", ps[1].Git.Commit); !strings.Contains(msg, "worker completed phase work") || !strings.Contains(msg, "wrote the result") {
		t.Errorf("work's commit message:\n%s", msg)
	}
	// The RETRY's draft is in the work phase's commit: undeclared
	// changes show up as the commit's diff.
	if files := testkit.Git(t, ws, "show", "--name-only", "--format=", ps[1].Git.Commit); files != "draft.txt\nresult.txt" {
		t.Errorf("work's commit changes %q", files)
	}
	if tip := testkit.Git(t, ws, "rev-parse", "logist/g"); tip != prev {
		t.Errorf("branch at %s, want the last point's %s", tip, prev)
	}
	b, err := os.ReadFile(filepath.Join(f.Dir, "g", history.JobHistoryFile))
	if err != nil || !bytes.Contains(b, []byte(prev)) {
		t.Errorf("jobHistory.json lacks the last commit: %v", err)
	}
}

// The crash case: the point's commit is made, the unit that records the
// point is not (a crash, here a full disk). On restart the branch and the
// history agree again: the commit no record names is undone before the
// call is asked again, and every Logist commit on the branch is a point's.
func TestGitCommitWithoutItsPointIsUndoneOnRestart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	repo := testkit.GitRepo(t)
	f.WriteJob("c", gitJob(repo, "", testkit.Script(writes("COMPLETED", "wrote it", map[string]string{"a.txt": "A"}, "a.txt"))))
	var failed atomic.Bool
	f.Env.History.Write = func(file *os.File, line []byte) (int, error) {
		if bytes.Contains(line, []byte(`"cp-0000-work"`)) && !failed.Swap(true) {
			return 0, syscall.ENOSPC
		}
		return file.Write(line)
	}
	if err := f.Engine.Run(context.Background(), "c"); err == nil {
		t.Fatal("the run went on past the failed append")
	}
	ws := filepath.Join(f.Dir, "c", "workspace")
	orphan := testkit.Git(t, ws, "rev-parse", "logist/c")
	if !strings.Contains(testkit.Git(t, ws, "log", "-1", "--format=%B", orphan), "cp-0000-work") {
		t.Fatal("no commit was made before the failed append; the case is not exercised")
	}
	var logs logBuffer
	f.Env.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	f.Run("c")
	if m := f.Load("c"); m.Status != lifecycle.Success {
		t.Fatalf("%s %s", m.Status, m.Run.Reason)
	}
	if logs.count("c", codes.GitReconciled, "") != 1 || !bytes.Contains(logs.bytes(), []byte(orphan)) {
		t.Errorf("no GIT_RECONCILED line naming %s:\n%s", orphan, logs.bytes())
	}
	recorded := map[string]bool{}
	ps := points(f.Records("c"))
	for _, p := range ps {
		recorded[p.Git.Commit] = true
	}
	for _, c := range strings.Fields(testkit.Git(t, ws, "log", "--format=%H", "--author=logist@localhost", "logist/c")) {
		if !recorded[c] {
			t.Errorf("commit %s on the branch is no point's", c)
		}
	}
	if tip := testkit.Git(t, ws, "rev-parse", "logist/c"); tip != ps[len(ps)-1].Git.Commit {
		t.Errorf("branch at %s, the last point at %s", tip, ps[len(ps)-1].Git.Commit)
	}
	checkIntact(t, f, "c")
}

// Without git on logistd's PATH a git workspace cannot be made: the job
// stops before any agent with a reason that says so. (Not parallel: PATH.)
func TestWorkspaceSourceWithoutGit(t *testing.T) {
	f := newFixture(t)
	repo := testkit.GitRepo(t)
	f.WriteJob("nogit", gitJob(repo, "", okSupervisor()))
	t.Setenv("PATH", t.TempDir())
	f.Run("nogit")
	m := f.Load("nogit")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.WorkspaceSource || !strings.Contains(m.Run.Reason, "git is not installed") {
		t.Errorf("%s %s %q", m.Status, m.Run.ErrorCode, m.Run.Reason)
	}
	if n := len(testkit.OfType(f.Records("nogit"), history.TypeIntent)); n != 0 {
		t.Errorf("%d agent calls recorded", n)
	}
}

// A repository made unsafe after its answer was judged (a process the
// agent left behind; here the answer's check is taken away) has its
// point's commit refused, and the job waits for a steward before any
// other agent runs, saying what was found and how to remove it. Once
// removed and resumed, the job goes on and the next point commits the
// agent's work. Another commit failure leaves the job going
// (TestGitWorkspaceCommitsEachPoint's siblings). Not parallel: it swaps
// answerCheck.
func TestUnsafeGitWorkspaceWaitsForASteward(t *testing.T) {
	answerCheck = func(bool, string) func(string) error { return nil }
	t.Cleanup(func() { answerCheck = gitws.AnswerCheck })
	f := newFixture(t)
	repo := testkit.GitRepo(t)
	f.WriteJob("g", gitJob(repo, "", okSupervisor()))
	ws := filepath.Join(f.Dir, "g", "workspace")
	var supervisorCalls atomic.Int32
	f.fake(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
		if req.Role == "supervisor" {
			supervisorCalls.Add(1)
			return answer("COMPLETED", "looks good"), nil
		}
		return saysDone(ws, "hello.txt", "said hello", filepath.Join(f.Dir, "ran"), true)
	})
	f.Run("g")
	m := f.Load("g")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.GitUnsafe ||
		!strings.Contains(m.Run.Reason, "the last recovery point has no commit on the job branch: git workspace ") ||
		!strings.Contains(m.Run.Reason, "sets filter.x.clean") || !strings.HasSuffix(m.Run.Reason, "; then logist resume") {
		t.Fatalf("%s %s %q, want INTERVENTION_REQUIRED %s naming the filter", m.Status, m.Run.ErrorCode, m.Run.Reason, codes.GitUnsafe)
	}
	if n := supervisorCalls.Load(); n != 0 {
		t.Errorf("the supervisor was called %d times before a steward looked", n)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "ran")); err == nil {
		t.Fatal("the planted filter ran")
	}

	// Resumed as it is: it waits again, no agent called.
	st := steward.New(f.Env, f.Engine.Effects)
	if _, err := st.Resume("g", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Run("g")
	if m := f.Load("g"); m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.GitUnsafe || supervisorCalls.Load() != 0 {
		t.Fatalf("resumed with the filter still set: %s %s, %d supervisor calls", m.Status, m.Run.ErrorCode, supervisorCalls.Load())
	}

	testkit.Git(t, ws, "config", "--remove-section", "filter.x")
	if _, err := st.Resume("g", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Run("g")
	if m := f.Load("g"); m.Status != lifecycle.Success || m.Run.GitError != "" || supervisorCalls.Load() != 1 {
		t.Fatalf("after the steward's fix: %s %q, git_error %q, %d supervisor calls", m.Status, m.Run.Reason, m.Run.GitError, supervisorCalls.Load())
	}
	if files := testkit.Git(t, ws, "show", "--name-only", "--format=", "logist/g"); !strings.Contains(files, "hello.txt") {
		t.Errorf("the job branch's last commit changes %q, want the worker's hello.txt", files)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "ran")); err == nil {
		t.Error("the planted filter ran")
	}
}

// gitFixture is a fixture holding job g, a git workspace job on a new
// repository (its agents are the test's to fake), and g's workspace.
func gitFixture(t *testing.T) (*fixture, string) {
	f := newFixture(t)
	f.WriteJob("g", gitJob(testkit.GitRepo(t), "", okSupervisor()))
	return f, filepath.Join(f.Dir, "g", "workspace")
}

// plantFilter sets a clean filter in the workspace's repository that the
// daemon's git would run (it would create ran).
func plantFilter(ws, ran string) error {
	cfg, err := os.OpenFile(filepath.Join(ws, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = cfg.WriteString("[filter \"x\"]\n\tclean = sh -c 'touch " + ran + "; cat'\n")
	if cerr := cfg.Close(); err == nil {
		err = cerr
	}
	return err
}

// saysDone writes file in the workspace ws, having first planted the
// filter (plantFilter, ran) when plant, and answers COMPLETED naming it.
func saysDone(ws, file, summary, ran string, plant bool) (*agent.Result, error) {
	if plant {
		if err := plantFilter(ws, ran); err != nil {
			return nil, err
		}
	}
	if err := os.WriteFile(filepath.Join(ws, file), []byte(summary+"\n"), 0o644); err != nil {
		return nil, err
	}
	return answer("COMPLETED", summary, file), nil
}

// refusedForTheFilter asserts job id waits for a steward because an answer
// that completed its phase left the filter: the answer refused as the
// workspace's verdict (replayed as recorded), no filter run, the history
// intact and verified.
func refusedForTheFilter(t *testing.T, f *fixture, id, role string) {
	t.Helper()
	m := f.Load(id)
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.ProtocolViolation ||
		!strings.Contains(m.Run.Reason, "workspace repository: git workspace ") || !strings.Contains(m.Run.Reason, "sets filter.x.clean") {
		t.Fatalf("%s %s %q, want INTERVENTION_REQUIRED %s naming the filter", m.Status, m.Run.ErrorCode, m.Run.Reason, codes.ProtocolViolation)
	}
	resps := testkit.OfType(f.Records(id), history.TypeResponse)
	last := resps[len(resps)-1].Response
	if resps[len(resps)-1].Role != role || last.Status == history.StatusSuccess || len(last.Violations) != 1 ||
		!last.Violations[0].Workspace || last.Violations[0].Path != "" {
		t.Fatalf("%s's last response: %s %s %+v, want refused with the repository's verdict", role, last.Status, last.ErrorCode, last.Violations)
	}
	if _, err := os.Stat(filepath.Join(f.Dir, "ran")); err == nil {
		t.Fatal("the planted filter ran")
	}
	checkIntact(t, f, id)
}

// An answer that completes its phase while the workspace's repository is
// one Logist will not commit in (a filter in .git/config) is refused: its
// phase would end without its work on the job branch. The job waits for a
// steward with what was found and how to remove it; resumed as it is, the
// agent is asked again and refused again; once the steward removes it, the
// agent's next answer is committed and the job ends on the branch.
func TestUnsafeRepositoryRefusesTheAnswer(t *testing.T) {
	t.Parallel()
	f, ws := gitFixture(t)
	var workerCalls, supervisorCalls atomic.Int32
	f.fake(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
		if req.Role == "supervisor" {
			supervisorCalls.Add(1)
			return answer("COMPLETED", "looks good"), nil
		}
		return saysDone(ws, "hello.txt", "said hello", filepath.Join(f.Dir, "ran"), workerCalls.Add(1) == 1)
	})
	f.Run("g")
	refusedForTheFilter(t, f, "g", "worker")
	if supervisorCalls.Load() != 0 || workerCalls.Load() != 1 {
		t.Fatalf("%d worker and %d supervisor calls before a steward looked, want 1 and 0", workerCalls.Load(), supervisorCalls.Load())
	}

	st := steward.New(f.Env, f.Engine.Effects)
	if _, err := st.Resume("g", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Run("g")
	refusedForTheFilter(t, f, "g", "worker")
	if supervisorCalls.Load() != 0 || workerCalls.Load() != 2 {
		t.Fatalf("resumed as it was: %d worker and %d supervisor calls, want 2 and 0", workerCalls.Load(), supervisorCalls.Load())
	}

	testkit.Git(t, ws, "config", "--remove-section", "filter.x")
	if _, err := st.Resume("g", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Run("g")
	if m := f.Load("g"); m.Status != lifecycle.Success || m.Run.GitError != "" || workerCalls.Load() != 3 || supervisorCalls.Load() != 1 {
		t.Fatalf("after the steward's fix: %s %q, git_error %q, %d worker and %d supervisor calls", m.Status, m.Run.Reason, m.Run.GitError, workerCalls.Load(), supervisorCalls.Load())
	}
	if files := testkit.Git(t, ws, "log", "--name-only", "--format=", "logist/g"); !strings.Contains(files, "hello.txt") {
		t.Errorf("the job branch changes %q, want the worker's hello.txt", files)
	}
	checkIntact(t, f, "g")
}

// The same at the job's last phase: the supervisor's COMPLETED would end
// the job SUCCESS, and SUCCESS means the job branch holds the final
// commit; the answer is refused instead, and once the steward removes the
// filter the job ends with its last recovery point's commit on the branch.
func TestUnsafeRepositoryAtTheLastPhaseIsNoSuccess(t *testing.T) {
	t.Parallel()
	f, ws := gitFixture(t)
	var supervisorCalls atomic.Int32
	f.fake(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
		if req.Role == "worker" {
			return saysDone(ws, "hello.txt", "said hello", "", false)
		}
		return saysDone(ws, "review.txt", "looks good", filepath.Join(f.Dir, "ran"), supervisorCalls.Add(1) == 1)
	})
	f.Run("g")
	refusedForTheFilter(t, f, "g", "supervisor")

	testkit.Git(t, ws, "config", "--remove-section", "filter.x")
	if _, err := steward.New(f.Env, f.Engine.Effects).Resume("g", steward.ResumeOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Run("g")
	m := f.Load("g")
	if m.Status != lifecycle.Success || m.Run.GitError != "" || supervisorCalls.Load() != 2 {
		t.Fatalf("after the steward's fix: %s %q, git_error %q, %d supervisor calls", m.Status, m.Run.Reason, m.Run.GitError, supervisorCalls.Load())
	}
	var lastPoint *history.RecoveryPoint
	for _, r := range testkit.OfType(f.Records("g"), history.TypeRecoveryPoint) {
		lastPoint = r.RecoveryPoint
	}
	head := strings.TrimSpace(testkit.Git(t, ws, "rev-parse", "logist/g"))
	if lastPoint == nil || lastPoint.Git == nil || lastPoint.Git.Commit != head {
		t.Fatalf("the job branch is at %s, want the last recovery point's commit (%+v)", head, lastPoint)
	}
	if files := testkit.Git(t, ws, "show", "--name-only", "--format=", head); !strings.Contains(files, "review.txt") {
		t.Errorf("the job branch's last commit changes %q, want the supervisor's review.txt", files)
	}
	checkIntact(t, f, "g")
}

// An answer that leaves the workspace without the job's repository (.git
// removed, or made again without the job branch), or with a lock Logist's
// commit would stop at, is refused too: accepted, the job would go on, and
// end SUCCESS, with no job branch, one that does not hold the source's
// history, or one without its last commit. The job waits for a steward,
// saying what was found; its history verifies.
func TestUncommittableRepositoryRefusesTheAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, role, want string
		lose             func(t *testing.T, ws string)
	}{
		{"removed by the worker", "worker", "the workspace has no .git folder", func(t *testing.T, ws string) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Error(err)
			}
		}},
		{"made again by the supervisor", "supervisor", "its repository has no branch logist/g", func(t *testing.T, ws string) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Error(err)
			}
			testkit.Git(t, ws, "init", "-q")
			testkit.Git(t, ws, "add", "-A")
			testkit.Git(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qm", "mine")
		}},
		{"HEAD locked by the supervisor", "supervisor", ".git/HEAD.lock is there", func(t *testing.T, ws string) {
			if err := os.WriteFile(filepath.Join(ws, ".git", "HEAD.lock"), nil, 0o644); err != nil {
				t.Error(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, ws := gitFixture(t)
			f.fake(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
				if req.Role == tc.role {
					tc.lose(t, ws)
				}
				return answer("COMPLETED", "done"), nil
			})
			f.Run("g")
			m := f.Load("g")
			if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.ProtocolViolation ||
				!strings.Contains(m.Run.Reason, "workspace repository: git workspace ") || !strings.Contains(m.Run.Reason, tc.want) ||
				!strings.Contains(m.Run.Reason, "cannot be committed on its branch logist/g") {
				t.Fatalf("%s %s %q, want INTERVENTION_REQUIRED %s: %s", m.Status, m.Run.ErrorCode, m.Run.Reason, codes.ProtocolViolation, tc.want)
			}
			resps := testkit.OfType(f.Records("g"), history.TypeResponse)
			if last := resps[len(resps)-1]; last.Role != tc.role || last.Response.Status == history.StatusSuccess {
				t.Fatalf("the last response is %s's, %s", last.Role, last.Response.Status)
			}
			checkIntact(t, f, "g")
		})
	}
}

// A point whose commit failed because the job's repository is gone (here
// the answer's check is taken away, as for a repository lost after its
// answer was judged) stops the job before the next agent too, with the
// same rule as the answer's (gitws.Committable). Not parallel: it swaps
// answerCheck.
func TestLostRepositoryAtAPointWaitsForASteward(t *testing.T) {
	answerCheck = func(bool, string) func(string) error { return nil }
	t.Cleanup(func() { answerCheck = gitws.AnswerCheck })
	f, ws := gitFixture(t)
	var supervisorCalls atomic.Int32
	f.fake(func(_ context.Context, req *agent.Request) (*agent.Result, error) {
		if req.Role == "supervisor" {
			supervisorCalls.Add(1)
			return answer("COMPLETED", "looks good"), nil
		}
		if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
			return nil, err
		}
		return answer("COMPLETED", "done"), nil
	})
	f.Run("g")
	m := f.Load("g")
	if m.Status != lifecycle.InterventionRequired || m.Run.ErrorCode != codes.GitUnsafe || supervisorCalls.Load() != 0 ||
		!strings.Contains(m.Run.Reason, "the last recovery point has no commit on the job branch: git workspace ") ||
		!strings.Contains(m.Run.Reason, "the workspace has no .git folder") || !strings.HasSuffix(m.Run.Reason, "; then logist resume") {
		t.Fatalf("%s %s %q, %d supervisor calls; want INTERVENTION_REQUIRED %s before the supervisor", m.Status, m.Run.ErrorCode, m.Run.Reason, supervisorCalls.Load(), codes.GitUnsafe)
	}
	checkIntact(t, f, "g")
}
