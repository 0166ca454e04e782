package crashtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
)

// TestPlacementBoundaries leaves the jobs folder as a crash leaves it at
// each boundary of a bare manifest's placement (jobstore.Place: mkdir,
// the link of job.json to the bare file, the job folder's fsync with the
// job's first unit, the unlink of the bare name) and checks that the next
// logistd runs the job once, to its end, without reporting it invalid or
// "already exists", and leaves no bare name. A machine crash can lose any
// change not yet fsync'd, so each state stands for every crash that can
// leave it: the unlink is never fsync'd, and a crash after the first unit
// may keep the bare name whether or not it had been removed.
func TestPlacementBoundaries(t *testing.T) {
	if testing.Short() {
		t.Skip("crash harness: skipped with -short")
	}
	bin := buildDaemon(t)
	work := t.TempDir()
	agent := hangOnceAgent(t, work)
	manifestOf := func(id, mark string) []byte {
		worker := agentScript(step{"action": "COMPLETED", "summary": "done"})
		if mark != "" {
			worker = agentCommand(true, "sh", agent, "{answer_file}", mark)
		}
		b, err := json.MarshalIndent(map[string]any{"schema_version": 1, "job_id": id, "task_description": "placement " + id,
			"agents": map[string]any{"worker": worker, "supervisor": agentScript(step{"action": "COMPLETED", "summary": "ok"})}}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	write := func(p string, b []byte) {
		t.Helper()
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	link := func(bare, jd string) {
		t.Helper()
		if err := os.Link(bare, filepath.Join(jd, jobstore.ManifestFile)); err != nil {
			t.Skipf("no hard links here: %v", err)
		}
	}
	cases := []struct {
		name string
		// leave makes the state in dir for job id with bare name bare.
		leave func(t *testing.T, d daemon, id, bare string)
	}{
		{"after the mkdir", func(t *testing.T, d daemon, id, bare string) {
			write(bare, manifestOf(id, ""))
			if err := os.Mkdir(filepath.Join(d.dir, id), 0o700); err != nil {
				t.Fatal(err)
			}
		}},
		{"after the link", func(t *testing.T, d daemon, id, bare string) {
			write(bare, manifestOf(id, ""))
			jd := filepath.Join(d.dir, id)
			if err := os.Mkdir(jd, 0o700); err != nil {
				t.Fatal(err)
			}
			link(bare, jd)
		}},
		{"after the first unit, before the unlink", func(t *testing.T, d daemon, id, bare string) {
			mark := filepath.Join(work, id+".started")
			tmp := filepath.Join(d.dir, "."+id+".tmp")
			write(tmp, manifestOf(id, mark))
			cmd := d.start(t, "--sandbox", "none")
			if err := os.Rename(tmp, bare); err != nil {
				t.Fatal(err)
			}
			killAtMark(t, cmd, mark, d.logFile)
			// The first unit is durable; the bare name's removal may have
			// run or not, and is never fsync'd: the crash kept it.
			jd := filepath.Join(d.dir, id)
			if _, err := os.Stat(history.Path(jd)); err != nil {
				t.Fatalf("no history after the worker started: %v", err)
			}
			if _, err := os.Lstat(bare); err != nil {
				if err := os.Link(filepath.Join(jd, jobstore.ManifestFile), bare); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(work, fmt.Sprintf("jobs%d", i))
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			d := daemon{bin: bin, dir: dir, logFile: filepath.Join(work, fmt.Sprintf("logistd%d.log", i))}
			id := fmt.Sprintf("placed-%d", i)
			bare := filepath.Join(dir, "drop.json")
			c.leave(t, d, id, bare)
			from := logSize(d.logFile)
			d.runOnce(t, 60*time.Second, "--sandbox", "none")
			for _, ev := range readLog(t, d.logFile, from) {
				if ev.Msg == "invalid manifest" || strings.Contains(ev.Msg, "already exists") {
					t.Errorf("the next run reported %s: %+v", id, ev)
				}
			}
			if _, err := os.Lstat(bare); err == nil {
				t.Error("the bare name is still there after the next run")
			}
			key, err := signing.Load(dir)
			if err != nil {
				t.Fatal(err)
			}
			got := checkJob(t, filepath.Join(dir, id), jobSpec{id: id, kind: "placement", want: "SUCCESS"}, key.Public())
			if got.status != "SUCCESS" || got.responses != 2 {
				t.Errorf("job %s ends %s with %d responses, want SUCCESS with 2 (one call each, once); log:\n%s",
					id, got.status, got.responses, tail(d.logFile, from))
			}
		})
	}
}
