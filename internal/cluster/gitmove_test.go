package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
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
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("SKIP (loud): git is not installed")
	}
	src := t.TempDir()
	git(t, src, "init", "-q")
	if err := os.WriteFile(filepath.Join(src, "README"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(t, src, "add", "README")
	git(t, src, "commit", "-q", "-m", "base")
	base := git(t, src, "rev-parse", "HEAD")

	s, _ := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	job := strings.Replace(strings.ReplaceAll(movingJob, `"moving"`, `"moving-git"`), `"cost_threshold": 100,`,
		fmt.Sprintf(`"cost_threshold": 100, "workspace": {"git": {"repo": %q}},`, src), 1)
	if _, err := Submit(ctx, s, []byte(job)); err != nil {
		t.Fatal(err)
	}
	const ttl = 2 * time.Second
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
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
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
