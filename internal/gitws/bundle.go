package gitws

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Bundle returns a git bundle of every ref of the workspace dir (the job
// branch, the base ref, the source's branches): what another machine
// needs to make the workspace's repository again (Unbundle). Cluster
// nodes store it with a recovery point, so that a git job moves with its
// branch.
func Bundle(ctx context.Context, dir string) ([]byte, error) {
	if _, _, err := workspace(ctx, dir); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp("", "logist-bundle-*")
	if err != nil {
		return nil, err
	}
	p := f.Name()
	_ = f.Close()
	defer func() { _ = os.Remove(p) }()
	if _, err := (cmd{dir: dir}).run(ctx, "bundle", "create", "--quiet", p, "--all"); err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// Head is what HEAD of the workspace dir names, as the agent left it:
// the branch it is on ("refs/heads/NAME", born or not), or the commit it
// is detached at. A stopped job's workspace moves with it so
// (UnbundleHead), not only its branches.
func Head(ctx context.Context, dir string) (string, error) {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return "", err
	}
	out, err := c.run(ctx, "symbolic-ref", "--quiet", "HEAD")
	var gerr *Error
	if errors.As(err, &gerr) && gerr.Stderr == "" {
		// Detached (exit status 1, nothing said): the commit.
		return line(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// Unbundle makes dir, whose files are already the workspace as a
// recovery point holds them (its snapshot: no .git), the repository
// bundle holds again: its refs fetched, HEAD on branch at the branch's
// tip, the index at HEAD (the files are left as they are). A dir that
// already has a .git is refused.
func Unbundle(ctx context.Context, dir string, bundle []byte, branch string) error {
	return UnbundleHead(ctx, dir, bundle, "refs/heads/"+branch)
}

// UnbundleHead is Unbundle with HEAD at head, as Head said it: on a
// branch ("refs/heads/NAME"), or detached at a commit the bundle holds
// (its HEAD). The index is HEAD's tree, empty on an unborn branch.
func UnbundleHead(ctx context.Context, dir string, bundle []byte, head string) error {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		return fmt.Errorf("%s already has a .git", dir)
	}
	c := cmd{dir: dir}
	var setHead []string
	switch {
	case strings.HasPrefix(head, "refs/heads/"):
		if _, err := c.run(ctx, "check-ref-format", head); err != nil {
			return fmt.Errorf("HEAD %q: %w", head, err)
		}
		setHead = []string{"symbolic-ref", "HEAD", head}
	case commitID(head):
		setHead = []string{"update-ref", "--no-deref", "HEAD", head}
	default:
		return fmt.Errorf("HEAD %q is neither a branch nor a commit", head)
	}
	f, err := os.CreateTemp("", "logist-bundle-*")
	if err != nil {
		return err
	}
	p := f.Name()
	defer func() { _ = os.Remove(p) }()
	if _, err := f.Write(bundle); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fetch := []string{"fetch", "--quiet", "--update-head-ok", p, "refs/*:refs/*"}
	if setHead[0] == "update-ref" {
		// A detached HEAD's commits may be on no branch: the bundle's
		// HEAD (Bundle takes every ref, HEAD too) brings them.
		fetch = append(fetch, "HEAD")
	}
	for _, args := range [][]string{{"init", "--quiet"}, fetch, setHead} {
		if _, err := c.run(ctx, args...); err != nil {
			return err
		}
	}
	tree := []string{"read-tree", "HEAD"}
	if _, err := line(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err != nil {
		tree = []string{"read-tree", "--empty"} // an unborn branch
	}
	if _, err := c.run(ctx, tree...); err != nil {
		return err
	}
	// Exit status 1 only says some files need updating: the stat cache.
	_, _ = c.run(ctx, "update-index", "-q", "--refresh")
	return nil
}

// commitID says whether s is a commit's full object name (SHA-1 or
// SHA-256, lower-case hex).
func commitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
