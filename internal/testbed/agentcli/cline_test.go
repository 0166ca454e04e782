package agentcli

import (
	"strings"
	"testing"

	"github.com/logist/logist/internal/testbed/modelstub"
)

// Cline CLI against the Chat Completions stub (its openai-compatible
// provider), through logistd. Outside the CI set: run with
// LOGIST_TEST_AGENTS=all (or cline).

// cline: gpt-4o-mini is in prices.json (Cline reports cost 0 for it:
// Logist prices the tokens). Cline's apply_patch writes an added file's
// lines without a final newline.
var cline = &cliProgram{name: "cline", bin: "cline", id: "cline", model: "gpt-4o-mini", path: "/v1",
	keyVar: "OPENAI_API_KEY", key: "sk-stub", usage: modelstub.Usage{Input: 1200, Output: 80, Cached: 200}, write: "apply_patch",
	hello: "hello from the stub"}

func TestClineSuccess(t *testing.T) {
	// Cline writes files with its apply_patch tool.
	o := cline.succeeds(t, gpt4oMiniCost)
	first := o.main[0]
	if o.main[1].Turn.ToolResults != 1 {
		t.Errorf("second request has %d tool results", o.main[1].Turn.ToolResults)
	}
	// The answer contract is in Cline's rule file.
	requireSystem(t, first, "evidence_files")
	requireHeader(t, first, "Authorization", "Bearer sk-stub")
}

func TestClineAuthFailure(t *testing.T) { cline.authFailure(t) }

// clineAttempts is how often Cline sends a request that gets 429 or 5xx
// (the AI SDK's retries in 3.0.65: 6 attempts; not configurable).
const clineAttempts = 6

func TestClineTransientAPIErrors(t *testing.T) {
	// Cline waits what Retry-After says.
	cline.outlastsRetries(t, clineAttempts, 500, "1")
}

func TestClineBrokenStreams(t *testing.T) {
	// Cline retries the cut stream itself; it gives up on the reply that
	// is not JSON, which Logist retries.
	cline.brokenStreams(t, "ERROR:API_MALFORMED SUCCESS")
}

// Cline 3.0.65 resumes a session (--id) only in its interactive terminal
// UI: a RETRY of the phase starts a new session, told only what Logist's
// prompt says (docs/presets/cline.md).
func TestClineRetryStartsCold(t *testing.T) {
	o := cline.retryThenComplete(t)
	rs, main := o.rs, o.main
	if rs[0].SessionID == "" || rs[1].SessionID == "" || rs[1].SessionID == rs[0].SessionID {
		t.Errorf("sessions %q then %q", rs[0].SessionID, rs[1].SessionID)
	}
	// The second call's conversation is new: one user message (Logist's
	// prompt, which carries the RETRY's feedback), no tool calls, so the
	// stub has the file written again before the answer.
	if len(main) != 4 {
		t.Fatalf("%d main requests, want 4 (apply_patch, RETRY, apply_patch, COMPLETED)", len(main))
	}
	if again := main[2]; again.Turn.ToolResults != 0 || len(again.Turn.Messages) != len(main[0].Turn.Messages) ||
		!strings.Contains(strings.Join(again.Turn.Messages, "\n"), "one more pass is needed") {
		t.Errorf("second conversation: %d tool results, %d messages (first: %d): %.300q",
			again.Turn.ToolResults, len(again.Turn.Messages), len(main[0].Turn.Messages), again.Turn.Messages)
	}
}

// Cline has no turn limit to pass on: max_turns is refused before the
// program runs.
func TestClineMaxTurnsRefused(t *testing.T) {
	bin, s := cline.start(t)
	r := cline.run(t, "turns", bin, s, map[string]any{"max_turns": 3}, nil)
	r.requireStatus(t, "INTERVENTION_REQUIRED")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "AGENT_CONFIG" {
		t.Fatalf("responses %s%s", codes(rs), errorDetails(rs))
	}
	if n := len(s.Requests()); n != 0 {
		t.Errorf("%d model requests", n)
	}
}

func TestClineTimeoutKillsGroup(t *testing.T) {
	// No hub daemon or other helper is left either (the local backend).
	if n := len(cline.timeoutKillsGroup(t, 10, 1).main); n > 1 {
		t.Errorf("%d model requests; want at most the one that hung", n)
	}
}

func TestClineConnectionRefused(t *testing.T) { cline.connectionRefused(t, refusedBound) }
