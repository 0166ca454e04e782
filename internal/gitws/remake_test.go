package gitws_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/testkit"
)

// A workspace whose repository is lost (.git removed, a link to another
// repository, made again without the job's commits) is told apart from
// one the vet refuses, and is made again from the source at the base:
// the job branch and HEAD there, the base ref, no remote, the index at
// the base; a link's target is left alone. A source without the base
// refuses, leaving the workspace as it was and no clone behind.
func TestRemakeALostRepository(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	for _, tc := range []struct {
		name string
		lose func(t *testing.T, ws string)
	}{
		{".git removed", func(t *testing.T, ws string) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
		}},
		{".git a link to another repository", func(t *testing.T, ws string) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(repo, ".git"), filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
		}},
		{".git made again", func(t *testing.T, ws string) {
			if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
				t.Fatal(err)
			}
			testkit.Git(t, ws, "init", "-q")
			testkit.Git(t, ws, "add", "-A")
			testkit.Git(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qm", "mine")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sourceBefore := state(t, repo)
			ws, base := prepare(t, repo, "main")
			write(t, ws, "work.txt", "work\n")
			if _, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work"}); err != nil {
				t.Fatal(err)
			}
			tc.lose(t, ws)
			err := gitws.Restorable(ctx, ws, "logist/job-1", base.Commit)
			if err == nil || !gitws.Lost(err) {
				t.Fatalf("Restorable: %v, want a lost repository", err)
			}
			r, err := gitws.Remake(ctx, ws, repo, base.Commit, "logist/job-1")
			if err != nil {
				t.Fatal(err)
			}
			// The files back at the base, as the rollback's snapshot puts them.
			if err := os.Remove(filepath.Join(ws, "work.txt")); err != nil {
				t.Fatal(err)
			}
			if err := r.Install(ctx); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Lstat(filepath.Join(ws, ".git")); err != nil || !fi.IsDir() {
				t.Fatalf(".git after the install: %v %v", fi, err)
			}
			if got := testkit.Git(t, ws, "symbolic-ref", "HEAD"); got != "refs/heads/logist/job-1" {
				t.Errorf("HEAD on %s", got)
			}
			for _, ref := range []string{"HEAD", gitws.BaseRef} {
				if got := testkit.Git(t, ws, "rev-parse", ref); got != base.Commit {
					t.Errorf("%s at %s, want the base %s", ref, got, base.Commit)
				}
			}
			if remotes := testkit.Git(t, ws, "remote"); remotes != "" {
				t.Errorf("remotes in the remade repository: %q", remotes)
			}
			if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
				t.Errorf("the workspace differs from the base:\n%s", st)
			}
			if err := gitws.Restorable(ctx, ws, "logist/job-1", base.Commit); err != nil {
				t.Errorf("Restorable after the install: %v", err)
			}
			if _, err := os.Stat(ws + ".remade"); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the clone was left beside the workspace: %v", err)
			}
			if state(t, repo) != sourceBefore {
				t.Error("the source repository changed")
			}
		})
	}

	t.Run("refused by the vet, not lost", func(t *testing.T) {
		t.Parallel()
		ws, base := prepare(t, repo, "main")
		testkit.Git(t, ws, "config", "filter.x.clean", "cat")
		var unsafe *gitws.UnsafeRepoError
		if err := gitws.Restorable(ctx, ws, "logist/job-1", base.Commit); !errors.As(err, &unsafe) || gitws.Lost(err) {
			t.Errorf("Restorable of an unsafe repository: %v", err)
		}
	})

	t.Run("a source without the base", func(t *testing.T) {
		t.Parallel()
		ws, _ := prepare(t, repo, "main")
		if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
			t.Fatal(err)
		}
		missing := strings.Repeat("ab", 20)
		_, err := gitws.Remake(ctx, ws, repo, missing, "logist/job-1")
		if err == nil || !strings.Contains(err.Error(), "no longer has the job's base commit "+missing) {
			t.Fatalf("Remake at a commit the source lacks: %v", err)
		}
		if _, err := os.Stat(ws + ".remade"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the clone was left beside the workspace: %v", err)
		}
		if _, err := os.Lstat(filepath.Join(ws, ".git")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the workspace changed: %v", err)
		}
	})
}

// A repository made again on the job branch still has a tip the rollback
// leaves: KeepAbandoned carries it (and what it reaches, nothing else of
// the lost repository) into the remade one under its ref, which Install
// keeps. One whose repository the agent made unsafe since keeps nothing,
// and says why.
func TestRemadeKeepsTheAbandonedCommit(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	lose := func(t *testing.T) (ws, mine string, r *gitws.Remade) {
		t.Helper()
		ws, base := prepare(t, repo, "main")
		if err := os.RemoveAll(filepath.Join(ws, ".git")); err != nil {
			t.Fatal(err)
		}
		testkit.Git(t, ws, "init", "-q", "-b", "logist/job-1")
		testkit.Git(t, ws, "add", "-A")
		testkit.Git(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qm", "mine")
		testkit.Git(t, ws, "tag", "agents-tag")
		mine = testkit.Git(t, ws, "rev-parse", "HEAD")
		r, err := gitws.Remake(ctx, ws, repo, base.Commit, "logist/job-1")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(r.Discard)
		return ws, mine, r
	}
	t.Run("kept", func(t *testing.T) {
		t.Parallel()
		ws, mine, r := lose(t)
		if err := r.KeepAbandoned(ctx, "no ref..name", mine); err == nil {
			t.Error("a command id that makes no ref name was taken")
		}
		if err := r.KeepAbandoned(ctx, "cmd-1", mine); err != nil {
			t.Fatal(err)
		}
		if err := r.Install(ctx); err != nil {
			t.Fatal(err)
		}
		ref := gitws.AbandonedRef("cmd-1")
		if got := testkit.Git(t, ws, "rev-parse", ref); got != mine {
			t.Errorf("%s at %s, want the lost repository's %s", ref, got, mine)
		}
		if got := testkit.Git(t, ws, "for-each-ref", "--format=%(refname)", "--points-at", mine); got != ref {
			t.Errorf("refs at the kept commit %q, want only %s", got, ref)
		}
	})
	t.Run("unsafe", func(t *testing.T) {
		t.Parallel()
		ws, mine, r := lose(t)
		testkit.Git(t, ws, "config", "filter.x.clean", "cat")
		var unsafe *gitws.UnsafeRepoError
		if err := r.KeepAbandoned(ctx, "cmd-1", mine); !errors.As(err, &unsafe) {
			t.Fatalf("KeepAbandoned from an unsafe repository: %v", err)
		}
	})
}
