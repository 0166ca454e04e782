package gitws_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// A stopped worker's index moves with its repository (BundleParked): what
// it staged but did not commit — a new file, a change staged then changed
// again, a removal — is staged again where UnbundleHead makes the
// repository, so `git diff --cached` and `git status` are as the worker
// left them; the ref that carried the index is in neither repository
// afterwards. An index that is HEAD's adds no ref; one with a conflict in
// it is not carried, and says why: it comes back as HEAD's tree.
func TestUnbundleParkedKeepsTheIndex(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	noRef := func(t *testing.T, dir string) {
		t.Helper()
		if refs := testkit.Git(t, dir, "for-each-ref", gitws.ParkedIndexRef); refs != "" {
			t.Errorf("%s keeps %s", dir, refs)
		}
	}
	moved := func(t *testing.T, ws string, wantUnkept bool) string {
		t.Helper()
		head, err := gitws.Head(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		b, unkept, err := gitws.BundleParked(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		if (unkept != "") != wantUnkept {
			t.Fatalf("unkept %q, want it said: %v", unkept, wantUnkept)
		}
		noRef(t, ws)
		dst := copyFiles(t, ws)
		if err := gitws.UnbundleHead(ctx, dst, b, head); err != nil {
			t.Fatal(err)
		}
		noRef(t, dst)
		return dst
	}

	t.Run("staged", func(t *testing.T) {
		t.Parallel()
		ws, _ := prepare(t, repo, "main")
		write(t, ws, "staged.txt", "staged\n")
		write(t, ws, "README.md", "# staged\n")
		testkit.Git(t, ws, "add", "staged.txt", "README.md")
		testkit.Git(t, ws, "rm", "-q", "--cached", "new-name.txt")
		write(t, ws, "README.md", "# staged, then changed again\n")
		write(t, ws, "untracked.txt", "not added\n")
		dst := moved(t, ws, false)
		for _, args := range [][]string{{"diff", "--cached"}, {"diff"}, {"status", "--porcelain"}} {
			if got, want := testkit.Git(t, dst, args...), testkit.Git(t, ws, args...); got != want {
				t.Errorf("git %s:\n%s\nwant the worker's\n%s", strings.Join(args, " "), got, want)
			}
		}
		if st := testkit.Git(t, dst, "status", "--porcelain"); !strings.Contains(st, "A  staged.txt") || !strings.Contains(st, "MM README.md") {
			t.Errorf("status %q, want staged.txt added and README.md staged and changed", st)
		}
	})
	t.Run("nothing staged", func(t *testing.T) {
		t.Parallel()
		ws, _ := prepare(t, repo, "main")
		write(t, ws, "README.md", "# changed, not staged\n")
		b, unkept, err := gitws.BundleParked(ctx, ws)
		if err != nil || unkept != "" {
			t.Fatalf("%q %v", unkept, err)
		}
		p := filepath.Join(t.TempDir(), "b")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if heads := testkit.Git(t, ws, "bundle", "list-heads", p); strings.Contains(heads, gitws.ParkedIndexRef) {
			t.Errorf("an index that is HEAD's is carried:\n%s", heads)
		}
		dst := moved(t, ws, false)
		if c, w := testkit.Git(t, dst, "diff", "--cached", "--name-only"), testkit.Git(t, dst, "diff", "--name-only"); c != "" || w != "README.md" {
			t.Errorf("staged %q, changed %q: want README.md changed, nothing staged", c, w)
		}
	})
	// Intent-to-add entries (git add -N), which no tree holds, come back
	// as such: alone (the index's tree is HEAD's), or beside staged
	// changes; an ignored file's and an odd name's too. One whose file
	// the worker removed since cannot be added again (git add -N needs
	// the file): it alone is left out.
	status := func(t *testing.T, dir string) string {
		t.Helper()
		return testkit.Git(t, dir, "status", "--porcelain", "--no-renames")
	}
	t.Run("intent to add alone", func(t *testing.T) {
		t.Parallel()
		ws, _ := prepare(t, repo, "main")
		write(t, ws, "new.txt", "new\n")
		testkit.Git(t, ws, "add", "-N", "new.txt")
		if st := status(t, ws); st != "A new.txt" { // testkit trims the line's lead
			t.Fatalf("status %q, want new.txt intent-to-add", st)
		}
		dst := moved(t, ws, false)
		if got, want := status(t, dst), status(t, ws); got != want {
			t.Errorf("status %q, want the worker's %q", got, want)
		}
	})
	t.Run("intent to add", func(t *testing.T) {
		t.Parallel()
		ws, _ := prepare(t, repo, "main")
		write(t, ws, "staged.txt", "staged\n")
		testkit.Git(t, ws, "add", "staged.txt")
		write(t, ws, ".gitignore", "*.log\n")
		for _, f := range []string{"new.txt", "dir/deep.txt", "odd\nname \"q\".txt", "caf\xe9.txt", "ignored.log", "gone.txt"} {
			write(t, ws, f, "content of "+f+"\n")
		}
		testkit.Git(t, ws, "add", "-N", "new.txt", "dir/deep.txt", "odd\nname \"q\".txt", "caf\xe9.txt", "gone.txt")
		testkit.Git(t, ws, "add", "-N", "-f", "ignored.log")
		if err := os.Remove(filepath.Join(ws, "gone.txt")); err != nil {
			t.Fatal(err)
		}
		dst := moved(t, ws, false)
		var want []string
		for _, l := range strings.Split(status(t, ws), "\n") {
			if !strings.Contains(l, "gone.txt") {
				want = append(want, l)
			}
		}
		if got := status(t, dst); got != strings.Join(want, "\n") {
			t.Errorf("status\n%s\nwant the worker's, gone.txt left out\n%s", got, strings.Join(want, "\n"))
		}
		if got, want := testkit.Git(t, dst, "diff", "--cached"), testkit.Git(t, ws, "diff", "--cached"); got != want {
			t.Errorf("git diff --cached:\n%s\nwant the worker's\n%s", got, want)
		}
	})
	// A parked index of format 1 (no intent-to-add lines: a bundle from
	// before they were carried) still comes back, staged.
	t.Run("format 1", func(t *testing.T) {
		t.Parallel()
		ws, _ := prepare(t, repo, "main")
		write(t, ws, "staged.txt", "staged\n")
		testkit.Git(t, ws, "add", "staged.txt")
		tree := testkit.Git(t, ws, "write-tree")
		c := testkit.Git(t, ws, "-c", "user.name=a", "-c", "user.email=a@example.com",
			"commit-tree", tree, "-p", "HEAD", "-m", "logist: the index of a stopped worker")
		testkit.Git(t, ws, "update-ref", gitws.ParkedIndexRef, c)
		p := filepath.Join(t.TempDir(), "b")
		testkit.Git(t, ws, "bundle", "create", "--quiet", p, "--all")
		testkit.Git(t, ws, "update-ref", "-d", gitws.ParkedIndexRef)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		head, err := gitws.Head(ctx, ws)
		if err != nil {
			t.Fatal(err)
		}
		dst := copyFiles(t, ws)
		if err := gitws.UnbundleHead(ctx, dst, b, head); err != nil {
			t.Fatal(err)
		}
		noRef(t, dst)
		if got, want := status(t, dst), status(t, ws); got != want {
			t.Errorf("status %q, want the worker's %q", got, want)
		}
	})
	t.Run("conflict", func(t *testing.T) {
		t.Parallel()
		ws, _ := prepare(t, repo, "main")
		id := []string{"-c", "user.name=a", "-c", "user.email=a@example.com"}
		testkit.Git(t, ws, "checkout", "-q", "-b", "other")
		write(t, ws, "README.md", "# other\n")
		testkit.Git(t, ws, append(id, "commit", "-qam", "other")...)
		testkit.Git(t, ws, "checkout", "-q", "-")
		write(t, ws, "README.md", "# mine\n")
		testkit.Git(t, ws, append(id, "commit", "-qam", "mine")...)
		c := exec.Command("git", append(id, "merge", "-q", "other")...)
		c.Dir = ws
		if out, err := c.CombinedOutput(); err == nil {
			t.Fatalf("the merge did not conflict: %s", out)
		}
		write(t, ws, "staged.txt", "staged\n")
		testkit.Git(t, ws, "add", "staged.txt")
		dst := moved(t, ws, true)
		if st := testkit.Git(t, dst, "diff", "--cached"); st != "" {
			t.Errorf("a conflicted index came back as %q, want HEAD's", st)
		}
	})
}

// Bundle never carries the index's ref, not even one a crash left.
func TestBundleLeavesTheIndexRef(t *testing.T) {
	t.Parallel()
	ws, _ := prepare(t, testkit.GitRepo(t), "main")
	write(t, ws, "README.md", "# staged\n")
	testkit.Git(t, ws, "add", "README.md")
	testkit.Git(t, ws, "update-ref", gitws.ParkedIndexRef, "HEAD")
	b, err := gitws.Bundle(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	dst := copyFiles(t, ws)
	if err := gitws.Unbundle(ctx, dst, b, gitws.Branch("job-1")); err != nil {
		t.Fatal(err)
	}
	if c, w := testkit.Git(t, dst, "diff", "--cached", "--name-only"), testkit.Git(t, dst, "diff", "--name-only"); c != "" || w != "README.md" {
		t.Errorf("staged %q, changed %q: want README.md changed, not staged", c, w)
	}
}
