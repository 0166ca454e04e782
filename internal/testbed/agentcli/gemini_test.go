package agentcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/testbed/modelstub"
)

// Gemini CLI against the Gemini API stub, through logistd. Outside the CI
// set: run with LOGIST_TEST_AGENTS=all (or gemini-cli).

// geminiCLI: the stub's promptTokenCount includes the cached tokens, as
// the Gemini API counts them. Gemini reports no cost and prices.json has
// no Gemini models, so Logist prices the tokens by command.price.
var geminiCLI = &cliProgram{name: "gemini-cli", bin: "gemini", id: "gemini", model: "gemini-2.5-flash",
	keyVar: "GEMINI_API_KEY", key: "stub-gemini-key", usage: modelstub.Usage{Input: 1000, Output: 50, Cached: 200}, write: "write_file",
	command: func(*testing.T, string) map[string]any {
		return map[string]any{"price": map[string]any{"input_per_mtok": 0.30, "output_per_mtok": 2.50, "cached_input_per_mtok": 0.03}}
	}}

func TestGeminiCLISuccess(t *testing.T) {
	// Priced by command.price: 1600×$0.30 + 400×$0.03 + 100×$2.50 per
	// million: $0.000742.
	o := geminiCLI.succeeds(t, [2]float64{0.000741, 0.000743})
	// The CLI's state stays in the private home, not in the workspace.
	for _, f := range []string{".gemini", "GEMINI.md", ".env"} {
		if _, err := os.Stat(filepath.Join(o.r.Dir, o.r.ID, "workspace", f)); err == nil {
			t.Errorf("%s left in the workspace", f)
		}
	}
	first := o.main[0]
	// auto_edit: the write tool is offered, the shell is not.
	if j := toolList(first); !strings.Contains(j, "write_file") || strings.Contains(j, "run_shell_command") {
		t.Errorf("tools offered: %s", j)
	}
	// The role's system prompt (the answer contract) reached the model in
	// the system instruction, after the CLI's own.
	requireSystem(t, first, "summary_for_supervisor", "Gemini CLI")
	requireHeader(t, first, "X-Goog-Api-Key", "stub-gemini-key")
	if first.Turn.Model != "gemini-2.5-flash" {
		t.Errorf("model %q", first.Turn.Model)
	}
}

func TestGeminiCLIAuthFailure(t *testing.T) {
	// The CLI does not retry a 401.
	geminiCLI.authFailure(t)
}

func TestGeminiCLITransientAPIErrors(t *testing.T) {
	// general.maxAttempts 1: the CLI's own backoff (5 s doubling) is out
	// of the way.
	geminiCLI.transientErrors(t, 503)
}

func TestGeminiCLIBrokenStreams(t *testing.T) {
	// The cut call is asked again without a response record (partial
	// generation is never recorded); the malformed one is an error on the
	// record.
	o := geminiCLI.brokenStreams(t, "ERROR:API_MALFORMED SUCCESS")
	if !strings.Contains(o.r.Log, "STREAM_CUT") {
		t.Errorf("the cut stream is not in the log:\n%s", tail(o.r.Log, 3000))
	}
}

func TestGeminiCLISessionContinues(t *testing.T) {
	// The second call ran with --resume.
	o := geminiCLI.sessionContinues(t, "call write_file", "")
	first, last := o.main[0], o.main[2]
	if len(last.Turn.Messages) <= len(first.Turn.Messages)+2 {
		t.Errorf("resumed conversation has %d messages, the first had %d", len(last.Turn.Messages), len(first.Turn.Messages))
	}
}

func TestGeminiCLIMaxTurns(t *testing.T) {
	// The first turn (write_file) was paid for: stream-json's result
	// carries its tokens although the run failed.
	geminiCLI.maxTurns(t)
}

func TestGeminiCLITimeoutKillsGroup(t *testing.T) {
	// gemini relaunches itself (two node processes); the call is cut off
	// while it waits for the model.
	o := geminiCLI.timeoutKillsGroup(t, 10, 1)
	if len(o.main) == 0 {
		t.Error("the call was killed before it reached the model")
	}
}

func TestGeminiCLIConnectionRefused(t *testing.T) { geminiCLI.connectionRefused(t, refusedBound) }
