package agentcli

import (
	"strings"
	"testing"

	"github.com/logist/logist/internal/testbed/modelstub"
)

// Claude Code against the Anthropic Messages stub, through logistd.

// claudeCode: claude-sonnet-4-5 is a model claude prices itself (and
// prices.json knows).
var claudeCode = &cliProgram{name: "claude-code", bin: "claude", id: "claude", model: "claude-sonnet-4-5",
	keyVar: "ANTHROPIC_API_KEY", key: "sk-ant-stub", usage: modelstub.Usage{Input: 1200, Output: 80, Cached: 200}, write: "Write"}

func TestClaudeCodeSuccess(t *testing.T) {
	// claude sums the stub's usage and prices it, 2000×$3 + 400×$0.30 +
	// 160×$15 per million tokens: $0.00852.
	o := claudeCode.succeeds(t, [2]float64{0.0085, 0.0086})
	// The stub saw claude's own Write tool and the answer schema as its
	// StructuredOutput tool.
	if j := toolList(o.main[0]); !strings.Contains(j, "Write") || !strings.Contains(j, modelstub.AnthropicStructuredTool) {
		t.Errorf("tools offered: %s", j)
	}
}

func TestClaudeCodeAuthFailure(t *testing.T) {
	// claude runs with CLAUDE_CODE_MAX_RETRIES=0.
	claudeCode.authFailure(t)
}

func TestClaudeCodeTransientAPIErrors(t *testing.T) {
	// Claude's own retries are off; 529 is Anthropic's "overloaded".
	claudeCode.transientErrors(t, 529)
}

func TestClaudeCodeBrokenStreams(t *testing.T) {
	// claude retries a broken stream once by itself, without streaming
	// (even with its retries off); that reply broken too, Logist retries.
	claudeCode.brokenStreams(t, "ERROR:API_ERROR SUCCESS")
}

func TestClaudeCodeSessionContinues(t *testing.T) {
	// The second call ran with --resume: claude sent the same session id.
	o := claudeCode.sessionContinues(t, "call Write", "X-Claude-Code-Session-Id")
	first, last := o.main[0], o.main[2]
	if len(last.Turn.Messages) <= len(first.Turn.Messages) {
		t.Errorf("resumed conversation has %d messages, the first had %d", len(last.Turn.Messages), len(first.Turn.Messages))
	}
}

func TestClaudeCodeMaxTurns(t *testing.T) { claudeCode.maxTurns(t) }

func TestClaudeCodeTimeoutKillsGroup(t *testing.T) { claudeCode.timeoutKillsGroup(t, 4, 1) }

func TestClaudeCodeConnectionRefused(t *testing.T) { claudeCode.connectionRefused(t, refusedBound) }
