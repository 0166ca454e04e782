package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
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
// measures a call that changes the workspace apart (probeVariant).

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
	if err := waitProc(h.probeArgv(v, id, "worker"), 10*time.Second); err != nil {
		return before, between, err
	}
	c1, err := d.fsyncs()
	if err != nil {
		return before, between, err
	}
	if err := waitProc(h.probeArgv(v, id, "supervisor"), 10*time.Second); err != nil {
		return before, between, err
	}
	c2, err := d.fsyncs()
	if err != nil {
		return before, between, err
	}
	return c1.minus(c0), c2.minus(c1), nil
}

// waitProc polls the process table until a process runs with exactly
// argv (it has exec'd its program), or the timeout passes.
func waitProc(argv []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if procArgv("/proc", argv) {
			return nil
		}
		time.Sleep(time.Millisecond)
	}
	return fmt.Errorf("no process %q within %s", argv, timeout)
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
