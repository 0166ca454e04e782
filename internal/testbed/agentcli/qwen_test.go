package agentcli

import (
	"testing"

	"github.com/logist/logist/internal/testbed/modelstub"
)

// Qwen Code against the Chat Completions stub (OpenAI auth with
// OPENAI_BASE_URL), through logistd. Outside the CI set: run with
// LOGIST_TEST_AGENTS=all (or qwen-code).

// qwenCode: gpt-4o-mini is in prices.json (Qwen Code reports no cost:
// Logist prices the tokens).
var qwenCode = &cliProgram{name: "qwen-code", bin: "qwen", id: "qwen", model: "gpt-4o-mini", path: "/v1",
	keyVar: "OPENAI_API_KEY", key: "sk-stub", usage: modelstub.Usage{Input: 1200, Output: 80, Cached: 200}, write: "write_file"}

func TestQwenCodeSuccess(t *testing.T) {
	// Two model requests (write_file, then structured_output with the
	// answer), summed and priced as gpt-4o-mini.
	o := qwenCode.succeeds(t, gpt4oMiniCost)
	first, last := o.main[0], o.main[1]
	// The answer came through the tool --json-schema registers.
	if last.Reply.ToolCall == nil || last.Reply.ToolCall.Name != modelstub.ChatStructuredTool || last.Turn.ToolResults != 1 {
		t.Errorf("last reply %+v (tool results %d)", last.Reply, last.Turn.ToolResults)
	}
	requireSystem(t, first, "evidence_files")
	requireHeader(t, first, "Authorization", "Bearer sk-stub")
	for _, l := range o.s.Requests() {
		if l.Turn != nil && l.Turn.Side {
			t.Errorf("side request %+v", l.Turn)
		}
	}
}

func TestQwenCodeAuthFailure(t *testing.T) { qwenCode.authFailure(t) }

// qwenAttempts is how often Qwen Code sends a request that gets 429 or
// 5xx (retryWithBackoff's 7 attempts in 0.24.4; not configurable).
const qwenAttempts = 7

func TestQwenCodeTransientAPIErrors(t *testing.T) {
	// It honours Retry-After for 429 and 503 only (a 500 costs 1.5 s
	// doubling: 68 s for the 7 attempts; the unit tests cover it).
	qwenCode.outlastsRetries(t, qwenAttempts, 503, "1")
}

func TestQwenCodeBrokenStreams(t *testing.T) {
	// Qwen Code retries the cut stream itself; it gives up on the reply
	// that is not JSON, which Logist retries.
	qwenCode.brokenStreams(t, "ERROR:API_MALFORMED SUCCESS")
}

func TestQwenCodeSessionContinues(t *testing.T) {
	// The second call ran with --resume; its tokens are only its own.
	o := qwenCode.sessionContinues(t, "write_file {", "")
	if last := o.main[2]; last.Turn.ToolResults < 2 {
		t.Errorf("resumed conversation has %d tool results", last.Turn.ToolResults)
	}
	if tk := o.rs[1].Tokens; tk == nil || tk.Input != qwenCode.usage.Input || tk.Output != qwenCode.usage.Output {
		t.Errorf("second call's tokens %+v, want one reply's", o.rs[1].Tokens)
	}
}

func TestQwenCodeMaxTurns(t *testing.T) { qwenCode.maxTurns(t) }

func TestQwenCodeTimeoutKillsGroup(t *testing.T) {
	if n := len(qwenCode.timeoutKillsGroup(t, 10, 1).main); n > 1 {
		t.Errorf("%d model requests; want at most the one that hung", n)
	}
}

func TestQwenCodeConnectionRefused(t *testing.T) { qwenCode.connectionRefused(t, refusedBound) }
