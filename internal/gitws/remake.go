package gitws

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/logist/logist/internal/atomicfile"
)

// A workspace whose repository is lost (.git removed, made a link or a
// file, or made again without the job's commits: an agent's `rm -rf .git;
// git init`) cannot go back to a recovery point's commit: they were in it.
// Its first point, cp-start, names where it came from (the source and the
// base commit), so a steward's rollback there makes the repository again
// from the source, as the job's start made it: a clone at the base, the
// job branch and HEAD there, the base ref, no remote. The clone is made
// (Remake) before the rollback records or restores anything, so a source
// that is gone or no longer has the base refuses the rollback with nothing
// changed; it takes the workspace's place (Install) once the workspace's
// files are the base's again. A repository the vet refuses is not lost:
// the steward removes what it names, and the agent's commits stay.

// Lost says whether err, from Restorable, is a repository that is no
// longer the workspace's own or lacks the commit asked for: what a
// rollback to cp-start makes again from the source.
func Lost(err error) bool {
	var no *NoRepoError
	var missing *MissingCommitError
	return errors.As(err, &no) || errors.As(err, &missing)
}

// Remade is a repository made again from a job's source, waiting to take
// the place of its workspace's lost one.
type Remade struct {
	dir, tmp, branch, commit string
}

// Remake clones repo beside the workspace dir (as Prepare does, without
// a checkout), with branch and HEAD at commit (the job's base), for
// Install. The source must still have the commit.
func Remake(ctx context.Context, dir, repo, commit, branch string) (*Remade, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	tmp := dir + ".remade"
	if err := cloneAs(ctx, repo, tmp); err != nil {
		return nil, err
	}
	r := &Remade{dir: dir, tmp: tmp, branch: branch, commit: commit}
	c := cmd{dir: tmp}
	if _, err := c.run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", commit+"^{commit}"); err != nil {
		r.Discard()
		return nil, fmt.Errorf("the source %s no longer has the job's base commit %s", repo, commit)
	}
	for _, args := range [][]string{
		{"config", "core.hooksPath", "/dev/null"},
		{"update-ref", BaseRef, commit},
		{"update-ref", "refs/heads/" + branch, commit},
		{"symbolic-ref", "HEAD", "refs/heads/" + branch},
		{"remote", "remove", Remote},
	} {
		if _, err := c.run(ctx, args...); err != nil {
			r.Discard()
			return nil, err
		}
	}
	return r, nil
}

// KeepAbandoned keeps, in the remade repository, commit of the
// workspace's lost one (the tip of its job branch, which the rollback
// leaves: a repository made again without the job's commits may have
// one) under AbandonedRef(commandID), as KeepAbandoned does in a
// repository that is not lost: its objects are fetched from the lost
// repository, vetted first as every workspace's is, before Install
// removes it. A lost repository without the commit, or one the vet
// refuses, keeps nothing: the error says why.
func (r *Remade) KeepAbandoned(ctx context.Context, commandID, commit string) error {
	ref := AbandonedRef(commandID)
	c := cmd{dir: r.tmp}
	if _, err := c.run(ctx, "check-ref-format", ref); err != nil {
		return fmt.Errorf("command id %q makes no ref name: %w", commandID, err)
	}
	if !commitID(commit) {
		return fmt.Errorf("%q is not a commit's name", commit)
	}
	if _, _, err := workspace(ctx, r.dir); err != nil {
		return err
	}
	lost, err := filepath.Abs(r.dir) // git runs in the clone
	if err != nil {
		return err
	}
	// Only the commit and what it reaches; none of the lost repository's
	// refs or tags, and no FETCH_HEAD.
	if _, err := c.run(ctx, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--end-of-options", lost, commit+":"+ref); err != nil {
		return err
	}
	if got, err := line(ctx, r.tmp, "rev-parse", "--verify", ref+"^{commit}"); err != nil || got != commit {
		return fmt.Errorf("%s is at %q, not %s (%v)", ref, got, commit, err)
	}
	return nil
}

// Install puts the remade repository in the workspace's place (whatever
// .git is there, folder, link or file, is removed; nothing is followed)
// and its index at the base: the workspace's files are the base's by then
// (the rollback's snapshot), so git status is clean.
func (r *Remade) Install(ctx context.Context) error {
	g := filepath.Join(r.dir, ".git")
	if err := os.RemoveAll(g); err != nil { // a link is removed, not followed
		return err
	}
	if err := os.Rename(filepath.Join(r.tmp, ".git"), g); err != nil {
		return err
	}
	if err := atomicfile.SyncDir(r.dir); err != nil {
		return err
	}
	r.Discard()
	c := cmd{dir: r.dir}
	if _, err := c.run(ctx, "read-tree", r.commit); err != nil {
		return err
	}
	// Exit status 1 only says some files need updating: the stat cache.
	_, _ = c.run(ctx, "update-index", "-q", "--refresh")
	return nil
}

// Discard removes a remade repository that will not be installed.
func (r *Remade) Discard() { _ = os.RemoveAll(r.tmp) }
