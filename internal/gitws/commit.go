package gitws

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/regfile"
	"github.com/logist/logist/internal/textsafe"
)

// Message is what a recovery point's commit says: the phase, the role and
// the agent's summary (the agent's text, kept as the message's body and
// never read back as anything but text), and the job and checkpoint as
// trailers on its last lines. The summary's controls are escaped as
// everywhere a person reads agent text (textsafe.Block: newlines and tabs
// stay): git log prints a message as it is, and a reviewer's terminal
// must not act on an agent's "\x1b[2J".
type Message struct {
	Job, Checkpoint, Phase, Role, Summary string
}

func (m Message) text() []byte {
	summary := textsafe.Block(m.Summary)
	var b strings.Builder
	fmt.Fprintf(&b, "logist: %s completed phase %s\n\n", m.Role, m.Phase)
	if s := strings.TrimSpace(summary); s != "" {
		b.WriteString(s)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "Logist-Job: %s\n%s%s\n", m.Job, TrailerCheckpoint, m.Checkpoint)
	return []byte(b.String())
}

// gitDir is dir's .git, which must be a folder of the workspace's own: an
// agent that replaced it with a link or a "gitdir:" file pointing at some
// other repository must not have Logist write there.
func gitDir(dir string) (string, error) {
	g := filepath.Join(dir, ".git")
	fi, err := os.Lstat(g)
	if err != nil {
		return "", &NoRepoError{Dir: dir, Why: fmt.Sprintf("the workspace has no .git folder: %v", err)}
	}
	if !fi.IsDir() {
		return "", &NoRepoError{Dir: dir, Why: fmt.Sprintf("the workspace's .git is not a folder (%s); Logist commits only into the workspace's own repository", fi.Mode().Type())}
	}
	return g, nil
}

// NoRepoError is a workspace without a repository of its own: no .git,
// or one that is not a folder. Why says which.
type NoRepoError struct {
	Dir, Why string
}

func (e *NoRepoError) Error() string { return e.Why }

// head is the commit HEAD names ("" on an unborn branch).
func head(ctx context.Context, dir string) string {
	c, err := line(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return ""
	}
	return c
}

// Commit records the workspace dir as it is (what git tracks and would
// add: ignored files are not committed) as a commit on branch, on top of
// whatever HEAD the agent left (its own commits stay as they are), and
// leaves HEAD on branch with the index equal to the commit: `git status`
// shows a clean tree. The tree is built in an index of Logist's own, so a
// failure or a crash midway leaves the agent's index as it was. A HEAD
// that is already Logist's commit of the same checkpoint and tree is kept
// (a commit made again after a crash is the same commit).
func Commit(ctx context.Context, dir, branch string, m Message) (string, error) {
	_, gd, err := workspace(ctx, dir)
	if err != nil {
		return "", err
	}
	// Gone once renamed into place; after a failure, a leftover that the
	// next commit overwrites first.
	idx, withIdx, err := scratchIndex(dir, gd, "logist-index", true)
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(idx) }()
	parent := head(ctx, dir)
	if _, err := withIdx.run(ctx, "add", "--all", "--", "."); err != nil {
		return "", err
	}
	out, err := withIdx.run(ctx, "write-tree")
	if err != nil {
		return "", err
	}
	tree := strings.TrimSpace(string(out))
	// A merge the agent resolved but did not commit is committed as the
	// merge, as git commit would, and ended (inprogress.go).
	merging, err := mergeHeads(ctx, dir, gd)
	if err != nil {
		return "", err
	}
	if parent != "" {
		if cp, ptree, ok := logistCommit(ctx, dir, parent); ok && cp == m.Checkpoint && ptree == tree {
			return parent, finishMerge(ctx, dir, gd, idx, branch, parent, merging)
		}
	}
	args := []string{"commit-tree", tree}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	for _, h := range merging {
		args = append(args, "-p", h)
	}
	out, err = (cmd{dir: dir, stdin: m.text()}).run(ctx, args...)
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(string(out))
	return commit, finishMerge(ctx, dir, gd, idx, branch, commit, merging)
}

// finishMerge is finish, then the end of the merge that commit recorded
// (merging: its other parents), whose state git would otherwise take for
// one still in progress at the agent's next commit.
func finishMerge(ctx context.Context, dir, gd, idx, branch, commit string, merging []string) error {
	if err := finish(ctx, dir, gd, idx, branch, commit); err != nil || len(merging) == 0 {
		return err
	}
	return clearInProgress(gd, true)
}

// KeepRefs is where a workspace's repository keeps every recovery point's
// commit, under its own id (refs/logist/keep/COMMIT), whatever the agent
// later does to its branches: a rollback to the point, logist diff
// between points and a cluster's bundle need the commit, and git keeps
// what a ref names through a reset, an expired reflog and a gc that
// prunes. Only deleting the ref (or the repository) loses it; a rollback
// then says so before it changes anything (Restorable).
const KeepRefs = "refs/logist/keep/"

// AbandonedRefs is where a workspace's repository keeps the commit each
// steward's rollback leaves (the job branch's tip it moved away from, the
// rollback record's git_abandoned), under the command's id
// (AbandonedRef): git keeps what a ref names through an expired reflog
// and a gc that prunes, and a bundle of every ref (Bundle, BundleParked)
// carries it, so it moves with a cluster's job as the branch does. Push
// pushes the job branch only: none of these refs leaves the workspace.
const AbandonedRefs = "refs/logist/abandoned/"

// AbandonedRef is the ref keeping the commit the rollback with command id
// commandID leaves: the one name of it, in file mode and a cluster's.
func AbandonedRef(commandID string) string { return AbandonedRefs + commandID }

// KeepAbandoned points AbandonedRef(commandID) at commit in the
// workspace dir: a rollback keeps so the commit it leaves, before it
// moves the branch (Restore).
func KeepAbandoned(ctx context.Context, dir, commandID, commit string) error {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return err
	}
	ref := AbandonedRef(commandID)
	if _, err := c.run(ctx, "check-ref-format", ref); err != nil {
		return fmt.Errorf("command id %q makes no ref name: %w", commandID, err)
	}
	if _, err := c.run(ctx, "update-ref", "-m", "logist: rollback leaves it", ref, commit+"^{commit}"); err != nil {
		return fmt.Errorf("keep the commit the rollback leaves (%s) as %s: %w", commit, ref, err)
	}
	return nil
}

// finish points branch at commit and keeps it (KeepRefs) in one ref
// transaction, HEAD at branch, and makes Logist's index (which holds
// commit's tree) the workspace's.
func finish(ctx context.Context, dir, gd, idx, branch, commit string) error {
	refs := fmt.Sprintf("update refs/heads/%s %s\nupdate %s%s %s\n", branch, commit, KeepRefs, commit, commit)
	if _, err := (cmd{dir: dir, stdin: []byte(refs)}).run(ctx, "update-ref", "-m", "logist: recovery point", "--stdin"); err != nil {
		return err
	}
	if _, err := (cmd{dir: dir}).run(ctx, "symbolic-ref", "HEAD", "refs/heads/"+branch); err != nil {
		return err
	}
	return os.Rename(idx, filepath.Join(gd, "index"))
}

// logistCommit says whether commit is one of Logist's, and if so the
// checkpoint it names and its tree.
func logistCommit(ctx context.Context, dir, commit string) (cp, tree string, ok bool) {
	out, err := (cmd{dir: dir}).run(ctx, "log", "-1", "--format=%ae%x00%T%x00%B", commit, "--")
	if err != nil {
		return "", "", false
	}
	parts := strings.SplitN(string(out), "\x00", 3)
	if len(parts) != 3 || parts[0] != AuthorEmail {
		return "", "", false
	}
	lines := strings.Split(strings.TrimRight(parts[2], "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, TrailerCheckpoint) {
		return "", "", false
	}
	return strings.TrimPrefix(last, TrailerCheckpoint), parts[1], true
}

// Reconcile undoes a commit Logist made for a recovery point that a crash
// kept out of the history: when HEAD is a Logist commit that recorded
// does not accept, HEAD goes back to its parent (the commit the agent had
// left), the index with it; the files stay as they are. It returns the
// commit dropped ("" if none). The next recovery point commits again.
func Reconcile(ctx context.Context, dir string, recorded func(commit string) bool) (string, error) {
	if _, _, err := workspace(ctx, dir); err != nil {
		return "", err
	}
	tip := head(ctx, dir)
	if tip == "" || recorded(tip) {
		return "", nil
	}
	if _, _, ok := logistCommit(ctx, dir, tip); !ok {
		return "", nil
	}
	parent, err := line(ctx, dir, "rev-parse", "--verify", "--quiet", tip+"^1")
	if err != nil {
		return "", nil // a root commit: nothing to go back to
	}
	if _, err := (cmd{dir: dir}).run(ctx, "reset", "--quiet", "--mixed", parent); err != nil {
		return "", err
	}
	// No point names it: nothing keeps it any longer.
	if _, err := (cmd{dir: dir}).run(ctx, "update-ref", "-d", KeepRefs+tip); err != nil {
		return "", err
	}
	return tip, nil
}

// MissingCommitError is a recovery point's commit that the workspace's
// repository no longer has: the ref that kept it (KeepRefs, or BaseRef
// for the base) was deleted and the commit pruned, or the repository was
// made again.
type MissingCommitError struct {
	Dir, Commit string
}

func (e *MissingCommitError) Error() string {
	return fmt.Sprintf("git workspace %s no longer has commit %s (the refs that kept it were deleted and it was pruned, or the repository was made again)",
		e.Dir, e.Commit)
}

// Restorable says whether the job branch of the workspace dir can go back
// to commit (nil), or why not: the repository is unsafe for Logist's git
// or not a folder of the workspace's own (as Commit refuses it), holds a
// lock Restore would stop at (a *LockedError), or lacks the commit (a
// *MissingCommitError). A steward's rollback asks before it changes
// anything.
func Restorable(ctx context.Context, dir, branch, commit string) error {
	c, gd, err := workspace(ctx, dir)
	if err != nil {
		return err
	}
	if rel := heldLock(gd, branch); rel != "" {
		return &LockedError{Dir: dir, Lock: rel}
	}
	_, err = c.run(ctx, "rev-parse", "--verify", "--quiet", "--end-of-options", commit+"^{commit}")
	var gerr *Error
	if errors.As(err, &gerr) && gerr.Stderr == "" {
		return &MissingCommitError{Dir: dir, Commit: commit}
	}
	return err
}

// Restore points branch, HEAD and the index at commit: a rollback, whose
// files the workspace snapshot has already put back. The index is built
// first, in a file of Logist's own (as Commit's), so a failure leaves the
// refs where they were, and an index.lock the agent left stops nothing;
// it becomes the workspace's index last.
func Restore(ctx context.Context, dir, branch, commit string) error {
	if err := Restorable(ctx, dir, branch, commit); err != nil {
		return err
	}
	_, gd, err := workspace(ctx, dir)
	if err != nil {
		return err
	}
	idx, withIdx, err := scratchIndex(dir, gd, "logist-index", false)
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(idx) }()
	if _, err := withIdx.run(ctx, "read-tree", commit); err != nil {
		return err
	}
	// Exit status 1 only says some files need updating: the stat cache.
	_, _ = withIdx.run(ctx, "update-index", "-q", "--refresh")
	c := cmd{dir: dir}
	for _, args := range [][]string{
		{"update-ref", "-m", "logist: rollback", "refs/heads/" + branch, commit},
		{"symbolic-ref", "HEAD", "refs/heads/" + branch},
	} {
		if _, err := c.run(ctx, args...); err != nil {
			return err
		}
	}
	if err := os.Rename(idx, filepath.Join(gd, "index")); err != nil {
		return err
	}
	// The point's state has no operation in progress: one the agent left
	// (a merge, a rebase) would make its next commit a merge, or continue
	// a rebase, over the rolled-back branch.
	return clearInProgress(gd, false)
}

// scratchIndex is an index file of Logist's own, name in the repository's
// git folder gd, and a cmd in dir that uses it (GIT_INDEX_FILE, absolute:
// git runs in dir and reads it from there): a copy of the worker's index
// when copied, else none yet (a read-tree makes it). Logist builds an
// index there so that the worker's is not written until it is whole (it
// may become the index by a rename), and an index.lock the agent left
// stops nothing. The caller removes it.
func scratchIndex(dir, gd, name string, copied bool) (string, cmd, error) {
	idx, err := filepath.Abs(filepath.Join(gd, name))
	if err != nil {
		return "", cmd{}, err
	}
	if copied {
		if err := copyFile(filepath.Join(gd, "index"), idx); err != nil {
			return "", cmd{}, err
		}
	}
	return idx, cmd{dir: dir, env: []string{"GIT_INDEX_FILE=" + idx}}, nil
}

// copyFile copies src to dst, a new file (whatever was at dst is removed
// first, never written through); a missing src leaves no dst. The copy is
// streamed: an index is as large as its agent made it.
func copyFile(src, dst string) error {
	if err := os.Remove(dst); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	err := regfile.CopyNew(src, dst, 0o644)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
