package steward_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
	"github.com/logist/logist/internal/verify"
)

// gitWorker is a command agent that uses git as agents do: the first call
// leaves a draft and answers RETRY; the next renames a file, deletes one,
// adds a binary file and commits that itself, then edits README.md without
// committing and answers COMPLETED.
const gitWorker = `if [ ! -f .tried ]; then echo draft > .tried; echo '{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"first try: not yet"}'; exit 0; fi
git mv new-name.txt moved.txt && git rm -q docs/guide.md && printf 'a\000b\001' > blob.bin && git add -A &&
git -c user.name=Agent -c user.email=agent@example.com -c commit.gpgsign=false commit -q -m 'agent: move, remove, add' &&
echo more >> README.md &&
echo '{"action":"COMPLETED","evidence_files":["moved.txt","blob.bin","README.md"],"summary_for_supervisor":"moved, removed, added a binary"}'`

func lastPoint(t *testing.T, recs []history.Record) *history.RecoveryPoint {
	t.Helper()
	ps := testkit.OfType(recs, history.TypeRecoveryPoint)
	return ps[len(ps)-1].RecoveryPoint
}

// gitWorkerJob runs job j of f, a supervised job on a new repository whose
// worker is gitWorker, to SUCCESS; it returns the source repository, its
// base commit and the job's workspace.
func gitWorkerJob(t *testing.T, f *fixture) (repo, base, ws string) {
	t.Helper()
	repo = testkit.GitRepo(t)
	base = testkit.Git(t, repo, "rev-parse", "main")
	f.WriteJob("j", map[string]any{
		"workspace": map[string]any{"git": map[string]any{"repo": repo, "ref": "main"}},
		"agents": map[string]any{
			"worker":     map[string]any{"provider": "command", "command": map[string]any{"argv": []string{"sh", "-c", gitWorker}}},
			"supervisor": testkit.Script(testkit.Step("COMPLETED", "fine")),
		}})
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("first run: %s %s", m.Status, m.Run.Reason)
	}
	return repo, base, filepath.Join(f.Dir, "j", "workspace")
}

// gitPoint is recovery point cp of recs, which must have a commit.
func gitPoint(t *testing.T, recs []history.Record, cp string) *history.RecoveryPoint {
	t.Helper()
	for _, r := range testkit.OfType(recs, history.TypeRecoveryPoint) {
		if p := r.RecoveryPoint; p.CheckpointID == cp && p.Git != nil {
			return p
		}
	}
	t.Fatalf("no commit for %s", cp)
	return nil
}

// A supervised job on a repository, with a RETRY and a rollback: the job
// branch holds the agent's own commit under Logist's point commits, a
// rollback to cp-start puts the files, the branch, HEAD and the index back
// at the base, the job runs again, and at the end the branch's patch
// applies cleanly to the base. The history verifies throughout.
func TestGitJobWithRetryAndRollback(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.Sign()
	repo, base, ws := gitWorkerJob(t, f)
	recs := f.Records("j")
	work := gitPoint(t, recs, "cp-0001-work")
	agents := testkit.Git(t, ws, "rev-parse", work.Git.Commit+"^1")
	if testkit.Git(t, ws, "log", "-1", "--format=%s%n%ae", agents) != "agent: move, remove, add\nagent@example.com" {
		t.Errorf("the work point's parent %s is not the agent's own commit", agents)
	}
	if testkit.Git(t, ws, "rev-parse", agents+"^1") != base {
		t.Error("the agent's commit does not sit on the base")
	}
	if files := testkit.Git(t, ws, "show", "--name-only", "--format=", work.Git.Commit); files != "README.md" {
		t.Errorf("the work point's own commit holds %q, want the uncommitted README.md", files)
	}

	// Back to the start.
	if _, _, err := f.St.Rollback("j", "cp-start", steward.RollbackOptions{Reason: "again"}); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != base {
		t.Errorf("HEAD at %s after the rollback, want the base %s", got, base)
	}
	if got := testkit.Git(t, ws, "symbolic-ref", "--short", "HEAD"); got != "logist/j" {
		t.Errorf("HEAD on %s after the rollback", got)
	}
	if st := testkit.Git(t, ws, "status", "--porcelain", "--ignored"); st != "" {
		t.Errorf("workspace differs from the base after the rollback:\n%s", st)
	}
	rb := testkit.OfType(f.Records("j"), history.TypeSteward)
	abandoned := lastPoint(t, recs).Git.Commit
	if ch := rb[len(rb)-1].Steward.Changes; ch["git_commit"] != base || ch["git_abandoned"] != abandoned {
		t.Errorf("rollback record's changes %v", ch)
	}
	// The commit the rollback left is kept by a ref of its own, named in
	// the record, whatever becomes of the point's ref.
	ref := gitws.AbandonedRef(rb[len(rb)-1].Steward.CommandID)
	if got := rb[len(rb)-1].Steward.Changes["git_abandoned_ref"]; got != ref {
		t.Errorf("rollback record's git_abandoned_ref %v, want %s", got, ref)
	}
	if got := testkit.Git(t, ws, "rev-parse", ref); got != abandoned {
		t.Errorf("%s at %s, want the abandoned %s", ref, got, abandoned)
	}

	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("second run: %s %s", m.Status, m.Run.Reason)
	}
	tip := testkit.Git(t, ws, "rev-parse", "logist/j")
	if want := lastPoint(t, f.Records("j")).Git.Commit; tip != want {
		t.Errorf("branch at %s, the last point at %s", tip, want)
	}
	// The branch as a patch on the base, applied to a fresh checkout.
	patch := filepath.Join(t.TempDir(), "j.patch")
	out := testkit.Git(t, ws, "diff", "--binary", "--full-index", "-M", base, tip)
	if err := os.WriteFile(patch, []byte(out+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := t.TempDir()
	testkit.Git(t, check, "clone", "-q", repo, ".")
	testkit.Git(t, check, "checkout", "-q", base)
	testkit.Git(t, check, "apply", "--index", patch)
	if got, want := testkit.Git(t, check, "write-tree"), testkit.Git(t, ws, "rev-parse", tip+"^{tree}"); got != want {
		t.Errorf("the patched base's tree %s differs from the branch's %s", got, want)
	}
	if !strings.Contains(out, "rename from new-name.txt") || !strings.Contains(out, "GIT binary patch") || !strings.Contains(out, "deleted file mode") {
		t.Errorf("patch lacks the rename, the binary file or the deletion:\n%s", out)
	}
	// Only the abandoned ref keeps the commit once its point's ref is
	// gone: a gc that prunes everything unreachable keeps it. A push
	// publishes the branch, none of Logist's refs.
	testkit.Git(t, ws, "update-ref", "-d", gitws.KeepRefs+abandoned)
	testkit.Git(t, ws, "reflog", "expire", "--expire=now", "--all")
	testkit.Git(t, ws, "gc", "-q", "--prune=now")
	testkit.Git(t, ws, "cat-file", "-e", abandoned+"^{commit}")
	if err := gitws.Push(context.Background(), ws, repo, "logist/j", "result-j"); err != nil {
		t.Fatal(err)
	}
	if refs := testkit.Git(t, repo, "for-each-ref", "--format=%(refname)", "refs/logist/", "refs/heads/logist/"); refs != "" {
		t.Errorf("the push published %s", refs)
	}
	rep, err := verify.Job("j", filepath.Join(f.Dir, "j"), verify.Options{Public: key.Public(), Manifest: f.Load("j")})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// logist submit and validate check the source from the steward's shell:
// a ref the repository does not have, or a repository that is not one, is
// refused before any job exists, at the field that is wrong.
func TestSubmitChecksTheWorkspaceSource(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	repo := testkit.GitRepo(t)
	missing := filepath.Join(t.TempDir(), "no-repo")
	for _, tc := range []struct{ repo, ref, want, at string }{
		{repo, "nope", `ref "nope" is not a commit, branch or tag of ` + repo, "/workspace/git/ref"},
		{missing, "main", "cannot reach repository " + missing, "/workspace/git/repo"},
		{repo, "feature", "", ""},
	} {
		repo, ref, want := tc.repo, tc.ref, tc.want
		file := filepath.Join(t.TempDir(), "job-"+ref+".json")
		b := testkit.ManifestJSON(t, "", map[string]any{"workspace": map[string]any{"git": map[string]any{"repo": repo, "ref": ref}}})
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, _, err := f.St.Submit(file)
		if want == "" {
			if err != nil {
				t.Errorf("ref %s: %v", ref, err)
			}
			continue
		}
		var es manifest.Errors
		if !errors.As(err, &es) || !strings.Contains(err.Error(), want) || es[0].Pointer != tc.at {
			t.Errorf("%s at %s: %v, want %q at %s", repo, ref, err, want, tc.at)
		}
	}
}

// A rollback finds a point's commit whatever the agent did to the job
// branch afterwards: reset below it, the reflog expired and the commits
// pruned (the point's keep ref holds it), an index.lock left. With the keep refs deleted too,
// the rollback is refused before anything is recorded or restored: the
// manifest, the history and the workspace's files stay as they were.
func TestRollbackAfterTheAgentRewroteTheBranch(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	key := f.Sign()
	_, base, ws := gitWorkerJob(t, f)
	work := gitPoint(t, f.Records("j"), "cp-0001-work")
	prune := func() {
		testkit.Git(t, ws, "reflog", "expire", "--expire=now", "--all")
		testkit.Git(t, ws, "gc", "-q", "--prune=now")
	}
	testkit.Git(t, ws, "reset", "-q", "--hard", base)
	prune()
	// The agent's own index lock stops nothing (hostile-inputs H139).
	lock := filepath.Join(ws, ".git", "index.lock")
	if err := os.WriteFile(lock, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.St.Rollback("j", "cp-0001-work", steward.RollbackOptions{Reason: "back to the work"}); err != nil {
		t.Fatalf("rollback after the agent's rewrite: %v", err)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatalf("the agent's index.lock: %v", err)
	}
	if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != work.Git.Commit {
		t.Errorf("HEAD at %s after the rollback, want the point's %s", got, work.Git.Commit)
	}
	if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("the workspace differs from the point's commit:\n%s", st)
	}

	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("run after the rollback: %s %s", m.Status, m.Run.Reason)
	}

	// The keep refs deleted too: the commit is gone, and the rollback says
	// so without changing anything.
	testkit.Git(t, ws, "reset", "-q", "--hard", base)
	// Every keep ref: a later point's commit sits on this one and keeps it.
	for _, ref := range strings.Fields(testkit.Git(t, ws, "for-each-ref", "--format=%(refname)", gitws.KeepRefs)) {
		testkit.Git(t, ws, "update-ref", "-d", ref)
	}
	prune()
	if err := os.WriteFile(filepath.Join(ws, "mine.txt"), []byte("left by the agent\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, files := f.snapshot("j"), testkit.Git(t, ws, "status", "--porcelain")
	_, _, err := f.St.Rollback("j", "cp-0001-work", steward.RollbackOptions{Reason: "again"})
	ooo, ok := isOutOfOrder(err)
	if !ok || !strings.Contains(ooo.Want, "cannot go back to cp-0001-work's commit") || !strings.Contains(err.Error(), "no longer has commit "+work.Git.Commit) {
		t.Fatalf("rollback to a pruned commit: %v", err)
	}
	if f.snapshot("j") != before {
		t.Error("a refused rollback changed the manifest or the history")
	}
	if got := testkit.Git(t, ws, "status", "--porcelain"); got != files {
		t.Errorf("a refused rollback changed the workspace:\n%s\nwas:\n%s", got, files)
	}
	rep, err := verify.Job("j", filepath.Join(f.Dir, "j"), verify.Options{Public: key.Public(), Manifest: f.Load("j")})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %v", err, rep.Problems)
	}
}

// A workspace whose repository the agent removed (or made again) has lost
// every point's commit: a rollback to one of them is refused with nothing
// changed, naming cp-start; the rollback to cp-start makes the repository
// again from the job's source, the job branch at the base, the files the
// base's, and records where it came from. The job then runs to SUCCESS
// with its work on the branch, and its history verifies.
// The commit the rollback leaves is kept when there is one: a repository
// made again on the job branch has its tip, which moves into the remade
// repository under its ref (git_abandoned, git_abandoned_ref); a
// repository removed, or made again without the job branch, has none,
// and the record says so (git_abandoned_not_kept) rather than nothing.
func TestRollbackRemakesALostRepository(t *testing.T) {
	t.Parallel()
	for _, again := range []string{"removed", "made again", "made again on the job branch"} {
		t.Run(again, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			key := f.Sign()
			_, base, ws := gitWorkerJob(t, f)
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
			mine := ""
			if again != "removed" {
				testkit.Git(t, ws, "init", "-q")
				if again == "made again on the job branch" {
					testkit.Git(t, ws, "checkout", "-q", "-b", "logist/j")
				}
				testkit.Git(t, ws, "add", "-A")
				testkit.Git(t, ws, "commit", "-qm", "mine")
				mine = testkit.Git(t, ws, "rev-parse", "HEAD")
			}
			before := f.snapshot("j")
			_, _, err := f.St.Rollback("j", "cp-0001-work", steward.RollbackOptions{Reason: "back"})
			if ooo, ok := isOutOfOrder(err); !ok || !strings.Contains(ooo.Hint, "--to cp-start makes the repository again") {
				t.Fatalf("rollback to a point of the lost repository: %v", err)
			}
			if f.snapshot("j") != before {
				t.Error("a refused rollback changed the manifest or the history")
			}
			if _, _, err := f.St.Rollback("j", "cp-start", steward.RollbackOptions{Reason: "start over"}); err != nil {
				t.Fatalf("rollback to cp-start: %v", err)
			}
			if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != base {
				t.Errorf("HEAD at %s, want the base %s", got, base)
			}
			if got := testkit.Git(t, ws, "symbolic-ref", "--short", "HEAD"); got != "logist/j" {
				t.Errorf("HEAD on %s", got)
			}
			if st := testkit.Git(t, ws, "status", "--porcelain", "--ignored"); st != "" {
				t.Errorf("the workspace differs from the base:\n%s", st)
			}
			rb := testkit.OfType(f.Records("j"), history.TypeSteward)
			cmd := rb[len(rb)-1].Steward
			ch := cmd.Changes
			if ch["git_remade_from"] == nil || ch["git_commit"] != base {
				t.Errorf("the rollback's changes: %v", ch)
			}
			if again == "made again on the job branch" {
				ref := gitws.AbandonedRef(cmd.CommandID)
				if ch["git_abandoned"] != mine || ch["git_abandoned_ref"] != ref || ch["git_abandoned_not_kept"] != nil {
					t.Errorf("the rollback's changes %v, want git_abandoned %s kept by %s", ch, mine, ref)
				}
				if got := testkit.Git(t, ws, "rev-parse", ref); got != mine {
					t.Errorf("%s at %s in the remade repository, want the lost one's %s", ref, got, mine)
				}
				if got := testkit.Git(t, ws, "for-each-ref", "--format=%(refname)", "--points-at", mine); got != ref {
					t.Errorf("refs at the lost repository's commit %q, want only %s: none of the lost one's came along", got, ref)
				}
			} else {
				why, _ := ch["git_abandoned_not_kept"].(string)
				if ch["git_abandoned"] != nil || ch["git_abandoned_ref"] != nil || !strings.Contains(why, "was lost") {
					t.Errorf("the rollback's changes %v, want no abandoned commit and git_abandoned_not_kept saying why", ch)
				}
				if refs := testkit.Git(t, ws, "for-each-ref", gitws.AbandonedRefs); refs != "" {
					t.Errorf("the remade repository has %s", refs)
				}
			}
			f.Run("j")
			if m := f.Load("j"); m.Status != lifecycle.Success {
				t.Fatalf("run after the rollback: %s %s", m.Status, m.Run.Reason)
			}
			last := lastPoint(t, f.Records("j")).Git.Commit
			if tip := testkit.Git(t, ws, "rev-parse", "logist/j"); tip != last {
				t.Errorf("branch at %s, the last point at %s", tip, last)
			}
			testkit.Git(t, ws, "merge-base", "--is-ancestor", base, last)
			rep, err := verify.Job("j", filepath.Join(f.Dir, "j"), verify.Options{Public: key.Public(), Manifest: f.Load("j")})
			if err != nil || !rep.OK() {
				t.Fatalf("verify: %v %v", err, rep.Problems)
			}
		})
	}
}
