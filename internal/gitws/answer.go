package gitws

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// What an answer that completes its phase is held to in a git workspace
// (response.Repository): the phase's recovery point is a commit on the
// job branch, and a job that ends SUCCESS hands that branch to a person.
// An answer is refused, rather than accepted into a point whose commit
// cannot be made or would not be on the job's branch, when the
// repository is unsafe for Logist's git (Vet: an *UnsafeRepoError), is no
// longer the job's (.git removed or not a folder, or the job branch gone:
// deleted, or .git made again), or holds a lock that Logist's commit
// would stop at (a git process running there, or one that ended without
// removing it): an *UncommittableError. A failure of git itself (not
// installed) is not the agent's doing and refuses nothing: the commit
// fails as before and logist status says why.

// UncommittableError is a workspace whose repository Logist cannot commit
// the job's work in on its branch: Why says what is wrong.
type UncommittableError struct {
	Dir    string
	Branch string
	Why    string
	// Fix is what a steward does about it ("" for the general advice).
	Fix string
}

func (e *UncommittableError) Error() string {
	fix := e.Fix
	if fix == "" {
		fix = "a steward mends the repository, rolls the job back (logist rollback --to cp-start makes a lost repository again from the job's source) or halts it"
	}
	return fmt.Sprintf("git workspace %s: %s, so the job's work cannot be committed on its branch %s: %s", e.Dir, e.Why, e.Branch, fix)
}

// LockedError is a lock in a workspace's repository that Logist's git
// would stop at (heldLock): Lock is its path in .git.
type LockedError struct {
	Dir, Lock string
}

// lockWhy and lockFix say what a held lock is and what to do about it.
const (
	lockWhy = " is there (a git process is running in the repository, or one ended without removing it)"
	lockFix = "remove it once no git process runs there"
)

func (e *LockedError) Error() string {
	return fmt.Sprintf("git workspace %s: .git/%s%s: %s", e.Dir, e.Lock, lockWhy, lockFix)
}

// heldLock is the first of the locks Logist's git takes to move the job
// branch and HEAD that is held in .git folder gd ("" for none): the
// branch's, then HEAD's (commit.go, finish; Restore). Its index is its
// own, so the agent's index.lock stops neither. One a git process still
// holds (a gc the agent's commit started in the background) is waited
// for a moment, as git waits for a ref's lock itself.
func heldLock(gd, branch string) string {
	for _, rel := range []string{"refs/heads/" + branch + ".lock", "HEAD.lock"} {
		if locked(filepath.Join(gd, rel)) {
			return rel
		}
	}
	return ""
}

// AnswerCheck is the check a job's answers that complete their phase are
// held to (response.In): Committable for job id in a git workspace, none
// in another.
func AnswerCheck(git bool, id string) func(dir string) error {
	if !git {
		return nil
	}
	return func(dir string) error { return Committable(dir, id) }
}

// Committable refuses the workspace dir of job id when Logist will not run
// git there, or cannot commit the job's work there on its branch (see the
// top of this file); nil otherwise, git's own failures included. The
// engine also asks it before a step after a point whose commit failed
// (runner, gitRefused).
func Committable(dir, id string) error {
	branch := Branch(id)
	gd, err := gitDir(dir)
	if err != nil {
		return &UncommittableError{Dir: dir, Branch: branch, Why: err.Error()}
	}
	if rel := heldLock(gd, branch); rel != "" {
		return &UncommittableError{Dir: dir, Branch: branch, Why: ".git/" + rel + lockWhy, Fix: lockFix + ", then logist resume"}
	}
	ctx := context.Background()
	err = Vet(ctx, dir)
	var unsafe *UnsafeRepoError
	switch {
	case errors.As(err, &unsafe):
		return unsafe
	case err != nil:
		return nil // git's own failure: the commit says so
	}
	if err := inProgress(ctx, dir, gd); err != nil {
		return err
	}
	_, err = (cmd{dir: dir}).run(ctx, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch+"^{commit}")
	var gerr *Error
	if errors.As(err, &gerr) && gerr.Stderr == "" {
		// --quiet: git found no such branch (exit 1, nothing said).
		return &UncommittableError{Dir: dir, Branch: branch, Why: "its repository has no branch " + branch + " (deleted, or .git made again)"}
	}
	return nil
}

// lockWait is how long locked waits for a lock to go.
const lockWait = time.Second

// locked says whether the lock file p is there and stays there for
// lockWait.
func locked(p string) bool {
	deadline := time.Now().Add(lockWait)
	for {
		if _, err := os.Lstat(p); err != nil {
			return false
		}
		if time.Now().After(deadline) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
}
