package agent

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/sandbox"
)

// The operator's output ceiling holds every run, contained or not, whatever
// its job asks: a program that prints past it is killed with
// AGENT_OUTPUT_LIMIT naming the ceiling, and no more than the ceiling is
// held. A job that asks less than the ceiling keeps its own limit.
func TestOutputCeilingHoldsEveryExecutor(t *testing.T) {
	const ceiling = 4096
	for _, layer := range []sandbox.Layer{sandbox.LayerNone, sandbox.LayerBwrap} {
		t.Run(string(layer), func(t *testing.T) {
			ex, jobDir, ws := ceiledJob(t, layer, ceiling)
			for _, tc := range []struct {
				name   string
				asks   int64
				stream string
				want   string // in the error's message
				not    string // not in it
			}{
				{"a job asking a terabyte", 1 << 40, "", "more than 4096 bytes, this daemon's output ceiling (logistd --output-ceiling-bytes; the job asks 1099511627776)", ""},
				{"stderr too", 1 << 40, " >&2", "this daemon's output ceiling", ""},
				{"a job asking the default", 0, "", "the job asks 4194304", ""},
				{"a job asking less", 2048, "", "more than 2048 bytes; killed", "ceiling"},
			} {
				c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", "yes 0123456789 | head -c 20000" + tc.stream}, MaxOutputBytes: tc.asks}, Getenv: pathOnly}
				req := &Request{JobID: "j", Phase: "p", Role: "worker", Workspace: ws, JobDir: jobDir, Interaction: 1}
				_, err := c.Call(WithExecutor(context.Background(), ex), req)
				var ae *Error
				if !errors.As(err, &ae) || ae.Code != codes.AgentOutputLimit {
					t.Fatalf("%s: err = %v, want %s", tc.name, err, codes.AgentOutputLimit)
				}
				if !strings.Contains(ae.Msg, tc.want) || tc.not != "" && strings.Contains(ae.Msg, tc.not) {
					t.Errorf("%s: message %q, want it to say %q (and not %q)", tc.name, ae.Msg, tc.want, tc.not)
				}
				if len(ae.Partial) > ceiling || len(ae.Stderr) > ceiling {
					t.Errorf("%s: kept %d bytes of stdout and %d of stderr, over the ceiling of %d", tc.name, len(ae.Partial), len(ae.Stderr), ceiling)
				}
			}
		})
	}
}

// A spec under two ceilings takes the lower; no ceiling leaves the job's.
func TestCeiledTakesTheLower(t *testing.T) {
	for _, tc := range []struct {
		limit, first, second, want int64
	}{
		{0, 0, 0, DefaultMaxOutput},
		{1 << 30, 0, 0, 1 << 30},
		{1 << 30, 8192, 0, 8192},
		{1 << 30, 8192, 4096, 4096},
		{1 << 30, 4096, 8192, 4096},
		{2048, 8192, 4096, 2048},
		{0, 1 << 30, 0, DefaultMaxOutput},
	} {
		s := ProcSpec{Limit: tc.limit}.ceiled(tc.first).ceiled(tc.second)
		if got := s.limit(); got != tc.want {
			t.Errorf("limit %d under %d then %d: %d, want %d", tc.limit, tc.first, tc.second, got, tc.want)
		}
	}
}

// A program that prints past its limit and ends at once, before the daemon
// could kill it, fails the same way: its output is never taken cut short as
// if it were whole (an answer cut so read as NOT_JSON, stderr silently cut).
func TestOutputPastTheLimitFailsEvenWhenTheProgramEndsFirst(t *testing.T) {
	for _, layer := range []sandbox.Layer{sandbox.LayerNone, sandbox.LayerBwrap} {
		t.Run(string(layer), func(t *testing.T) {
			ex, dir, _ := ceiledJob(t, layer, 0)
			runs := 40
			if layer != sandbox.LayerNone {
				runs = 40
			}
			for i := range runs {
				stream := []string{"", " >&2"}[i%2]
				_, err := ex.Run(context.Background(), ProcSpec{Argv: []string{"sh", "-c", "head -c 20000 /dev/zero" + stream}, Dir: dir, Env: []string{"PATH=/usr/bin:/bin"}, Limit: 4096})
				var ae *Error
				if !errors.As(err, &ae) || ae.Code != codes.AgentOutputLimit {
					t.Fatalf("run %d: err = %v, want %s", i, err, codes.AgentOutputLimit)
				}
			}
		})
	}
}

// An answer file is read up to what the run was held to: the job's limit
// under the operator's ceiling, not the job's alone.
func TestAnswerFileUnderTheCeiling(t *testing.T) {
	for _, layer := range []sandbox.Layer{sandbox.LayerNone, sandbox.LayerBwrap} {
		t.Run(string(layer), func(t *testing.T) {
			ex, jobDir, ws := ceiledJob(t, layer, 4096)
			c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", `head -c 10000 /dev/zero | tr '\0' x > "$1"`, "sh", "{answer_file}"},
				Answer: "file", MaxOutputBytes: 1 << 40}, Getenv: pathOnly}
			req := &Request{JobID: "j", Phase: "p", Role: "worker", Workspace: ws, JobDir: jobDir, Interaction: 1}
			_, err := c.Call(WithExecutor(context.Background(), ex), req)
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != codes.AgentOutputLimit || ae.Transient || !strings.Contains(ae.Msg, "10000 bytes, more than 4096") {
				t.Fatalf("err = %v, want the answer file refused past the ceiling", err)
			}
		})
	}
}

// ceiledJob is the executor a Containment with the output ceiling gives a
// job of layer (0: no ceiling), and a job folder with its workspace.
func ceiledJob(t *testing.T, layer sandbox.Layer, ceiling int64) (ex Executor, jobDir, ws string) {
	t.Helper()
	cont := &Containment{Exec: &sandbox.Local{}, Status: sandbox.Probe(), OutputCeiling: ceiling}
	return jobUnder(t, cont, &manifest.Manifest{Sandbox: string(layer)})
}
