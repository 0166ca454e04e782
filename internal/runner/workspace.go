package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/pathguard"
)

// checkWorkspace refuses a workspace that is not a real folder of its own
// inside the job folder. A symlink pointing outside would have agents (and
// the scripted agent's file writes, which resolve through it) work on a
// folder the job does not own; one pointing inside would expose job.json
// and the history to them; a file or a dangling link is no place to work.
// A missing workspace is fine: it is created.
func checkWorkspace(jobDir string) error {
	ws := filepath.Join(jobDir, jobstore.WorkspaceDir)
	fi, err := os.Lstat(ws)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
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

// unsafeWorkspaceError is a workspace checkWorkspace refuses (as opposed to
// one it could not look at).
type unsafeWorkspaceError struct{ reason string }

func (e *unsafeWorkspaceError) Error() string { return e.reason }
