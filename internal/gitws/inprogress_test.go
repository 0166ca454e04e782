package gitws_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/testkit"
)

// gitFails runs a git command the test expects to stop (a conflict).
func gitFails(t *testing.T, dir string, args ...string) {
	t.Helper()
	c := exec.Command("git", append([]string{"-c", "core.hooksPath=/dev/null", "-c", "user.name=Agent", "-c", "user.email=agent@example.com"}, args...)...)
	c.Dir = dir
	c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_EDITOR=true")
	if out, err := c.CombinedOutput(); err == nil {
		t.Fatalf("git %s succeeded, want a conflict:\n%s", strings.Join(args, " "), out)
	}
}

// conflicting makes a branch side whose a.txt conflicts with the job
// branch's, and returns side's commit; the workspace is back on the job
// branch.
func conflicting(t *testing.T, ws string) string {
	t.Helper()
	branch := gitws.Branch("job-1")
	testkit.Git(t, ws, "checkout", "-q", "-b", "side")
	write(t, ws, "a.txt", "side's\n")
	testkit.Git(t, ws, "add", "a.txt")
	testkit.Git(t, ws, "commit", "-q", "-m", "side")
	side := testkit.Git(t, ws, "rev-parse", "HEAD")
	testkit.Git(t, ws, "checkout", "-q", branch)
	write(t, ws, "a.txt", "the job's\n")
	testkit.Git(t, ws, "add", "a.txt")
	testkit.Git(t, ws, "commit", "-q", "-m", "job")
	return side
}

// A merge the agent left in conflict refuses the answer, naming the
// conflicts and how to end it; once resolved (not committed), Logist's
// point is the merge, as git commit would make it, and the merge ends.
func TestAMergeLeftInProgress(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	side := conflicting(t, ws)
	jobTip := testkit.Git(t, ws, "rev-parse", "HEAD")
	gitFails(t, ws, "merge", "side")

	err := gitws.Committable(ws, "job-1")
	var ip *gitws.InProgressError
	if !errors.As(err, &ip) || ip.Mark != "MERGE_HEAD" || len(ip.Unmerged) != 1 || ip.Unmerged[0] != "a.txt" {
		t.Fatalf("Committable = %v", err)
	}
	for _, want := range []string{".git/MERGE_HEAD is there", "a merge is in progress with conflicts in a.txt", "git merge --abort", "logist resume"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the reason lacks %q: %v", want, err)
		}
	}

	write(t, ws, "a.txt", "both\n")
	testkit.Git(t, ws, "add", "a.txt")
	if err := gitws.Committable(ws, "job-1"); err != nil {
		t.Fatalf("a resolved merge: %v", err)
	}
	c, err := gitws.Commit(ctx, ws, gitws.Branch("job-1"), gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work", Phase: "work", Role: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := testkit.Git(t, ws, "rev-list", "--parents", "-n", "1", c), c+" "+jobTip+" "+side; got != want {
		t.Errorf("the point's parents: %s, want %s", got, want)
	}
	if _, err := os.Lstat(filepath.Join(ws, ".git", "MERGE_HEAD")); !os.IsNotExist(err) {
		t.Error("MERGE_HEAD is left: the agent's next commit would be a merge")
	}
	if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("status not clean:\n%s", st)
	}
	write(t, ws, "b.txt", "next\n")
	testkit.Git(t, ws, "add", "b.txt")
	testkit.Git(t, ws, "commit", "-q", "-m", "the agent's next commit")
	if n := testkit.Git(t, ws, "rev-list", "--parents", "-n", "1", "HEAD"); len(strings.Fields(n)) != 2 {
		t.Errorf("the agent's next commit is a merge: %s", n)
	}
}

// Other operations in progress refuse the answer; a rollback ends them
// all, so the rolled-back branch carries none into the next agent's
// commit.
func TestOperationsInProgressAndARollback(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, base := prepare(t, repo, "main")
	side := conflicting(t, ws)
	gitFails(t, ws, "cherry-pick", side)
	err := gitws.Committable(ws, "job-1")
	var ip *gitws.InProgressError
	if !errors.As(err, &ip) || ip.Mark != "CHERRY_PICK_HEAD" || !strings.Contains(err.Error(), "git cherry-pick --abort") {
		t.Fatalf("a cherry-pick: %v", err)
	}
	testkit.Git(t, ws, "cherry-pick", "--abort")
	gitFails(t, ws, "rebase", "side")
	if err := gitws.Committable(ws, "job-1"); !errors.As(err, &ip) || !strings.HasPrefix(ip.Mark, "rebase-") || !strings.Contains(err.Error(), "git rebase --abort") {
		t.Fatalf("a rebase: %v", err)
	}

	if err := gitws.Restore(ctx, ws, gitws.Branch("job-1"), base.Commit); err != nil {
		t.Fatal(err)
	}
	for _, mark := range []string{"rebase-merge", "rebase-apply", "CHERRY_PICK_HEAD", "MERGE_HEAD"} {
		if _, err := os.Lstat(filepath.Join(ws, ".git", mark)); !os.IsNotExist(err) {
			t.Errorf(".git/%s is left after the rollback", mark)
		}
	}
	if err := gitws.Committable(ws, "job-1"); err != nil {
		t.Errorf("after the rollback: %v", err)
	}
	if head := testkit.Git(t, ws, "symbolic-ref", "HEAD"); head != "refs/heads/"+gitws.Branch("job-1") {
		t.Errorf("HEAD is %s", head)
	}
}

// MERGE_HEAD is the agent's text: a line that is not a commit id is
// refused before anything moves, never passed to git as an argument.
func TestAForgedMergeHeadMovesNothing(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	before := testkit.Git(t, ws, "rev-parse", "HEAD")
	for _, forged := range []string{"--help\n", "0123456789012345678901234567890123456789\n"} {
		write(t, ws, ".git/MERGE_HEAD", forged)
		write(t, ws, "x.txt", "work\n")
		_, err := gitws.Commit(ctx, ws, gitws.Branch("job-1"), gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work"})
		var ue *gitws.UncommittableError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "MERGE_HEAD names") {
			t.Errorf("MERGE_HEAD %q: %v", forged, err)
		}
		if got := testkit.Git(t, ws, "rev-parse", "HEAD"); got != before {
			t.Errorf("MERGE_HEAD %q: HEAD moved to %s", forged, got)
		}
	}
}
