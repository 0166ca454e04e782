package runner

import (
	"context"
	"fmt"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/snapshot"
)

// makeWorkspace makes the workspace a manifest names (a clone of its
// repository on the job branch, or a copy of its folder) before the job's
// first start, before any agent runs. A source that cannot be had (git
// missing, a bad ref, a repository or folder out of reach) stops the job
// for a steward with WORKSPACE_SOURCE and the reason. Done once: a start a
// crash interrupted finds the workspace made and keeps it.
func (e *Engine) makeWorkspace(tx *jobtx.Tx) *outcome {
	m := tx.M
	if m.Workspace == nil || m.Run.StartedAt != "" {
		return nil
	}
	ws := tx.Store().Workspace(tx.ID)
	var err error
	switch {
	case m.Workspace.Git != nil:
		g := m.Workspace.Git
		_, err = gitws.Prepare(context.Background(), g.Repo, g.Ref, ws, gitws.Branch(tx.ID))
	case m.Workspace.Copy != "":
		err = snapshot.CopyIn(m.Workspace.Copy, ws)
	}
	if err == nil {
		return nil
	}
	reason := fmt.Sprintf("workspace: %v", err)
	return &outcome{code: codes.WorkspaceSource, logs: []logEntry{{code: codes.WorkspaceSource, actor: "SYSTEM", msg: reason}},
		transition: &transition{lifecycle.EvAgentFailed, lifecycle.InterventionRequired, "", "SYSTEM", reason}}
}
