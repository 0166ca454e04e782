package agent

import "testing"

// TestEnded: one wording for how a program that failed ended — its
// status, the signal that killed it, or a signal that killed its
// sandbox from outside the call.
func TestEnded(t *testing.T) {
	for _, c := range []struct {
		r    ProcResult
		want string
	}{
		{ProcResult{ExitCode: 3}, "sh exited with status 3"},
		{ProcResult{ExitCode: -1, Signal: "SIGKILL"}, "sh was killed by SIGKILL"},
		{ProcResult{ExitCode: -1, Signal: "SIGKILL", Sandbox: true}, "sh's sandbox (bwrap) was killed by SIGKILL from outside the call"},
	} {
		if got := c.r.Ended("sh"); got != c.want {
			t.Errorf("%+v: %q, want %q", c.r, got, c.want)
		}
	}
}
