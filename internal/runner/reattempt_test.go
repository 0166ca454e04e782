package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// Issue 17 item 5: a call cut off by a shutdown is asked again with
// byte-identical input. The agent here reads its request on stdin and from
// its request file, copies both aside, and hangs on its first call until
// the shutdown kills it; the re-attempt must hand it the same bytes (a
// request with no context files once came back with "context_files": null,
// and an encrypted job's re-attempt got the sealed prompt).
func TestReattemptHandsTheAgentIdenticalInput(t *testing.T) {
	for _, enc := range []bool{false, true} {
		name := "plain"
		if enc {
			name = "encrypted history"
		}
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			out := t.TempDir()
			script := `n=$(ls "$OUT" | grep -c '^stdin-'); cat > "$OUT/stdin-$n"; cp "$LOGIST_REQUEST_FILE" "$OUT/file-$n"; touch "$OUT/read-$n"
if [ "$n" = 0 ]; then sleep 60; fi
echo '{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}'`
			worker := command(0, "sh", "-c", script)
			cmd := worker["command"].(map[string]any)
			cmd["stdin"] = "request"
			cmd["env"] = map[string]any{"OUT": out}
			j := job(worker, okSupervisor())
			if enc {
				j["encrypt_history"] = true
			}
			f.WriteJob("j", j)

			ctx, cancel := context.WithCancelCause(context.Background())
			done := make(chan error, 1)
			go func() { done <- f.Engine.Run(ctx, "j") }()
			testkit.WaitFor(t, "the first attempt to read its request", 10*time.Second, func() bool {
				// read-0 comes after both copies are complete (file-0 exists
				// as soon as cp opens it, before its bytes are in).
				_, err := os.Stat(filepath.Join(out, "read-0"))
				return err == nil
			})
			cancel(ErrShutdown)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			f.Run("j")
			if m := f.Load("j"); m.Status != lifecycle.Success {
				t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
			}
			for _, kind := range []string{"stdin", "file"} {
				first, err1 := os.ReadFile(filepath.Join(out, kind+"-0"))
				again, err2 := os.ReadFile(filepath.Join(out, kind+"-1"))
				if err1 != nil || err2 != nil {
					t.Fatalf("%s: %v %v", kind, err1, err2)
				}
				if len(first) == 0 || !bytes.Equal(first, again) {
					t.Errorf("the re-attempt's %s differs from the first attempt's:\nfirst: %s\nagain: %s", kind, first, again)
				}
			}
		})
	}
}
