package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	c := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestGitWorkspaceMovesWithJob: a job on a git workspace runs its
// worker's phase on node A (a commit on the job branch), and A dies
// during the supervisor's call. Node B rescues it: the workspace comes
// back with its repository (the bundle A stored with the recovery
// point), B's points commit on top of A's, and the job ends with one
// branch holding the base, A's commit and B's.
func TestGitWorkspaceMovesWithJob(t *testing.T) {
	src := baseRepo(t)
	base := git(t, src, "rev-parse", "HEAD")

	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := strings.Replace(strings.ReplaceAll(movingJob, `"moving"`, `"moving-git"`), `"cost_threshold": 100,`,
		fmt.Sprintf(`"cost_threshold": 100, "workspace": {"git": {"repo": %q}},`, src), 1)
	if _, err := Submit(ctx, s, []byte(job)); err != nil {
		t.Fatal(err)
	}
	const ttl = 4 * time.Second // under load (CI) a shorter lease is lost between heartbeats
	ga := &gate{Store: s}
	a := newNode(t, ga, "a", ttl)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool {
		ps, err := s.Points(ctx, j.ID)
		if err != nil || len(ps) < 2 {
			return false
		}
		recs := records(t, s, j.ID)
		return recs[len(recs)-1].Type == history.TypeIntent && recs[len(recs)-1].Role == "supervisor"
	}, 30*time.Second)
	ga.freeze() // A dies
	b := newNode(t, s, "b", ttl)
	wg.Go(func() { _ = b.Run(ctx) })
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 120*time.Second)
	ga.thaw()
	cancel()
	wg.Wait()
	if js[0].Rescues == 0 {
		t.Errorf("the job was not rescued (rescues %d)", js[0].Rescues)
	}

	// Every phase's point named a commit; B's branch holds them all.
	var commits []string
	for _, e := range records(t, s, "moving-git") {
		if p := e.RecoveryPoint; p != nil && p.Git != nil {
			commits = append(commits, p.Git.Commit)
		}
		if e.Type == history.TypeError || (e.Type == history.TypeResponse && e.Response != nil && len(e.Response.Warnings) > 0) {
			for _, w := range append([]string{fmt.Sprint(e.Error)}, warnings(e)...) {
				if strings.Contains(w, "GIT_") {
					t.Errorf("record %d: %s", e.Seq, w)
				}
			}
		}
	}
	if len(commits) < 4 || commits[0] != base {
		t.Fatalf("points' commits %v, want the base %s and one per phase", commits, base)
	}
	ws := filepath.Join(b.Dir, "moving-git", jobstore.WorkspaceDir)
	tip := git(t, ws, "rev-parse", "refs/heads/logist/moving-git")
	if tip != commits[len(commits)-1] {
		t.Errorf("b's branch tip %s, want the last point's commit %s", tip, commits[len(commits)-1])
	}
	for _, c := range commits {
		git(t, ws, "merge-base", "--is-ancestor", c, tip) // fails the test if not
	}
	if got := git(t, ws, "show", tip+":greet.py"); got != "v2" {
		t.Errorf("greet.py at the branch tip %q, want v2", got)
	}
	if got := git(t, ws, "symbolic-ref", "HEAD"); got != "refs/heads/logist/moving-git" {
		t.Errorf("HEAD %s", got)
	}
	if st := git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("the workspace differs from its branch: %s", st)
	}
}

func warnings(e history.Entry) []string {
	if e.Response == nil {
		return nil
	}
	return e.Response.Warnings
}

// rollbackJob is a git job whose worker writes a new greet.py at each
// call and whose supervisor sends the work back once per run: v1, RETRY,
// v2, COMPLETED; after a rollback to v1's point: RETRY, v3, COMPLETED.
const rollbackJob = `{"schema_version": 1, "job_id": "rb-git", "task_description": "Write greet.py.",
 "workspace": {"git": {"repo": %q}},
 "agents": {
  "worker": {"provider": "script", "script": [
   {"action": "COMPLETED", "summary": "Wrote v1.", "evidence_files": ["greet.py"], "files": {"greet.py": "v1"}},
   {"action": "COMPLETED", "summary": "Wrote v2.", "evidence_files": ["greet.py"], "files": {"greet.py": "v2"}},
   {"action": "COMPLETED", "summary": "Wrote v3.", "evidence_files": ["greet.py"], "files": {"greet.py": "v3"}}]},
  "supervisor": {"provider": "script", "script": [
   {"action": "RETRY", "summary": "Again.", "evidence_files": ["greet.py"]},
   {"action": "COMPLETED", "summary": "Good.", "evidence_files": ["greet.py"]},
   {"action": "RETRY", "summary": "Again, after the rollback.", "evidence_files": ["greet.py"]},
   {"action": "COMPLETED", "summary": "Good now.", "evidence_files": ["greet.py"]}]}},
 "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}}`

// pointCommits are the commits of job id's recovery points, by
// checkpoint, and the checkpoints in order.
func pointCommits(t *testing.T, s clusterstore.Store, id string) (map[string]string, []string) {
	t.Helper()
	commits := map[string]string{}
	var order []string
	for _, e := range records(t, s, id) {
		if p := e.RecoveryPoint; p != nil && p.Git != nil {
			commits[p.CheckpointID] = p.Git.Commit
			order = append(order, p.CheckpointID)
		}
	}
	return commits, order
}

// TestGitRollbackMovesWithJob: a git job ends on node A with several
// points; a steward rolls it back, from no node's folder, to its first
// work point. Node B, which never ran it, resumes it: its branch holds
// that point's commit followed by the new work, and not the commit the
// rollback left (issue 23: a cluster rollback of a git job failed,
// changing nothing).
func TestGitRollbackMovesWithJob(t *testing.T) {
	src := baseRepo(t)

	s, _ := openStore(t)
	ctx := context.Background()
	if _, err := Submit(ctx, s, fmt.Appendf(nil, rollbackJob, src)); err != nil {
		t.Fatal(err)
	}
	actx, stopA := context.WithCancel(ctx)
	a := newNode(t, s, "a", time.Minute)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(actx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	stopA()
	wg.Wait()
	commits, order := pointCommits(t, s, "rb-git")
	if len(order) < 3 {
		t.Fatalf("points %v: want cp-start, v1's point and later ones", order)
	}
	first := order[1] // the first point after cp-start: v1's
	abandoned := commits[order[len(order)-1]]
	if commits[first] == abandoned {
		t.Fatalf("points %v: v1's commit is the last one", order)
	}

	out, err := Steer(ctx, s, Steering{Job: "rb-git", Key: "rb-1", Command: "rollback rb-git " + first, Restore: first,
		Apply: func(jobsDir string) error {
			env := &jobtx.Env{Store: jobstore.New(jobsDir), Logger: a.Logger,
				History: history.Options{Signer: a.key, MaxBytes: -1}}
			st := &steward.Steward{Env: env, User: "test", Effects: a.Effects}
			_, _, err := st.Rollback("rb-git", first, steward.RollbackOptions{Reason: "v1 was better"})
			return err
		}})
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if out.Status != lifecycle.Pending {
		t.Fatalf("after the rollback: %s", out.Status)
	}
	var rb *history.Steward
	for _, e := range records(t, s, "rb-git") {
		if e.Steward != nil && e.Steward.Command == history.CommandRollback {
			rb = e.Steward
		}
	}
	if rb == nil || rb.Changes["git_commit"] != commits[first] || rb.Changes["git_abandoned"] != abandoned {
		t.Fatalf("rollback record %+v, want git_commit %s and git_abandoned %s", rb, commits[first], abandoned)
	}

	b := newNode(t, s, "b", time.Minute)
	bctx, stopB := context.WithCancel(ctx)
	wg.Go(func() { _ = b.Run(bctx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	stopB()
	wg.Wait()

	ws := filepath.Join(b.Dir, "rb-git", jobstore.WorkspaceDir)
	tip := git(t, ws, "rev-parse", "refs/heads/logist/rb-git")
	after, order2 := pointCommits(t, s, "rb-git")
	if last := after[order2[len(order2)-1]]; tip != last {
		t.Errorf("b's branch tip %s, want the last point's commit %s", tip, last)
	}
	git(t, ws, "merge-base", "--is-ancestor", commits[first], tip) // fails the test if not
	c := exec.Command("git", "merge-base", "--is-ancestor", abandoned, tip)
	c.Dir = ws
	if err := c.Run(); err == nil {
		t.Errorf("the rolled-back commit %s is still on the branch at %s", abandoned, tip)
	}
	if n := git(t, ws, "rev-list", "--count", commits[first]+".."+tip); n == "0" {
		t.Error("no new work after the point rolled back to")
	}
	if got := git(t, ws, "show", tip+":greet.py"); got != "v3" {
		t.Errorf("greet.py at the branch tip %q, want v3", got)
	}
	if st := git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("the workspace differs from its branch: %s", st)
	}
}

// committingWorker is the worker of a git job that makes a commit of its
// own: on its first call it commits mine.txt, creates a branch, stages a
// new file and a change to README that it then changes again, marks a
// new file intent-to-add (git add -N), and answers STUCK; called again with mine.txt in its workspace, it writes
// what `git log` of its HEAD shows into seen.txt, what `git status` and
// `git diff --cached` show (before it writes anything) into status.txt
// and cached.txt, and answers COMPLETED.
// The commit's body is the time to the nanosecond: the same commit made
// again (after a rollback) within the same second is another commit.
const committingWorker = `set -e
g() { git -c user.name=worker -c user.email=worker@example.com "$@"; }
if [ -f mine.txt ]; then
  st=$(git status --porcelain); cached=$(git diff --cached)
  g log --format=%s HEAD > seen.txt
  printf '%s\n' "$st" > status.txt
  printf '%s\n' "$cached" > cached.txt
  echo '{"action": "COMPLETED", "evidence_files": ["mine.txt", "seen.txt"], "summary_for_supervisor": "Done."}'
else
  echo mine > mine.txt
  g add mine.txt
  g commit -q -m "worker: my own commit" -m "made at $(date +%s.%N)"
  g branch -f worker-side
  echo staged > staged.txt
  echo "staged line" >> README
  g add staged.txt README
  echo "unstaged line" >> README
  echo intent > intent.txt
  g add -N intent.txt
  echo '{"action": "STUCK", "evidence_files": [], "summary_for_supervisor": "Which greeting?"}'
fi`

// TestStoppedGitJobKeepsItsCommits: the worker of a git job commits a
// file of its own and answers STUCK on node A; a steward resumes the job
// and node B claims it. In file mode the repository stays as the worker
// left it, so the resumed worker sees its commit in `git log`, and what
// it staged still staged (git status and git diff --cached as it left
// them, an intent-to-add entry too), and so it does in cluster mode: the
// stop carries the repository as it is then, its index too.
// A rollback to cp-start instead puts the branch back at the point's
// commit, records the worker's commit as the one it leaves, and keeps
// the discarded file as a rollback does.
func TestStoppedGitJobKeepsItsCommits(t *testing.T) {
	needGit(t)
	for _, next := range []string{"resume", "rollback"} {
		t.Run(next, func(t *testing.T) { stoppedGitJob(t, next) })
	}
}

func stoppedGitJob(t *testing.T, next string) {
	src := baseRepo(t)
	base := git(t, src, "rev-parse", "HEAD")

	id := "park-git-" + next
	script, err := json.Marshal(committingWorker)
	if err != nil {
		t.Fatal(err)
	}
	job := fmt.Sprintf(`{"schema_version": 1, "job_id": %q, "task_description": "Write mine.txt.", "sandbox": "none",
 "workspace": {"git": {"repo": %q}},
 "agents": {
  "worker": {"provider": "command", "command": {"argv": ["sh", "-c", %s]}},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "Good.", "evidence_files": ["mine.txt"]}]}},
 "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}}`, id, src, script)
	s, _ := openStore(t)
	ctx := context.Background()
	if _, err := Submit(ctx, s, []byte(job)); err != nil {
		t.Fatal(err)
	}
	a := newNode(t, s, "a", 5*time.Second)
	runUntil(t, s, a, stuck)
	var wg sync.WaitGroup
	branch := "refs/heads/logist/" + id
	mine := git(t, filepath.Join(a.Dir, id, jobstore.WorkspaceDir), "rev-parse", branch)
	if mine == base {
		t.Fatalf("a's branch is at the base: the worker committed nothing")
	}
	// What the worker staged and did not commit, as it left it on A.
	wsA := filepath.Join(a.Dir, id, jobstore.WorkspaceDir)
	statusA, cachedA := git(t, wsA, "status", "--porcelain"), git(t, wsA, "diff", "--cached")
	if !strings.Contains(statusA, "A  staged.txt") || !strings.Contains(statusA, "MM README") || !strings.Contains(statusA, " A intent.txt") {
		t.Fatalf("a's status %q, want staged.txt staged, README staged and changed again, intent.txt intent-to-add", statusA)
	}
	if refs := git(t, wsA, "for-each-ref", gitws.ParkedIndexRef); refs != "" {
		t.Errorf("the stop left %s in the worker's repository", refs)
	}

	st := stewardOf(t, s)
	steerStoppedBy(ctx, t, s, st, "r1", id, next, steward.ResumeOptions{Guidance: "Go on."})
	steered, err := s.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}

	b := newNode(t, s, "b", 5*time.Second)
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	wg.Go(func() { _ = b.Run(bctx) })
	ws := filepath.Join(b.Dir, id, jobstore.WorkspaceDir)

	if next == "rollback" {
		var rb *history.Steward
		for _, e := range records(t, s, id) {
			if e.Steward != nil && e.Steward.Command == history.CommandRollback {
				rb = e.Steward
			}
		}
		if rb == nil || rb.Changes["git_commit"] != base || rb.Changes["git_abandoned"] != mine {
			t.Fatalf("rollback record %+v, want git_commit %s (cp-start's) and git_abandoned %s (the worker's)", rb, base, mine)
		}
		// B's worker starts over from cp-start: it commits again on
		// the point's commit and stops again.
		waitAll(t, s, 1, func(j *clusterstore.Job) bool {
			return j.Status == lifecycle.InterventionRequired && j.NextSeq > steered.NextSeq
		}, 60*time.Second)
		stopB()
		wg.Wait()
		tip := git(t, ws, "rev-parse", branch)
		if parent := git(t, ws, "rev-parse", tip+"^"); tip == mine || parent != base {
			t.Errorf("b's branch at %s (parent %s), want a new commit on cp-start's %s", tip, parent, base)
		}
		keptDiscarded(t, s, id, "mine.txt", "mine\n")
		// The commit the rollback left is kept by its ref, which every
		// bundle carries: B's stop's too, so node C, resuming the job,
		// still has it.
		ref := gitws.AbandonedRef(rb.CommandID)
		if rb.Changes["git_abandoned_ref"] != ref {
			t.Errorf("rollback record's git_abandoned_ref %v, want %s", rb.Changes["git_abandoned_ref"], ref)
		}
		if got := git(t, ws, "rev-parse", ref); got != mine {
			t.Errorf("b's %s at %s, want the abandoned %s", ref, got, mine)
		}
		steerStoppedBy(ctx, t, s, st, "r2", id, "resume", steward.ResumeOptions{Guidance: "Go on."})
		c := newNode(t, s, "c", 5*time.Second)
		cctx, stopC := context.WithCancel(ctx)
		defer stopC()
		wg.Go(func() { _ = c.Run(cctx) })
		waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
		stopC()
		wg.Wait()
		wsC := filepath.Join(c.Dir, id, jobstore.WorkspaceDir)
		git(t, wsC, "cat-file", "-e", mine+"^{commit}") // fails the test if gone
		if got := git(t, wsC, "rev-parse", ref); got != mine {
			t.Errorf("c's %s at %s, want the abandoned %s", ref, got, mine)
		}
		if err := exec.Command("git", "-C", wsC, "merge-base", "--is-ancestor", mine, branch).Run(); err == nil {
			t.Errorf("the job's branch holds the abandoned commit %s", mine)
		}
		verifyExport(t, s, id)
		return
	}
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	stopB()
	wg.Wait()
	// The resumed worker saw its commit in the branch's log.
	if seen := readFile(t, filepath.Join(ws, "seen.txt")); !strings.Contains(seen, "worker: my own commit") {
		t.Errorf("the resumed worker's git log:\n%s\nwant its own commit", seen)
	}
	tip := git(t, ws, "rev-parse", branch)
	git(t, ws, "merge-base", "--is-ancestor", mine, tip) // fails the test if not
	if got := git(t, ws, "show", mine+":mine.txt"); got != "mine" {
		t.Errorf("mine.txt in the worker's commit %q", got)
	}
	if got := git(t, ws, "rev-parse", "refs/heads/worker-side"); got != mine {
		t.Errorf("the worker's branch worker-side at %s, want %s", got, mine)
	}
	if got := git(t, ws, "symbolic-ref", "HEAD"); got != branch {
		t.Errorf("HEAD %s, want %s", got, branch)
	}
	if st := git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("the workspace differs from its branch: %s", st)
	}
	// The resumed worker found its index as it left it: what it staged
	// still staged (cached.txt), status as on A.
	if got := strings.TrimSpace(readFile(t, filepath.Join(ws, "status.txt"))); got != statusA {
		t.Errorf("the resumed worker's git status:\n%s\nwant as it left it on a:\n%s", got, statusA)
	}
	if got := strings.TrimSpace(readFile(t, filepath.Join(ws, "cached.txt"))); got != cachedA {
		t.Errorf("the resumed worker's git diff --cached:\n%s\nwant as it left it on a:\n%s", got, cachedA)
	}
	if refs := git(t, ws, "for-each-ref", gitws.ParkedIndexRef); refs != "" {
		t.Errorf("the restore left %s in the worker's repository", refs)
	}
	verifyExport(t, s, id)
}

// dropBundle makes each unit that carries a bundle its bundle file names
// into one that does not, once per bundle, and deletes that bundle from
// the store: a sweep that collected it between the node learning it and
// the commit. It deletes the bundle from the unit's objects in place,
// the node's map too: the unit is as bundleInto makes it when the node's
// known holds the bundle, and what the node sends again is its own.
type dropBundle struct {
	*pgstore.Store
	mu      sync.Mutex
	dropped []string
}

func (d *dropBundle) Commit(ctx context.Context, l *clusterstore.Lease, u clusterstore.Unit) error {
	d.mu.Lock()
	if u.Point != nil {
		for _, name := range clusterstore.BundleFiles {
			sum, ok := clusterstore.FileObject(name, u.Files[name])
			if !ok || u.Objects[sum] == nil || slices.Contains(d.dropped, sum) {
				continue
			}
			if _, err := d.Pool().Exec(ctx, "DELETE FROM logist_objects WHERE sha256 = $1", sum); err == nil {
				delete(u.Objects, sum)
				d.dropped = append(d.dropped, sum)
			}
		}
	}
	d.mu.Unlock()
	return d.Store.Commit(ctx, l, u)
}

// TestCollectedBundleSentAgain: a git job's unit whose bundle file names
// a bundle the node took as stored, collected meanwhile, is refused
// (ErrMissingObject) and sent again with the bundle: the job ends as it
// would have, every such bundle is in the store, and the job's
// repository restores from the last one as a claiming node restores it.
func TestCollectedBundleSentAgain(t *testing.T) {
	src := baseRepo(t)

	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const id = "bundle-again"
	job := strings.Replace(strings.ReplaceAll(movingJob, `"moving"`, `"`+id+`"`), `"cost_threshold": 100,`,
		fmt.Sprintf(`"cost_threshold": 100, "workspace": {"git": {"repo": %q}},`, src), 1)
	if _, err := Submit(ctx, s, []byte(job)); err != nil {
		t.Fatal(err)
	}
	d := &dropBundle{Store: s}
	a := newNode(t, d, "a", 5*time.Second)
	var wg sync.WaitGroup
	wg.Go(func() { _ = a.Run(ctx) })
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	cancel()
	wg.Wait()
	d.mu.Lock()
	dropped := d.dropped
	d.mu.Unlock()
	if len(dropped) == 0 {
		t.Fatal("no unit named a bundle it did not send: the test dropped nothing")
	}
	if js[0].SpentMicros != 40_000 {
		t.Errorf("spent %d µ$, want 40000 (no call asked again)", js[0].SpentMicros)
	}
	if _, err := s.Objects(context.Background(), dropped); err != nil {
		t.Fatalf("the dropped bundle was not sent again: %v", err)
	}
	files, err := s.Files(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := clusterstore.FileObject(clusterstore.BundleFile, files[clusterstore.BundleFile]); !slices.Contains(dropped, sum) {
		t.Fatalf("the job's last bundle %s was not dropped (dropped %v)", sum, dropped)
	}
	// Another node's folder: the workspace and its repository as a claim
	// restores them.
	bctx := context.Background()
	jobs := t.TempDir()
	_, w, err := writeFolder(bctx, s, jobs, id, func(string) bool { return false }, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := restoreGit(bctx, s, filepath.Join(jobs, id), id, map[string]bool{}, w.parked); err != nil {
		t.Fatalf("restore the job's repository: %v", err)
	}
	commits, order := pointCommits(t, s, id)
	ws := filepath.Join(jobs, id, jobstore.WorkspaceDir)
	if tip := git(t, ws, "rev-parse", "refs/heads/logist/"+id); tip != commits[order[len(order)-1]] {
		t.Errorf("the restored branch's tip %s, want the last point's commit %s", tip, commits[order[len(order)-1]])
	}
	if got := git(t, ws, "show", "HEAD:greet.py"); got != "v2" {
		t.Errorf("greet.py at HEAD %q, want v2", got)
	}
}

// needGit fails under CI=true, and skips loudly elsewhere, where git is
// not installed.
func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("SKIP (loud): git is not installed")
	}
}

// baseRepo is a new repository holding one commit, "base" (README), the
// source of a git workspace; it needs git (needGit).
func baseRepo(t *testing.T) string {
	t.Helper()
	needGit(t)
	src := t.TempDir()
	git(t, src, "init", "-q")
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, src, "add", "README")
	git(t, src, "commit", "-q", "-m", "base")
	return src
}

// conflictingWorker leaves its repository in a merge conflict (an index
// with unmerged entries) and answers STUCK.
const conflictingWorker = `set -e
g() { git -c user.name=worker -c user.email=worker@example.com "$@"; }
g checkout -q -b side
echo side > README
g commit -q -am side
g checkout -q -
echo mine > README
g commit -q -am mine
g merge -q side >/dev/null 2>&1 || true
echo '{"action": "STUCK", "evidence_files": [], "summary_for_supervisor": "A conflict."}'`

// TestStopWithAConflictSaysItsIndexStays: a git job stopped in a merge
// conflict cannot carry its index staged (gitws.BundleParked gives the
// reason), and the node says so in a job log line with its code, so an
// operator can tell why the resumed worker finds the files unstaged.
func TestStopWithAConflictSaysItsIndexStays(t *testing.T) {
	src := baseRepo(t)
	script, err := json.Marshal(conflictingWorker)
	if err != nil {
		t.Fatal(err)
	}
	const id = "park-conflict"
	job := fmt.Sprintf(`{"schema_version": 1, "job_id": %q, "task_description": "Merge.", "sandbox": "none",
 "workspace": {"git": {"repo": %q}},
 "agents": {
  "worker": {"provider": "command", "command": {"argv": ["sh", "-c", %s]}},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "Good."}]}},
 "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}}`, id, src, script)
	s, _ := openStore(t)
	if _, err := Submit(context.Background(), s, []byte(job)); err != nil {
		t.Fatal(err)
	}
	var logs testkit.SyncBuffer
	a := newNode(t, s, "a", 5*time.Second)
	a.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	runUntil(t, s, a, stuck)
	if st := git(t, filepath.Join(a.Dir, id, jobstore.WorkspaceDir), "status", "--porcelain"); !strings.Contains(st, "UU README") {
		t.Fatalf("the worker left no conflict: %q", st)
	}
	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		if strings.Contains(l, codes.ClusterIndex) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	if line == nil || line["error_code"] != codes.ClusterIndex || line["job_id"] != id || line["type"] != "warning" || line["level"] != "WARN" {
		t.Fatalf("no %s warning for the job in the node's log (%v):\n%s", codes.ClusterIndex, line, logs.String())
	}
}
