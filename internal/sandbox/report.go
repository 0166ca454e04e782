package sandbox

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// CheckHost prints which layers work on this host and why not, runs a
// real call under each working layer (through this binary's helpers:
// Helper must be hooked into main), and says which layer jobs get. It
// returns the exit status for `logistd --check-sandbox`: 0 when jobs can
// run contained, 1 when none can.
func CheckHost(w io.Writer) int {
	st := ProbeNow()
	fmt.Fprintln(w, "logistd sandbox check")
	line := func(name string, c Check) {
		if c.OK {
			fmt.Fprintf(w, "  %-9s ok       %s\n", name, c.Detail)
		} else {
			fmt.Fprintf(w, "  %-9s missing  %s\n", name, c.Why)
		}
	}
	line("bwrap", st.Bwrap)
	line("landlock", st.Landlock)
	if b, err := OwnBinary(); err == nil {
		// Which binary the trials below (and the daemon's calls) run as
		// launcher and helper.
		if b.Separate {
			fmt.Fprintf(w, "  %-9s ok       %s\n", "helper", b.Path)
		} else {
			fmt.Fprintf(w, "  %-9s self     %s (%s)\n", "helper", b.Path, b.Why)
		}
	}
	ok := map[Layer]bool{}
	for _, l := range []Layer{LayerBwrap, LayerLandlock} {
		if (l == LayerBwrap && !st.Bwrap.OK) || (l == LayerLandlock && !st.Landlock.OK) {
			continue
		}
		d, err := trial(st, l)
		if err != nil {
			fmt.Fprintf(w, "  %-9s FAILED   a call under %s: %v\n", "trial", st.Effective(l), err)
			continue
		}
		ok[l] = true
		fmt.Fprintf(w, "  %-9s ok       a call under %s ran in %v\n", "trial", st.Effective(l), d.Round(time.Millisecond))
	}
	switch {
	case ok[LayerBwrap]:
		fmt.Fprintf(w, "jobs run under %s (sandbox \"auto\", the default)\n", st.Effective(LayerBwrap))
	case ok[LayerLandlock]:
		fmt.Fprintln(w, "jobs run under landlock alone (sandbox \"auto\"): other processes stay visible in /proc and the private /tmp has no size cap; install bubblewrap and enable user namespaces for the full sandbox (docs/security.md)")
	default:
		fmt.Fprintln(w, "no sandbox layer works: jobs that ask for a sandbox (the default) refuse to start; install bubblewrap (apt-get install bubblewrap) and enable user namespaces, or use a kernel with Landlock; a steward may opt a job out with sandbox \"none\" (docs/security.md)")
		return 1
	}
	return 0
}

// trial runs `true` under layer, the whole way a job's call would run.
func trial(st *Status, l Layer) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "logist-sandbox-check-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir) //nolint:errcheck // the trial's scratch folder in the temp folder
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	t0 := time.Now()
	r, err := Run(ctx, &Local{Status: st}, Spec{Argv: []string{"true"}, Dir: ws, Env: []string{"PATH=/usr/bin:/bin"},
		CallDir: filepath.Join(dir, "call"), Layer: l})
	if err != nil {
		return 0, err
	}
	if r.Outcome != OutcomeExited || r.ExitCode != 0 {
		return 0, fmt.Errorf("%s (exit %d) %s %s", r.Outcome, r.ExitCode, r.Error, lastLine(string(r.Stderr)))
	}
	return time.Since(t0), nil
}
