package daemon

import (
	"fmt"
	"log/slog"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/egress"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/metrics"
	"github.com/logist/logist/internal/sandbox"
)

// containment is how the engine contains every job's processes: the
// sandboxes this host supports (probed once), the --sandbox default
// (sandboxFlag) for jobs that name none. A host where the default works
// nowhere is logged at start; its jobs then refuse to start (fail
// closed), each saying why. File mode and cluster nodes use it alike.
//
// A contained call's network is the metering proxy (its launcher forwards
// to its socket); a job on the host network reaches it on its loopback
// port. Its spare sandboxes are counted on m. Every run, contained or not,
// prints at most outputCeiling bytes per stream (--output-ceiling-bytes).
func containment(sandboxFlag string, outputCeiling int64, log *slog.Logger, mp *meterProxy, m *metrics.Metrics) *agent.Containment {
	def, _ := sandbox.ParseLayer(sandboxFlag) // checked with the flags
	// One launcher is kept started ahead of the next call (Prefork).
	c := &agent.Containment{Exec: &sandbox.Local{Prefork: true}, Status: sandbox.Probe(), Default: def,
		Network: sandbox.Network{Mode: sandbox.NetProxy, Socket: mp.socket}, ProxyPort: mp.port, Egress: egress.Agents{P: mp.egress},
		OutputCeiling: outputCeiling}
	if _, err := c.For(&manifest.Manifest{}); err != nil {
		joblog.Log(log, fmt.Sprintf("jobs without a sandbox setting will not start: %v (logistd --check-sandbox)", err),
			joblog.Problem{Code: codes.SandboxUnavailable})
	} else if def == sandbox.LayerNone {
		log.Warn("logistd --sandbox none: the processes of jobs that name no sandbox run uncontained, with the daemon's rights")
	}
	logHelperBinary(log)
	if l, ok := c.Exec.(*sandbox.Local); ok {
		m.CountSpares(func() metrics.SpareCounts {
			s := l.SpareCounts()
			return metrics.SpareCounts{Started: s.Started, Served: s.Served, Discarded: s.Discarded}
		})
	}
	return c
}

// logHelperBinary says once, at start, which binary runs the sandbox's
// launcher and in-sandbox helper: logist-sandbox beside logistd, or
// logistd itself and why.
func logHelperBinary(log *slog.Logger) {
	b, err := sandbox.OwnBinary()
	switch {
	case err != nil:
		// Said by every call that cannot start (and by c.For above).
	case b.Separate:
		log.Info("sandbox helper: "+sandbox.HelperName, "binary", b.Path)
	default:
		log.Info("sandbox helper: logistd itself ("+b.Why+")", "binary", b.Path)
	}
}
