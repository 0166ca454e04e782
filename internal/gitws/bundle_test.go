package gitws_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/testkit"
)

// copyFiles copies the files of workspace ws, not its .git, into a new
// folder: what a snapshot restores.
func copyFiles(t *testing.T, ws string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		if rel == ".git" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// A repository moves as the agent left it (a stopped job's, in a
// cluster): its bundle and its HEAD (Head) make it again elsewhere with
// every branch, HEAD on the branch the agent was on or detached at the
// commit it was at (a commit on no branch included), and the index at
// HEAD. A HEAD that is neither a branch nor a commit is refused.
func TestUnbundleHeadAsTheAgentLeftIt(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	for _, tc := range []struct {
		name string
		move func(t *testing.T, ws string)
	}{
		{"on the job branch", func(t *testing.T, ws string) {}},
		{"on a branch of its own", func(t *testing.T, ws string) {
			testkit.Git(t, ws, "checkout", "-q", "-b", "mine")
		}},
		{"detached", func(t *testing.T, ws string) {
			testkit.Git(t, ws, "checkout", "-q", "--detach")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ws, _ := prepare(t, repo, "main")
			tc.move(t, ws)
			write(t, ws, "mine.txt", "mine\n")
			testkit.Git(t, ws, "add", "mine.txt")
			testkit.Git(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-qm", "my own commit")
			write(t, ws, "later.txt", "not committed\n")
			commit := testkit.Git(t, ws, "rev-parse", "HEAD")
			head, err := gitws.Head(ctx, ws)
			if err != nil {
				t.Fatal(err)
			}
			b, err := gitws.Bundle(ctx, ws)
			if err != nil {
				t.Fatal(err)
			}
			dst := copyFiles(t, ws)
			if err := gitws.UnbundleHead(ctx, dst, b, head); err != nil {
				t.Fatal(err)
			}
			if got, want := testkit.Git(t, dst, "rev-parse", "HEAD"), commit; got != want {
				t.Errorf("HEAD at %s, want the agent's commit %s", got, want)
			}
			sym := func(dir string) string {
				out, _ := gitws.Head(ctx, dir)
				return out
			}
			if got, want := sym(dst), sym(ws); got != want {
				t.Errorf("HEAD %s, want %s as the agent left it", got, want)
			}
			refs := func(dir string) string {
				return testkit.Git(t, dir, "for-each-ref", "--format=%(refname) %(objectname)")
			}
			if got, want := refs(dst), refs(ws); got != want {
				t.Errorf("refs\n%s\nwant the agent's\n%s", got, want)
			}
			if st := testkit.Git(t, dst, "status", "--porcelain"); st != "?? later.txt" {
				t.Errorf("status %q, want only later.txt untracked", st)
			}
		})
	}
	ws, _ := prepare(t, repo, "main")
	b, err := gitws.Bundle(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, head := range []string{"", "HEAD", "refs/tags/x", "refs/heads/a..b", "0123"} {
		if err := gitws.UnbundleHead(ctx, copyFiles(t, ws), b, head); err == nil {
			t.Errorf("HEAD %q: no error", head)
		}
	}
}
