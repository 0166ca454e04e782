package verify

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
)

// A steward's reply resets the job's retry allowance in the engine, as a
// resume does; the replay must reset it too, or a job with RETRYs before a
// reply gets a false RETRY_LIMIT divergence.
func TestReplyResetsRetriesInReplay(t *testing.T) {
	dir := t.TempDir()
	jobDir := filepath.Join(dir, "j")
	if err := os.MkdirAll(jobDir, 0o700); err != nil {
		t.Fatal(err)
	}
	step := func(action string) map[string]any {
		return map[string]any{"action": action, "summary": action + " here"}
	}
	m := map[string]any{"job_id": "j", "task_description": "t", "limits": map[string]any{"max_retries": 2},
		"agents": map[string]any{
			"worker":     map[string]any{"provider": "script", "script": []any{step("RETRY"), step("RETRY"), step("COMPLETED"), step("COMPLETED")}},
			"supervisor": map[string]any{"provider": "human"},
		}}
	b, _ := json.Marshal(m)
	if err := os.WriteFile(filepath.Join(jobDir, jobstore.ManifestFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	key, err := signing.LoadOrCreate(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := &jobtx.Env{Store: jobstore.New(dir), Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
		History: history.Options{Signer: key}}
	eng := runner.NewEngine(env, builtins.Effects())
	run := func() {
		t.Helper()
		if err := eng.Run(t.Context(), "j"); err != nil {
			t.Fatal(err)
		}
	}
	run() // RETRY, RETRY, COMPLETED; the supervisor's turn waits for a reply
	st := steward.New(env, builtins.Effects())
	if _, err := st.Reply("j", "supervisor", []byte(`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"once more"}`)); err != nil {
		t.Fatal(err)
	}
	run() // a third RETRY since the start, the first since the reply; COMPLETED; waits again
	got, err := env.Store.Load("j")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != lifecycle.InterventionRequired || got.Phase() != "review" || got.Run.ErrorCode == "RETRY_LIMIT" {
		t.Fatalf("job %s in %s (%s): the reply should have reset the retries", got.Status, got.Phase(), got.Run.ErrorCode)
	}
	if r := verifyDir(t, dir, "j", key.Public()); !r.OK() {
		t.Errorf("replay: %v", r.Problems)
	}
}
