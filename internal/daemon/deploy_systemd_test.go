package daemon

import (
	"os"
	"strings"
	"testing"
	"time"
)

// The shipped unit keeps the promise that calls in flight outlive a
// crashed logistd and are adopted by the next (docs/operations.md): systemd
// must signal logistd alone (KillMode=process), never SIGKILL the call
// launchers in its cgroup when the main process dies or stops; and it must
// give logistd its whole --grace to end its own calls at a stop.
func TestSystemdUnitLeavesCallsToLogistd(t *testing.T) {
	b, err := os.ReadFile("../../deploy/systemd/logistd.service")
	if err != nil {
		t.Fatal(err)
	}
	unit := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && !strings.HasPrefix(k, "#") {
			unit[k] = v
		}
	}
	if unit["KillMode"] != "process" {
		t.Errorf("KillMode=%s: systemd would kill the call launchers with logistd (after a crash too), and their calls "+
			"would be asked and paid again instead of adopted; want KillMode=process", unit["KillMode"])
	}
	if unit["Restart"] != "on-failure" {
		t.Errorf("Restart=%s: a crashed logistd would not come back to adopt its calls; want on-failure", unit["Restart"])
	}
	stop, err := time.ParseDuration(unit["TimeoutStopSec"])
	if err != nil {
		t.Fatalf("TimeoutStopSec=%s: %v", unit["TimeoutStopSec"], err)
	}
	src := printConfig(t, "deploy/systemd", []string{"--config", "../../deploy/systemd/logistd.json"}, nil)
	grace, err := time.ParseDuration(src["grace"].Value)
	if err != nil {
		t.Fatalf("grace %q: %v", src["grace"].Value, err)
	}
	if stop <= grace {
		t.Errorf("TimeoutStopSec=%s is not above --grace %s: systemd would SIGKILL logistd before it ends its calls and records them", stop, grace)
	}
}
