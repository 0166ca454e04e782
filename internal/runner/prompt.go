package runner

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/regfile"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/workflow"
)

const genericPrompt = `You are the %s in a Logist job. Work in the current directory (the job's workspace).
Answer with exactly one JSON object and nothing else:
{"action": "COMPLETED" | "STUCK" | "RETRY", "evidence_files": ["relative/paths"], "summary_for_supervisor": "at most 500 characters"}
`

// MaxPromptBytes is manifest.MaxPromptBytes.
const MaxPromptBytes = manifest.MaxPromptBytes

// systemPrompt is the role's prompt: the manifest's override file (inside
// the job folder), else the built-in one for the role, else a generic one.
func systemPrompt(m *manifest.Manifest, jobDir, role string) (string, error) {
	if rel, ok := m.Prompts[role]; ok {
		root, sub := agentsFolder(jobDir, rel)
		p, _, err := pathguard.Resolve(root, sub)
		if err != nil {
			return "", fmt.Errorf("prompts.%s: %w", role, err)
		}
		b, err := regfile.ReadLimited(p, MaxPromptBytes)
		if err != nil {
			return "", fmt.Errorf("prompts.%s: %w", role, err)
		}
		if len(b) > MaxPromptBytes {
			return "", fmt.Errorf("prompts.%s: %s is larger than the %d bytes a prompt file may hold", role, rel, MaxPromptBytes)
		}
		return string(b), nil
	}
	if s := workflow.DefaultPrompt(role); s != "" {
		return s, nil
	}
	return fmt.Sprintf(genericPrompt, role), nil
}

// agentsFolder is the folder of the job's that rel (a path in jobDir) must
// resolve in, and rel within it: a folder an agent writes (the workspace,
// a role's private home, a call's folder in requests/) where rel lies in
// one, since a link an agent made there must lead nowhere else in the
// job's folder (another role's home, the history); else jobDir.
func agentsFolder(jobDir, rel string) (root, sub string) {
	parts := strings.Split(filepath.ToSlash(filepath.Clean(rel)), "/")
	depth := 0
	switch parts[0] {
	case jobstore.WorkspaceDir:
		depth = 1
	case "agent-home", jobstore.RequestsDir:
		depth = 2
	}
	if depth == 0 || len(parts) <= depth {
		return jobDir, rel
	}
	return filepath.Join(jobDir, filepath.Join(parts[:depth]...)), filepath.Join(parts[depth:]...)
}

// renderPrompt is the complete text an LLM agent sees: system prompt, task,
// context files, and what earlier turns and the steward said.
func renderPrompt(system, task string, phase workflow.Phase, ctxFiles []string, run manifest.RunState, extra string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(system))
	b.WriteString("\n\n## Task\n")
	b.WriteString(strings.TrimSpace(task))
	b.WriteString("\n")
	if phase.Task != "" {
		b.WriteString("\n## This phase\n")
		b.WriteString(strings.TrimSpace(phase.Task))
		b.WriteString("\n")
	}
	if len(ctxFiles) > 0 {
		b.WriteString("\n## Context files (relative to the workspace)\n")
		for _, f := range ctxFiles {
			b.WriteString("- " + filepath.ToSlash(f) + "\n")
		}
	}
	if extra = strings.TrimSpace(extra); extra != "" {
		b.WriteString("\n" + extra + "\n")
	}
	if run.PreviousSummary != "" {
		b.WriteString("\n## Summary of the previous phase\n" + run.PreviousSummary + "\n")
	}
	if run.Feedback != "" {
		b.WriteString("\n## Feedback to address (the work was sent back)\n" + run.Feedback + "\n")
	}
	if run.Guidance != "" {
		b.WriteString("\n## Guidance from the human steward\n" + run.Guidance + "\n")
	}
	return b.String()
}
