package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/logist/logist/internal/history"
)

// The fsync probe (scenario 1, read by scenario 2) counts the daemon's
// fsyncs between two moments of a job: the manifest's arrival, the
// worker's start and the supervisor's start. Its agents must change
// nothing in the job's workspace, or the count between the two starts is
// not one call's: an agent that writes a file there (the stamps the timed
// pickups use) makes the daemon take a checkpoint of the workspace before
// the next unit (snapshot object, checkpoint file, their folders), which
// is the cost of that agent's work, not of a call. So the probe sees an
// agent start in the process table (procArgv), not in a stamp file, and
// measures a call that changes the workspace apart (probeVariant). A
// scan of the process table can miss a short-lived agent on a loaded
// machine, so the call's intent made durable in the job's history (the
// daemon's last fsync before it starts the agent) counts as its start
// too (historyIntent): no fsync of logistd's comes between the two.

// probeVariant is one kind of probe job.
type probeVariant struct {
	// stamps is the agent's stamp file ("-": none, the workspace stays
	// as it was; stampsInWorkspace: one file added, then changed).
	stamps string
}

var (
	probeCall   = probeVariant{stamps: "-"}
	probeChange = probeVariant{stamps: stampsInWorkspace}
)

// probeHoldMs keeps each probe agent running after its start long enough
// for the harness to see it and read the counters while it runs.
const probeHoldMs = "300"

// probeArgv is the argv the probe's agent of role runs with in job id,
// as cmdManifest's template expands it.
func (h *harness) probeArgv(v probeVariant, id, role string) []string {
	return []string{h.agent, v.stamps, id, role, probeHoldMs}
}

// probeJob drops one two-call job and returns the daemon's fsync counts
// from its manifest's arrival to its worker's start (before) and from
// there to its supervisor's start (between).
func (h *harness) probeJob(d *daemon, staging, jobs, id string, v probeVariant) (before, between fsyncs, err error) {
	src := filepath.Join(staging, id+".json")
	if err := os.WriteFile(src, h.cmdManifest(id, v.stamps, probeHoldMs), 0o600); err != nil {
		return before, between, err
	}
	c0, err := d.settledFsyncs()
	if err != nil {
		return before, between, err
	}
	if err := os.Rename(src, filepath.Join(jobs, id+".json")); err != nil {
		return before, between, err
	}
	dir := filepath.Join(jobs, id)
	if err := waitStart(dir, 0, h.probeArgv(v, id, "worker"), 30*time.Second); err != nil {
		return before, between, err
	}
	c1, err := d.fsyncs()
	if err != nil {
		return before, between, err
	}
	if err := waitStart(dir, 1, h.probeArgv(v, id, "supervisor"), 30*time.Second); err != nil {
		return before, between, err
	}
	c2, err := d.fsyncs()
	if err != nil {
		return before, between, err
	}
	return c1.minus(c0), c2.minus(c1), nil
}

// waitStart polls until call n of the job in dir has started: a
// process runs with exactly argv, or the job's history holds the call's
// intent. It returns an error after timeout.
func waitStart(dir string, n int, argv []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if procArgv("/proc", argv) || historyIntent(dir, n) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("call %d of %s (%q) not started within %s", n, dir, argv, timeout)
}

// historyIntent says whether the history in dir holds the intent of
// interaction n, durable: the history's head, which the daemon writes
// once a unit's fsyncs have ended (and been counted), names it or a later
// record. A line is in the file before its fsync: not enough.
func historyIntent(dir string, n int) bool {
	head, err := history.ReadHead(dir)
	if err != nil || head == nil {
		return false // none yet, or caught being written
	}
	b, err := os.ReadFile(history.Path(dir))
	if err != nil {
		return false
	}
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return false // a line being written
		}
		var line struct {
			Rec struct {
				Seq         int64  `json:"seq"`
				Type        string `json:"type"`
				Interaction *int   `json:"interaction"`
			} `json:"rec"`
		}
		if json.Unmarshal(b[:i], &line) == nil && line.Rec.Type == history.TypeIntent &&
			line.Rec.Interaction != nil && *line.Rec.Interaction == n {
			return head.Seq >= line.Rec.Seq
		}
		b = b[i+1:]
	}
	return false
}

// procArgv says whether a process under proc (a procfs mount) runs with
// exactly argv. A contained agent is found too: its pid namespace is
// nested in the host's, whose process table lists it.
func procArgv(proc string, argv []string) bool {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return false
	}
	want := []byte{}
	for _, a := range argv {
		want = append(append(want, a...), 0)
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "cmdline"))
		if err == nil && bytes.Equal(b, want) {
			return true
		}
	}
	return false
}
