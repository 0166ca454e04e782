package gitws_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/testkit"
)

// An answer that completes its phase is held to the job's repository: a
// workspace on its job branch passes (the agent's own commits, branches
// and index lock included); one Logist will not run git in is refused as
// unsafe; one whose repository is gone, is not a folder, or was made again
// without the job branch, or that holds a lock Logist's commit would stop
// at, is refused as uncommittable. A job without a git workspace is held
// to nothing.
func TestAnswerCheck(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	if gitws.AnswerCheck(false, "job-1") != nil {
		t.Fatal("a job without a git workspace is held to a repository check")
	}
	check := gitws.AnswerCheck(true, "job-1")
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, ws string)
		unsafe bool
		lost   string // what an UncommittableError says, "" for none
	}{
		{"as cloned", func(*testing.T, string) {}, false, ""},
		{"the agent's commit on a branch of its own", func(t *testing.T, ws string) {
			testkit.Git(t, ws, "checkout", "-q", "-b", "mine")
			write(t, ws, "a.txt", "a\n")
			testkit.Git(t, ws, "add", "a.txt")
			testkit.Git(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qm", "mine")
		}, false, ""},
		{"a filter planted", func(t *testing.T, ws string) {
			testkit.Git(t, ws, "config", "filter.x.clean", "cat")
		}, true, ""},
		{".git removed", func(t *testing.T, ws string) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
		}, false, "the workspace has no .git folder"},
		{".git a link to another repository", func(t *testing.T, ws string) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(repo, ".git"), filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
		}, false, "the workspace's .git is not a folder"},
		{".git made again", func(t *testing.T, ws string) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
			testkit.Git(t, ws, "init", "-q")
			testkit.Git(t, ws, "add", "-A")
			testkit.Git(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qm", "mine")
		}, false, "its repository has no branch logist/job-1"},
		{"a lock left on HEAD", func(t *testing.T, ws string) {
			write(t, ws, ".git/HEAD.lock", "")
		}, false, ".git/HEAD.lock is there"},
		{"a lock left on the job branch", func(t *testing.T, ws string) {
			write(t, ws, ".git/refs/heads/logist/job-1.lock", "")
		}, false, ".git/refs/heads/logist/job-1.lock is there"},
		{"the agent's own index lock (Logist commits with an index of its own)", func(t *testing.T, ws string) {
			write(t, ws, ".git/index.lock", "")
		}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws, _ := prepare(t, repo, "")
			tc.change(t, ws)
			err := check(ws)
			var unsafe *gitws.UnsafeRepoError
			var lost *gitws.UncommittableError
			switch {
			case tc.unsafe:
				if !errors.As(err, &unsafe) {
					t.Fatalf("%v, want an unsafe repository", err)
				}
			case tc.lost != "":
				if !errors.As(err, &lost) || !strings.Contains(err.Error(), tc.lost) || !strings.Contains(err.Error(), "cannot be committed on its branch logist/job-1") {
					t.Fatalf("%v, want a lost repository: %s", err, tc.lost)
				}
			case err != nil:
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// A lock a git process lets go of within a moment (a gc the agent's commit
// started in the background) refuses nothing; one still there after the
// wait does. In a synctest bubble: the wait's clock is the bubble's.
func TestAnswerCheckWaitsForALockBeingLetGo(t *testing.T) {
	t.Parallel()
	ws, _ := prepare(t, testkit.GitRepo(t), "")
	lock := filepath.Join(ws, ".git", "HEAD.lock")
	synctest.Test(t, func(t *testing.T) {
		write(t, ws, ".git/HEAD.lock", "")
		gone := make(chan error, 1)
		go func() {
			time.Sleep(900 * time.Millisecond)
			gone <- os.Remove(lock)
		}()
		start := time.Now()
		if err := gitws.Committable(ws, "job-1"); err != nil {
			t.Fatalf("refused: %v", err)
		}
		if err := <-gone; err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < 900*time.Millisecond {
			t.Errorf("passed after %v, before the lock went", waited)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		write(t, ws, ".git/HEAD.lock", "")
		go func() {
			time.Sleep(1100 * time.Millisecond)
			_ = os.Remove(lock)
		}()
		var refused *gitws.UncommittableError
		if err := gitws.Committable(ws, "job-1"); !errors.As(err, &refused) {
			t.Fatalf("%v, want the lock refused after the wait", err)
		}
		time.Sleep(time.Second)
	})
}
