package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/pathguard"
)

// checkWorkspace refuses a workspace that is not a real folder of its own
// inside the job folder. A symlink pointing outside would have agents (and
// the scripted agent's file writes, which resolve through it) work on a
// folder the job does not own; one pointing inside would expose job.json
// and the history to them; a file or a dangling link is no place to work.
// A missing workspace is fine: it is created. What it saw is returned for
// ensureWorkspace in the same transaction.
func checkWorkspace(jobDir string) (workspaceSeen, error) {
	ws := filepath.Join(jobDir, jobstore.WorkspaceDir)
	fi, err := os.Lstat(ws)
	if errors.Is(err, fs.ErrNotExist) {
		return seenMissing, nil
	}
	if err != nil {
		return seenNothing, fmt.Errorf("workspace: %w", err)
	}
	return seenFolder, unsafeWorkspace(jobDir, ws, fi)
}

// unsafeWorkspace is why checkWorkspace refuses workspace ws, of lstat fi.
func unsafeWorkspace(jobDir, ws string, fi fs.FileInfo) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, _ := os.Readlink(ws)
		if _, _, err := pathguard.Resolve(jobDir, jobstore.WorkspaceDir); err != nil {
			var esc *pathguard.EscapeError
			if errors.As(err, &esc) && strings.Contains(esc.Reason, "dangling") {
				return &unsafeWorkspaceError{fmt.Sprintf("workspace/ is a dangling symlink to %s; agents are not run there: replace it with a real folder", target)}
			}
			if esc != nil {
				return &unsafeWorkspaceError{fmt.Sprintf("workspace/ is a symlink to %s, outside the job folder; agents are not run there: replace it with a real folder", target)}
			}
			return &unsafeWorkspaceError{fmt.Sprintf("workspace/ is a symlink to %s that cannot be resolved (%v); replace it with a real folder", target, err)}
		}
		return &unsafeWorkspaceError{fmt.Sprintf("workspace/ is a symlink to %s; it must be a real folder of its own, not a link", target)}
	}
	if !fi.IsDir() {
		what := "a file"
		if !fi.Mode().IsRegular() {
			what = "a special file (" + fi.Mode().Type().String() + ")"
		}
		return &unsafeWorkspaceError{fmt.Sprintf("workspace/ is %s, not a folder; replace it with a real folder", what)}
	}
	return nil
}

// workspaceSeen is what a transaction has seen of the job's workspace.
type workspaceSeen int

const (
	seenNothing workspaceSeen = iota // not looked at since something may have made it
	seenMissing
	seenFolder // a folder of its own (checkWorkspace), or made by ensureWorkspace
)

// The store's ways to make a workspace; tests count their calls.
var (
	wsMkdir  = (*jobstore.Store).MakeWorkspace
	wsEnsure = (*jobstore.Store).EnsureWorkspace
)

// ensureWorkspace makes the job's workspace unless the transaction has
// seen it there (*seen, which it updates): at most one system call, the
// mkdir of a workspace seen missing, where jobstore.Store.EnsureWorkspace
// stats it first. The transaction holds the job's lock: only a person's
// hand could remove the folder meanwhile, as it could just after.
func ensureWorkspace(tx *jobtx.Tx, seen *workspaceSeen) error {
	var err error
	switch *seen {
	case seenFolder:
		return nil
	case seenMissing:
		err = wsMkdir(tx.Store(), tx.ID)
	default:
		err = wsEnsure(tx.Store(), tx.ID)
	}
	if err == nil {
		*seen = seenFolder
	}
	return err
}

// unsafeWorkspaceError is a workspace checkWorkspace refuses (as opposed to
// one it could not look at).
type unsafeWorkspaceError struct{ reason string }

func (e *unsafeWorkspaceError) Error() string { return e.reason }
