package gitws

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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

// Unbundle makes dir, whose files are already the workspace as a
// recovery point holds them (its snapshot: no .git), the repository
// bundle holds again: its refs fetched, HEAD on branch at the branch's
// tip, the index at HEAD (the files are left as they are). A dir that
// already has a .git is refused.
func Unbundle(ctx context.Context, dir string, bundle []byte, branch string) error {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		return fmt.Errorf("%s already has a .git", dir)
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
	c := cmd{dir: dir}
	for _, args := range [][]string{
		{"init", "--quiet"},
		{"fetch", "--quiet", "--update-head-ok", p, "refs/*:refs/*"},
		{"symbolic-ref", "HEAD", "refs/heads/" + branch},
		{"read-tree", "HEAD"},
	} {
		if _, err := c.run(ctx, args...); err != nil {
			return err
		}
	}
	// Exit status 1 only says some files need updating: the stat cache.
	_, _ = c.run(ctx, "update-index", "-q", "--refresh")
	return nil
}
