package steward

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/manifest"
)

// sourceCheckTimeout bounds how long logist validate and submit wait for a
// remote repository to answer.
const sourceCheckTimeout = 30 * time.Second

// CheckSource checks, as a steward's command can before logistd runs the
// job, that the workspace source m names can be had: git installed, the
// repository reachable and the ref in it, the folder to copy there. logistd
// checks again (by making the workspace) before any agent runs: from its
// own machine and user, which may see other things.
func CheckSource(file string, m *manifest.Manifest) manifest.Errors {
	w := m.Workspace
	if w == nil {
		return nil
	}
	const where = " (checked from this shell; logistd checks again when it takes the job up)"
	if g := w.Git; g != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sourceCheckTimeout)
		defer cancel()
		if err := gitws.Check(ctx, g.Repo, g.Ref); err != nil {
			ptr := "/workspace/git/repo"
			var ref *gitws.RefError
			if errors.As(err, &ref) {
				ptr = "/workspace/git/ref"
			}
			return manifest.Errors{{File: file, Pointer: ptr, Reason: err.Error() + where}}
		}
	}
	if w.Copy != "" {
		if fi, err := os.Stat(w.Copy); err != nil || !fi.IsDir() {
			return manifest.Errors{{File: file, Pointer: "/workspace/copy", Reason: fmt.Sprintf("%s is not a folder%s", w.Copy, where)}}
		}
	}
	return nil
}

// SourceWarning is what a steward should know of m's workspace source
// that does not stop the job ("" if nothing): a local repository with
// uncommitted changes, which the job will not see.
func SourceWarning(m *manifest.Manifest) string {
	if !m.IsGit() {
		return ""
	}
	g := m.Workspace.Git
	if fi, err := os.Stat(g.Repo); err != nil || !fi.IsDir() {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), sourceCheckTimeout)
	defer cancel()
	if !gitws.Dirty(ctx, g.Repo) {
		return ""
	}
	ref := g.Ref
	if ref == "" {
		ref = "HEAD"
	}
	return fmt.Sprintf("%s has uncommitted changes: the job starts from the commit %s names, without them (commit them first if the agent should see them)", g.Repo, ref)
}
