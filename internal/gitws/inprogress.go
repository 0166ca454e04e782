package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/logist/logist/internal/regfile"
)

// An operation git leaves in progress between commands (a merge that
// stopped at conflicts, a rebase, a cherry-pick, a revert, git am, a
// bisect), marked by a file or folder in .git, is what an agent may leave
// behind when it answers. One table says what marks each, what it is,
// and how a person ends it; the answer check (Committable), a recovery
// point's commit and a rollback (Restore) read it.
type operation struct {
	mark   string   // its mark in .git
	what   string   // what it is, for a person
	end    string   // how it is finished or abandoned
	merge  bool     // a merge: its resolved form is committed as a merge
	others []string // its other state files in .git, cleared with it
}

var operations = []operation{
	{mark: "rebase-merge", what: "a rebase", end: "git rebase --continue or git rebase --abort"},
	{mark: "rebase-apply", what: "a rebase or git am", end: "git rebase --continue, git am --continue, or their --abort"},
	{mark: "MERGE_HEAD", what: "a merge", end: "resolve the conflicts and git commit, or git merge --abort", merge: true,
		others: []string{"MERGE_MSG", "MERGE_MODE", "AUTO_MERGE", "SQUASH_MSG"}},
	{mark: "CHERRY_PICK_HEAD", what: "a cherry-pick", end: "git cherry-pick --continue or git cherry-pick --abort", others: []string{"sequencer"}},
	{mark: "REVERT_HEAD", what: "a revert", end: "git revert --continue or git revert --abort", others: []string{"sequencer"}},
	{mark: "BISECT_LOG", what: "a bisect", end: "git bisect reset",
		others: []string{"BISECT_START", "BISECT_TERMS", "BISECT_NAMES", "BISECT_EXPECTED_REV", "BISECT_ANCESTORS_OK"}},
}

// InProgressError is a COMPLETED answer given while an operation is in
// progress in the workspace's repository that Logist's commit would not
// finish: the commit would record it half done, and the job branch would
// not hold what the agent meant.
type InProgressError struct {
	Dir, Mark, What, End string
	// Unmerged are a merge's paths still in conflict.
	Unmerged []string
}

func (e *InProgressError) Error() string {
	conflicts := ""
	if len(e.Unmerged) > 0 {
		conflicts = " with conflicts in " + strings.Join(e.Unmerged, ", ")
	}
	return fmt.Sprintf("git workspace %s: .git/%s is there: %s is in progress%s, so the phase's work cannot be committed as it stands: %s, in the workspace, then logist resume (a rollback clears it)", e.Dir, e.Mark, e.What, conflicts, e.End)
}

// maxUnmerged is how many unmerged paths an InProgressError names.
const maxUnmerged = 10

// inProgress is the operation in progress in dir's repository (.git
// folder gd) that a commit of the workspace would not finish: any but a
// merge whose conflicts are all resolved, which Commit finishes as git
// commit would. nil when none is.
func inProgress(ctx context.Context, dir, gd string) error {
	for _, op := range operations {
		if _, err := os.Lstat(filepath.Join(gd, op.mark)); err != nil {
			continue
		}
		e := &InProgressError{Dir: dir, Mark: op.mark, What: op.what, End: op.end}
		if !op.merge {
			return e
		}
		out, err := (cmd{dir: dir}).run(ctx, "ls-files", "--unmerged", "-z")
		if err != nil {
			return nil // git's own failure: the commit says so
		}
		seen := map[string]bool{}
		for _, rec := range strings.Split(string(out), "\x00") {
			// "MODE SHA STAGE\tPATH", one per stage of each path.
			if _, p, ok := strings.Cut(rec, "\t"); ok && !seen[p] {
				seen[p] = true
				if len(e.Unmerged) < maxUnmerged {
					e.Unmerged = append(e.Unmerged, p)
				}
			}
		}
		if len(seen) > len(e.Unmerged) {
			e.Unmerged = append(e.Unmerged, fmt.Sprintf("… (%d in all)", len(seen)))
		}
		if len(seen) > 0 {
			return e
		}
	}
	return nil
}

// objectID is a full commit id, SHA-1 or SHA-256.
var objectID = regexp.MustCompile(`^(?:[0-9a-f]{40}|[0-9a-f]{64})$`)

// mergeHeads are the commits a merge in progress in .git folder gd
// brings in (MERGE_HEAD: one per line, several for an octopus), checked
// to be commits of the repository in dir; none when no merge is.
func mergeHeads(ctx context.Context, dir, gd string) ([]string, error) {
	b, err := regfile.ReadLimited(filepath.Join(gd, "MERGE_HEAD"), 1<<16)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) > 1<<16 {
		return nil, &UncommittableError{Dir: dir, Why: ".git/MERGE_HEAD is over 64 KiB, not a list of commits"}
	}
	var heads []string
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		id := string(bytes.TrimSpace(l))
		if !objectID.MatchString(id) {
			return nil, &UncommittableError{Dir: dir, Why: fmt.Sprintf(".git/MERGE_HEAD names %q, not a commit id", id)}
		}
		if _, err := line(ctx, dir, "rev-parse", "--verify", "--quiet", id+"^{commit}"); err != nil {
			return nil, &UncommittableError{Dir: dir, Why: fmt.Sprintf(".git/MERGE_HEAD names %s, which the repository does not have as a commit", id)}
		}
		heads = append(heads, id)
	}
	return heads, nil
}

// clearInProgress removes the state of the operations in progress in .git
// folder gd (every one, or only merges), as git commit does when it ends a
// merge and git reset --hard would.
func clearInProgress(gd string, mergesOnly bool) error {
	for _, op := range operations {
		if mergesOnly && !op.merge {
			continue
		}
		for _, name := range append([]string{op.mark}, op.others...) {
			if err := os.RemoveAll(filepath.Join(gd, name)); err != nil {
				return err
			}
		}
	}
	return nil
}
