package verify

import (
	"encoding/json"
	"flag"
	"fmt"
	"github.com/logist/logist/internal/protocol"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
)

var update = flag.Bool("update", false, "rewrite the captured example histories in testdata/captured")

// examples are the repo's example jobs (jobs/); each has a captured history.
var examples = []string{"demo-retry-success", "demo-stuck", "demo-cost-halt", "demo-invalid-answer", "demo-command", "demo-protocol"}

// varying masks what differs between two runs of the same protocol job:
// tool durations, and the artifact ids that depend on them (a tool's
// output records its duration; the report names the trace's head hash).
var varying = regexp.MustCompile(`"duration_ms": ?\d+|duration_ms \d+|sha256:[0-9a-f]{64}|[0-9a-f]{64}|\d+(\.\d+)?ms`)

func mask(s string) string { return varying.ReplaceAllString(s, "~") }

// TestCapturedHistoriesReplay replays the committed histories of every
// example job: they must verify (chain, signatures, replay with today's
// validation and state machine), and running the example today must behave
// exactly as recorded. An engine change that alters recorded behaviour
// fails here; if the change is intended, run
// `go test ./internal/verify -run Captured -update` and commit the new
// captures with it.
func TestCapturedHistoriesReplay(t *testing.T) {
	t.Parallel()
	capDir := filepath.Join("testdata", "captured")
	for _, name := range examples {
		t.Run(name, func(t *testing.T) {
			dir, key := runExample(t, name)
			now := history.Path(filepath.Join(dir, name))
			captured := filepath.Join(capDir, name+".jsonl")
			if *update {
				if err := os.MkdirAll(capDir, 0o755); err != nil {
					t.Fatal(err)
				}
				b, _ := os.ReadFile(now)
				if err := os.WriteFile(captured, b, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(capDir, name+".pub"), []byte(signing.EncodePublic(key.Public())+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				// A protocol job's evidence: its content-addressed artifacts.
				arts := filepath.Join(dir, name, protocol.ArtifactsDir)
				if err := os.RemoveAll(filepath.Join(capDir, name+".artifacts")); err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(arts); err == nil {
					if err := os.CopyFS(filepath.Join(capDir, name+".artifacts"), os.DirFS(arts)); err != nil {
						t.Fatal(err)
					}
				}
				return
			}
			pub, err := signing.LoadPublic(filepath.Join(capDir, name+".pub"))
			if err != nil {
				t.Fatal(err)
			}
			// The captured history, in a job folder with today's example manifest.
			jobs := t.TempDir()
			if err := os.CopyFS(filepath.Join(jobs, name), os.DirFS(filepath.Join("..", "..", "jobs", name))); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(captured)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(history.Path(filepath.Join(jobs, name)), b, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(capDir, name+".artifacts")); err == nil {
				if err := os.CopyFS(filepath.Join(jobs, name, protocol.ArtifactsDir), os.DirFS(filepath.Join(capDir, name+".artifacts"))); err != nil {
					t.Fatal(err)
				}
			}
			m, err := jobstore.New(jobs).Load(name)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Job(name, filepath.Join(jobs, name), Options{Public: pub, Manifest: m})
			if err != nil || !r.OK() {
				t.Fatalf("captured history does not verify: %v %v", err, r.Problems)
			}
			want, got := trace(t, filepath.Join(jobs, name)), trace(t, filepath.Join(dir, name))
			for i := 0; i < len(want) || i < len(got); i++ {
				var w, g string
				if i < len(want) {
					w = want[i]
				}
				if i < len(got) {
					g = got[i]
				}
				if w != g {
					t.Fatalf("record %d: recorded %q, today's engine %q", i, w, g)
				}
			}
		})
	}
}

// trace is a history without what legitimately varies between runs
// (times, hashes, signatures, durations, paths).
func trace(t *testing.T, jobDir string) []string {
	t.Helper()
	recs, err := history.ReadAll(jobDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.Type == history.TypeCommit {
			// A manifest change with no record of its own: bookkeeping
			// (captured histories from before commit records lack them).
			continue
		}
		s := fmt.Sprintf("%d %s %s %s", len(out), r.Type, r.Role, r.Phase)
		switch {
		case r.Request != nil:
			meta, _ := json.Marshal(r.Request.Metadata)
			s += fmt.Sprintf(" files=%v meta=%s prompt=%q", r.Request.FilesContext, meta,
				mask(strings.ReplaceAll(r.Request.Prompt, jobDir, "$JOB")))
		case r.Response != nil:
			p := r.Response
			s += fmt.Sprintf(" %s %s %s evidence=%v summary=%q raw=%q cost=%v warnings=%v new=%s outcome=%s", p.Status, p.Action, p.ErrorCode,
				p.EvidenceFiles, mask(p.Summary), mask(p.RawResponse), p.CostUSD, p.Warnings, p.NewStatus, p.Outcome)
		case r.Event != nil:
			s += fmt.Sprintf(" %s %s signed=%v", r.Event.Type, r.Event.Subject, r.Event.Sig != "")
		case r.Transition != nil:
			tr := r.Transition
			s += fmt.Sprintf(" %s->%s %s->%s %s %s %s %q", tr.From, tr.To, tr.FromPhase, tr.ToPhase, tr.Event, tr.Actor, tr.CheckpointID, tr.Reason)
		case r.RecoveryPoint != nil:
			cp := r.RecoveryPoint
			s += fmt.Sprintf(" %s %d %s %v", cp.CheckpointID, cp.Sequence, cp.ResumePhase, cp.RollbackFiles)
		case r.Error != nil:
			s += " " + r.Error.Code
		}
		out = append(out, s)
	}
	return out
}
