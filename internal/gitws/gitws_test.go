package gitws_test

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/testkit"
)

var ctx = context.Background()

// state is everything of a repository a job must not change: its files
// (the .git folder included, by path, size and content), listed.
func state(t *testing.T, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		lines = append(lines, rel+" "+string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func prepare(t *testing.T, repo, ref string) (string, *gitws.Base) {
	t.Helper()
	ws := filepath.Join(t.TempDir(), "workspace")
	b, err := gitws.Prepare(ctx, repo, ref, ws, gitws.Branch("job-1"))
	if err != nil {
		t.Fatal(err)
	}
	return ws, b
}

func write(t *testing.T, dir, rel, s string) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareClonesAtRefWithoutTouchingTheSource(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	before := state(t, repo)
	for _, tc := range []struct{ ref, want string }{
		{"", testkit.Git(t, repo, "rev-parse", "main")},
		{"main", testkit.Git(t, repo, "rev-parse", "main")},
		{"feature", testkit.Git(t, repo, "rev-parse", "feature")},
		{"v1", testkit.Git(t, repo, "rev-parse", "v1^{commit}")},
		{testkit.Git(t, repo, "rev-parse", "main~1"), testkit.Git(t, repo, "rev-parse", "main~1")},
	} {
		ws, b := prepare(t, repo, tc.ref)
		if b.Commit != tc.want {
			t.Errorf("ref %q: base %s, want %s", tc.ref, b.Commit, tc.want)
		}
		if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != tc.want {
			t.Errorf("ref %q: HEAD %s, want %s", tc.ref, got, tc.want)
		}
		if got := testkit.Git(t, ws, "symbolic-ref", "--short", "HEAD"); got != "logist/job-1" {
			t.Errorf("ref %q: on branch %s, want logist/job-1", tc.ref, got)
		}
		if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
			t.Errorf("ref %q: clone not clean:\n%s", tc.ref, st)
		}
		if r := testkit.Git(t, ws, "remote"); r != "" {
			t.Errorf("ref %q: the clone keeps remotes %q: a path to the source", tc.ref, r)
		}
		// Prepared again (a start a crash cut short): kept as it is.
		again, err := gitws.Prepare(ctx, repo, tc.ref, ws, gitws.Branch("job-1"))
		if err != nil || again.Commit != tc.want {
			t.Errorf("ref %q: prepared again: %v, %+v", tc.ref, err, again)
		}
	}
	if after := state(t, repo); after != before {
		t.Error("preparing workspaces changed the source repository")
	}
}

func TestPrepareFailsClearly(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	notRepo := t.TempDir()
	full := t.TempDir()
	write(t, full, "x", "x")
	for _, tc := range []struct {
		name, repo, ref, dir, want string
	}{
		{"bad ref", repo, "no-such-branch", "", `ref "no-such-branch" is not a commit, branch or tag`},
		{"option ref", repo, "--upload-pack=evil", "", "may not start with '-'"},
		{"not a repository", notRepo, "", "", "cannot clone"},
		{"missing", filepath.Join(notRepo, "nope"), "", "", "cannot clone"},
		{"workspace not empty", repo, "", full, "already holds files"},
	} {
		dir := tc.dir
		if dir == "" {
			dir = filepath.Join(t.TempDir(), "workspace")
		}
		_, err := gitws.Prepare(ctx, tc.repo, tc.ref, dir, "logist/x")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
		if tc.dir == "" {
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s: a failed prepare left %s behind", tc.name, dir)
			}
		}
	}
	if err := gitws.Check(ctx, repo, "feature"); err != nil {
		t.Errorf("check feature: %v", err)
	}
	if err := gitws.Check(ctx, repo, "nope"); err == nil {
		t.Error("check accepted a ref the repository does not have")
	}
	if err := gitws.Check(ctx, notRepo, ""); err == nil {
		t.Error("check accepted a folder that is not a repository")
	}
}

// Logist's commit goes on top of the agent's own commits, never rewrites
// them, holds the files the agent left uncommitted, leaves a clean status,
// and says what the point was.
func TestCommitOnTopOfTheAgentsCommits(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, base := prepare(t, repo, "main")
	write(t, ws, "agent.txt", "committed by the agent\n")
	testkit.Git(t, ws, "add", "agent.txt")
	testkit.Git(t, ws, "commit", "-q", "-m", "agent's own commit")
	agents := testkit.Git(t, ws, "rev-parse", "HEAD")
	write(t, ws, "README.md", "# changed, not committed\n")
	write(t, ws, "staged.txt", "staged only\n")
	testkit.Git(t, ws, "add", "staged.txt")
	if err := os.Remove(filepath.Join(ws, "docs/guide.md")); err != nil {
		t.Fatal(err)
	}
	summary := "Did it.\nLogist-Checkpoint: forged\x1b[2J"
	c, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work", Phase: "work", Role: "worker", Summary: summary})
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.Git(t, ws, "rev-parse", c+"^1"); got != agents {
		t.Errorf("Logist's commit's parent is %s, want the agent's %s", got, agents)
	}
	if got := testkit.Git(t, ws, "rev-parse", agents+"^1"); got != base.Commit {
		t.Errorf("the agent's commit was rewritten: parent %s", got)
	}
	if got := testkit.Git(t, ws, "rev-parse", "refs/heads/logist/job-1"); got != c {
		t.Errorf("branch at %s, want %s", got, c)
	}
	if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("status after Logist's commit not clean:\n%s", st)
	}
	files := testkit.Git(t, ws, "show", "--name-status", "--format=", c)
	for _, want := range []string{"M\tREADME.md", "A\tstaged.txt", "D\tdocs/guide.md"} {
		if !strings.Contains(files, want) {
			t.Errorf("commit lacks %q:\n%s", want, files)
		}
	}
	msg := testkit.Git(t, ws, "log", "-1", "--format=%an <%ae>%n%B", c)
	for _, want := range []string{"Logist <logist@localhost>", "logist: worker completed phase work", "Did it.", "Logist-Job: job-1", "Logist-Checkpoint: cp-0001-work"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q:\n%s", want, msg)
		}
	}
	// The agent's controls are escaped, as wherever a person reads them:
	// git log prints a message as it is.
	if strings.ContainsRune(msg, 0x1b) || !strings.Contains(msg, `Logist-Checkpoint: forged\x1b[2J`) {
		t.Errorf("the summary's ESC reached the message raw:\n%q", msg)
	}
	if !strings.HasSuffix(msg, "Logist-Checkpoint: cp-0001-work") {
		t.Errorf("the trailer is not the message's last line:\n%s", msg)
	}
	// The same point committed again (after a crash) is the same commit.
	again, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work", Phase: "work", Role: "worker", Summary: summary})
	if err != nil || again != c {
		t.Errorf("committed again: %s, %v; want %s", again, err, c)
	}
}

func TestCommitRefusesAGitDirThatIsNotTheWorkspaces(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	before := state(t, repo)
	if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
		t.Fatal(err)
	}
	write(t, ws, ".git", "gitdir: "+filepath.Join(repo, ".git")+"\n")
	if _, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Checkpoint: "cp-1"}); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("commit through a gitdir file: %v", err)
	}
	if state(t, repo) != before {
		t.Error("the source repository changed")
	}
}

func TestReconcileUndoesAnUnrecordedCommitOnly(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, base := prepare(t, repo, "main")
	write(t, ws, "new.txt", "new\n")
	c, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work", Phase: "work", Role: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := gitws.Reconcile(ctx, ws, func(x string) bool { return x == c }); err != nil || d != "" {
		t.Fatalf("a recorded commit was undone: %q %v", d, err)
	}
	d, err := gitws.Reconcile(ctx, ws, func(string) bool { return false })
	if err != nil || d != c {
		t.Fatalf("reconcile: %q %v, want %s dropped", d, err, c)
	}
	if got := testkit.Git(t, ws, "rev-parse", "refs/heads/logist/job-1"); got != base.Commit {
		t.Errorf("branch at %s, want the base %s", got, base.Commit)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "new.txt")); err != nil || string(b) != "new\n" {
		t.Errorf("the agent's file went with the commit: %q %v", b, err)
	}
	// An agent's commit at the tip is never undone.
	testkit.Git(t, ws, "add", "new.txt")
	testkit.Git(t, ws, "commit", "-q", "-m", "agent")
	if d, err := gitws.Reconcile(ctx, ws, func(string) bool { return false }); err != nil || d != "" {
		t.Errorf("an agent's commit was undone: %q %v", d, err)
	}
}

// The branch's patch applies cleanly to a checkout of the base and gives
// the branch's tree: binary files, a rename and a deletion included.
func TestPatchAppliesToTheBase(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, base := prepare(t, repo, "main")
	testkit.Git(t, ws, "mv", "new-name.txt", "renamed-again.txt")
	if err := os.Remove(filepath.Join(ws, "src/main.go")); err != nil {
		t.Fatal(err)
	}
	bin := append(testkit.BinaryFile(), 9, 0, 9)
	if err := os.WriteFile(filepath.Join(ws, "logo.bin"), bin, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "new.bin"), []byte{0, 0, 1, 2, 0}, 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "README.md", "# demo\nmore\n")
	tip, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work"})
	if err != nil {
		t.Fatal(err)
	}
	stat, err := gitws.DiffStat(ctx, ws, base.Commit, tip)
	if err != nil || !strings.Contains(stat, "renamed-again.txt") || !strings.Contains(stat, "5 files changed") {
		t.Errorf("diff stat: %v\n%s", err, stat)
	}
	patch, err := gitws.Patch(ctx, ws, base.Commit, tip)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(patch, []byte("GIT binary patch")) || !bytes.Contains(patch, []byte("rename from new-name.txt")) {
		t.Errorf("patch lacks a binary hunk or the rename:\n%s", patch)
	}
	check := t.TempDir()
	testkit.Git(t, check, "clone", "-q", repo, ".")
	testkit.Git(t, check, "checkout", "-q", base.Commit)
	p := filepath.Join(t.TempDir(), "job.patch")
	if err := os.WriteFile(p, patch, 0o644); err != nil {
		t.Fatal(err)
	}
	testkit.Git(t, check, "apply", "--index", p)
	if got, want := testkit.Git(t, check, "write-tree"), testkit.Git(t, ws, "rev-parse", tip+"^{tree}"); got != want {
		t.Errorf("patched base has tree %s, the branch %s", got, want)
	}
}

func TestRestoreAndPush(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	// A hook in the source must not run when Logist pushes into it.
	hook := filepath.Join(repo, ".git", "hooks", "pre-receive")
	marker := filepath.Join(t.TempDir(), "hook-ran")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ws, base := prepare(t, repo, "main")
	write(t, ws, "result.txt", "the work\n")
	tip, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work"})
	if err != nil {
		t.Fatal(err)
	}
	mainBefore := testkit.Git(t, repo, "rev-parse", "main")
	var refused *gitws.RefusedPushError
	if err := gitws.Push(ctx, ws, repo, "logist/job-1", "main"); !errors.As(err, &refused) {
		t.Errorf("push to the source's current branch: %v", err)
	}
	if err := gitws.Push(ctx, ws, repo, "logist/job-1", "bad..name"); !errors.As(err, &refused) {
		t.Errorf("push under a bad name: %v", err)
	}
	if err := gitws.Push(ctx, ws, repo, "logist/job-1", "review/job-1"); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Git(t, repo, "rev-parse", "review/job-1"); got != tip {
		t.Errorf("pushed branch at %s, want %s", got, tip)
	}
	if got := testkit.Git(t, repo, "rev-parse", "main"); got != mainBefore {
		t.Error("the push moved the source's main")
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the source's pre-receive hook ran")
	}
	if st := testkit.Git(t, repo, "status", "--porcelain"); st != "" {
		t.Errorf("the source's checkout changed:\n%s", st)
	}
	// Back to the base: branch, HEAD and index (the files are the
	// snapshot's business; put back by hand here).
	if err := os.Remove(filepath.Join(ws, "result.txt")); err != nil {
		t.Fatal(err)
	}
	if err := gitws.Restore(ctx, ws, "logist/job-1", base.Commit); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != base.Commit {
		t.Errorf("HEAD at %s after restore, want %s", got, base.Commit)
	}
	if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("status after restore not clean:\n%s", st)
	}
}

// A recovery point's commit is kept by a ref of its own: an agent that
// resets the job branch below it, expires the reflog and prunes leaves it
// in the repository, and the branch can go back to it. Once the agent
// deletes that ref too and prunes, Restorable (and Restore) say the
// commit is gone, and nothing moves. Reconcile lets go of the commit it
// undoes.
func TestPointCommitsOutliveTheAgentsRewrite(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, base := prepare(t, repo, "main")
	write(t, ws, "work.txt", "work\n")
	c, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work", Phase: "work", Role: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if got := testkit.Git(t, ws, "rev-parse", gitws.KeepRefs+c); got != c {
		t.Fatalf("keep ref at %q, want %s", got, c)
	}
	prune := func() {
		testkit.Git(t, ws, "reflog", "expire", "--expire=now", "--all")
		testkit.Git(t, ws, "gc", "-q", "--prune=now")
	}
	// The agent's rewrite: the branch back at the base, its own commit on
	// top, the history pruned.
	testkit.Git(t, ws, "reset", "-q", "--hard", base.Commit)
	write(t, ws, "other.txt", "other\n")
	testkit.Git(t, ws, "add", "other.txt")
	testkit.Git(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qm", "rewrite")
	prune()
	if err := gitws.Restorable(ctx, ws, "logist/job-1", c); err != nil {
		t.Fatalf("the point's commit after the agent's rewrite: %v", err)
	}
	if err := os.Remove(filepath.Join(ws, "other.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "work.txt", "work\n")
	if err := gitws.Restore(ctx, ws, "logist/job-1", c); err != nil {
		t.Fatal(err)
	}
	if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != c {
		t.Errorf("HEAD at %s after the restore, want %s", got, c)
	}
	if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("the workspace differs from the point's commit:\n%s", st)
	}

	// The keep ref deleted as well, and the commit pruned.
	testkit.Git(t, ws, "checkout", "-q", "--detach", base.Commit)
	testkit.Git(t, ws, "branch", "-q", "-D", "logist/job-1")
	testkit.Git(t, ws, "update-ref", "-d", gitws.KeepRefs+c)
	prune()
	var missing *gitws.MissingCommitError
	if err := gitws.Restorable(ctx, ws, "logist/job-1", c); !errors.As(err, &missing) || missing.Commit != c {
		t.Fatalf("Restorable of a pruned commit: %v", err)
	}
	before := testkit.Git(t, ws, "rev-parse", "HEAD")
	if err := gitws.Restore(ctx, ws, "logist/job-1", c); !errors.As(err, &missing) {
		t.Fatalf("Restore to a pruned commit: %v", err)
	}
	if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != before {
		t.Errorf("a refused Restore moved HEAD to %s", got)
	}
	if err := gitws.Restorable(ctx, ws, "logist/job-1", base.Commit); err != nil {
		t.Errorf("the base, kept by %s: %v", gitws.BaseRef, err)
	}

	// Reconcile drops the keep ref of the commit it undoes.
	testkit.Git(t, ws, "checkout", "-q", "-B", "logist/job-1", base.Commit)
	write(t, ws, "late.txt", "late\n")
	u, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0002-work", Phase: "work", Role: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if d, err := gitws.Reconcile(ctx, ws, func(string) bool { return false }); err != nil || d != u {
		t.Fatalf("reconcile: %q %v, want %s dropped", d, err, u)
	}
	if refs := testkit.Git(t, ws, "for-each-ref", "--format=%(refname)", gitws.KeepRefs); refs != "" {
		t.Errorf("keep refs after the undone commit: %q", refs)
	}
}

// A rollback's Restore builds the index in a file of Logist's own: an
// index.lock the agent left stops nothing (it stopped read-tree after
// the branch had moved). A lock on HEAD or the branch, which Restore
// must take, is named before anything moves (a *LockedError).
func TestRestoreAndTheAgentsLocks(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, base := prepare(t, repo, "main")
	write(t, ws, "work.txt", "work\n")
	c, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work"})
	if err != nil {
		t.Fatal(err)
	}
	gd := filepath.Join(ws, ".git")
	write(t, gd, "index.lock", "")
	if err := os.Remove(filepath.Join(ws, "work.txt")); err != nil { // the snapshot's part
		t.Fatal(err)
	}
	if err := gitws.Restore(ctx, ws, "logist/job-1", base.Commit); err != nil {
		t.Fatalf("Restore with the agent's index.lock: %v", err)
	}
	if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != base.Commit {
		t.Errorf("HEAD at %s, want the base %s", got, base.Commit)
	}
	if err := os.Remove(filepath.Join(gd, "index.lock")); err != nil {
		t.Fatalf("the agent's index.lock: %v", err)
	}
	if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("the index is not the base's:\n%s", st)
	}

	for _, lock := range []string{"HEAD.lock", "refs/heads/logist/job-1.lock"} {
		write(t, gd, lock, "")
		var locked *gitws.LockedError
		if err := gitws.Restorable(ctx, ws, "logist/job-1", c); !errors.As(err, &locked) || locked.Lock != lock ||
			!strings.Contains(err.Error(), "remove it once no git process runs there") {
			t.Errorf("Restorable with %s: %v", lock, err)
		}
		if err := gitws.Restore(ctx, ws, "logist/job-1", c); !errors.As(err, &locked) {
			t.Errorf("Restore with %s: %v", lock, err)
		}
		if got := testkit.Git(t, ws, "rev-parse", "logist/job-1"); got != base.Commit {
			t.Errorf("the branch moved to %s past %s", got, lock)
		}
		if err := os.Remove(filepath.Join(gd, lock)); err != nil {
			t.Fatal(err)
		}
	}
}

// A push onto a source branch that has moved on is refused with what to
// do (git's own hint, git pull, has no use in a workspace without a
// remote), and so is one under the name of a source's tag, which would
// make the name ambiguous there. Nothing is pushed either way.
func TestPushRefusesADivergedBranchAndATagsName(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	write(t, ws, "result.txt", "the work\n")
	if _, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work"}); err != nil {
		t.Fatal(err)
	}
	// feature moves on in the source after the job began.
	testkit.Git(t, repo, "branch", "-f", "feature", "main")
	testkit.Git(t, repo, "checkout", "-q", "feature")
	write(t, repo, "theirs.txt", "theirs\n")
	testkit.Git(t, repo, "add", "theirs.txt")
	testkit.Git(t, repo, "commit", "-qm", "theirs")
	testkit.Git(t, repo, "checkout", "-q", "main") // the source has a tag v1 (testkit.GitRepo)
	before := testkit.Git(t, repo, "for-each-ref")
	var refused *gitws.RefusedPushError
	err := gitws.Push(ctx, ws, repo, "logist/job-1", "feature")
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "branch feature of the source repository has commits the job branch does not") || strings.Contains(err.Error(), "git pull") {
		t.Errorf("push onto a diverged branch: %v", err)
	}
	err = gitws.Push(ctx, ws, repo, "logist/job-1", "v1")
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "has a tag v1") {
		t.Errorf("push under a tag's name: %v", err)
	}
	if after := testkit.Git(t, repo, "for-each-ref"); after != before {
		t.Errorf("a refused push changed the source's refs:\n%s\nwas:\n%s", after, before)
	}
}

// DiffHead keeps the first max bytes of Diff and one more, and counts the
// whole: what the console shows of a diff costs it no more than that.
func TestDiffHeadIsDiffsHead(t *testing.T) {
	t.Parallel()
	ws, base := prepare(t, testkit.GitRepo(t), "main")
	write(t, ws, "big.txt", strings.Repeat("a line of the job's work\n", 4000))
	tip, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work"})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := gitws.Diff(ctx, ws, base.Commit, tip)
	if err != nil {
		t.Fatal(err)
	}
	for _, max := range []int{0, 1, 1000, len(whole) - 1, len(whole), len(whole) + 10} {
		head, total, err := gitws.DiffHead(ctx, ws, base.Commit, tip, max)
		if err != nil {
			t.Fatal(err)
		}
		if want := whole[:min(max+1, len(whole))]; head != want || total != int64(len(whole)) {
			t.Errorf("max %d: %d bytes kept of %d counted; want %d of %d", max, len(head), total, len(want), len(whole))
		}
	}
}
