package agentcli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/testbed/modelstub"
)

// OpenCode against the Chat Completions stub (a base_url provider),
// through logistd.

// openCode: gpt-4o-mini is in prices.json (OpenCode reports cost 0 for a
// base_url model, so Logist prices the tokens).
var openCode = &cliProgram{name: "opencode", bin: "opencode", id: "opencode", model: "gpt-4o-mini", path: "/v1",
	keyVar: "OPENAI_API_KEY", key: "sk-stub", usage: modelstub.Usage{Input: 1200, Output: 80, Cached: 200}, write: "write"}

func TestOpenCodeSuccess(t *testing.T) {
	o := openCode.succeeds(t, gpt4oMiniCost)
	if id := o.rs[0].SessionID; !strings.HasPrefix(id, "ses_") {
		t.Errorf("session %q", id)
	}
	// OpenCode's own write tool, the role's system prompt among its
	// instructions and the key we gave.
	first := o.main[0]
	if j := toolList(first); !strings.Contains(","+j+",", ",write,") {
		t.Errorf("tools offered: %s", j)
	}
	requireSystem(t, first, "evidence_files")
	requireHeader(t, first, "Authorization", "Bearer sk-stub")
	if first.Turn.Model != "gpt-4o-mini" || !first.Turn.Stream {
		t.Errorf("model %q stream %v", first.Turn.Model, first.Turn.Stream)
	}
	// The prompt arrived as Logist wrote it (opencode run would quote and
	// escape an argument with spaces).
	if msg := first.Turn.Messages[0]; !strings.Contains(msg, taskText) || strings.Contains(msg, `\"`) || strings.HasPrefix(msg, `"`) {
		t.Errorf("first message %.300q", msg)
	}
	if o.main[1].Turn.ToolResults != 1 {
		t.Errorf("second request has %d tool results", o.main[1].Turn.ToolResults)
	}
}

func TestOpenCodeAuthFailure(t *testing.T) {
	// OpenCode does not retry a 401.
	openCode.authFailure(t)
}

// opencodeRetries is how often OpenCode retries a 429/5xx by itself
// (RETRY_MAX_RETRIES in 1.18.33; it cannot be configured).
const opencodeRetries = 5

func TestOpenCodeTransientAPIErrors(t *testing.T) {
	// OpenCode waits what Retry-After says (else 2 s doubling): 0 keeps
	// the test short. 2×6 failed requests, then the write call and the
	// answer.
	openCode.outlastsRetries(t, opencodeRetries+1, 500, "0")
}

func TestOpenCodeBrokenStreams(t *testing.T) {
	// OpenCode retries the cut stream itself; it gives up on the reply
	// that is not JSON, which Logist retries.
	openCode.brokenStreams(t, "ERROR:API_MALFORMED SUCCESS")
}

func TestOpenCodeSessionContinues(t *testing.T) {
	// The second call ran with --session.
	o := openCode.sessionContinues(t, "write {", "")
	first, last := o.main[0], o.main[2]
	if last.Turn.ToolResults != 1 || len(last.Turn.Messages) <= len(first.Turn.Messages)+2 {
		t.Errorf("resumed conversation: %d messages, %d tool results; the first had %d messages",
			len(last.Turn.Messages), last.Turn.ToolResults, len(first.Turn.Messages))
	}
	db, err := os.ReadFile(filepath.Join(o.r.Dir, o.r.ID, "agent-home", "worker", ".local", "share", "opencode", "opencode.db"))
	if err != nil || !bytes.Contains(db, []byte(o.rs[0].SessionID)) {
		t.Errorf("the session is not in the role's private home: %v", err)
	}
}

func TestOpenCodeMaxTurns(t *testing.T) {
	// One step allowed: the write call uses it, the answer needs a second.
	openCode.maxTurns(t)
}

func TestOpenCodeTimeoutKillsGroup(t *testing.T) {
	// OpenCode needs a few seconds to start on a busy machine; the call
	// is cut off while it waits for the model (or, on a very slow day,
	// before it asked).
	o := openCode.timeoutKillsGroup(t, 10, 1)
	if n := len(o.main); n > 1 {
		t.Errorf("%d model requests; want at most the one that hung", n)
	} else if n == 0 {
		t.Log("opencode was killed before its first model request")
	}
}

func TestOpenCodeConnectionRefused(t *testing.T) { openCode.connectionRefused(t, refusedBound) }
