package clusterstore

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckBundleReadsGitsBundles: CheckBundle accepts the bundles git
// writes — v2, v3, a sha256 repository's, one with prerequisites — and
// refuses each cut short or altered.
func TestCheckBundleReadsGitsBundles(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("SKIP (loud): git is not installed")
	}
	run := func(t *testing.T, dir string, args ...string) {
		t.Helper()
		c := exec.Command("git", append([]string{"-c", "init.defaultBranch=main", "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		c.Dir = dir
		c.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	repo := func(format string) string {
		dir := t.TempDir()
		run(t, dir, "init", "-q", "--object-format="+format)
		for _, v := range []string{"one", "two"} {
			if err := os.WriteFile(filepath.Join(dir, "f"), []byte(v), 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, dir, "add", "f")
			run(t, dir, "commit", "-q", "-m", v)
		}
		return dir
	}
	sha1, sha256 := repo("sha1"), repo("sha256")
	cases := []struct {
		name, dir string
		opt, revs string
		sig       string
	}{
		{"v2", sha1, "-q", "--all", "# v2 git bundle\n"},
		{"v3", sha1, "--version=3", "--all", "# v3 git bundle\n"},
		{"sha256", sha256, "-q", "--all", "# v3 git bundle\n"},
		{"prerequisites", sha1, "-q", "main~1..main", "# v2 git bundle\n-"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "b")
			run(t, c.dir, "bundle", "create", c.opt, p, c.revs)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(b), c.sig) {
				t.Fatalf("git wrote %q, want it to start %q", b[:min(len(b), 40)], c.sig)
			}
			if err := CheckBundle(b); err != nil {
				t.Fatalf("git's bundle: %v", err)
			}
			if err := CheckBundle(b[:len(b)-1]); err == nil {
				t.Fatal("a bundle cut short by a byte was accepted")
			}
			alt := append([]byte(nil), b...)
			alt[len(alt)-30] ^= 1
			if err := CheckBundle(alt); err == nil {
				t.Fatal("a bundle whose pack was altered was accepted")
			}
		})
	}
}
