package jobview

import (
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// FuzzAppendListItem holds AppendListItem to json.MarshalIndent of
// ListItem, the console's and `--format json`'s item: strings that
// encoding/json escapes, numbers in both its notations, the optional
// fields set or not, invalid manifests.
func FuzzAppendListItem(f *testing.F) {
	f.Add("s-1", "SUCCESS", "work", "cost <60> & \"more\"\n\u2028\xff é", "bwrap", 60.0, 1e-7, 3, uint8(0))
	f.Add("j", "RUNNING", "", "", "none", 0.0, 1e21, 0, uint8(1|2|4))
	f.Add("j", "DRAFT", "p", "r", "", -0.5, 123456789.125, -2, uint8(8))
	f.Add("j\x1b", "X", "p", "why: it is\tbroken", "", 0.0, 0.0, 0, uint8(16))
	f.Fuzz(func(t *testing.T, id, status, phase, reason, sandbox string, cost, secs float64, calls int, opts uint8) {
		m := &manifest.Manifest{JobID: id, Status: lifecycle.Status(status),
			Metrics: manifest.Metrics{CumulativeCost: cost, CumulativeTimeSeconds: secs, AgentCalls: calls}}
		m.SetPhase(phase)
		m.Run.Reason, m.Run.Sandbox = reason, sandbox
		if opts&1 != 0 {
			m.CostThreshold = &secs
		}
		if opts&2 != 0 {
			m.TimeThresholdMinutes = &cost
		}
		if opts&4 != 0 {
			m.Schedule = &manifest.Schedule{Cron: reason, Timezone: phase, StartingDeadlineSeconds: &cost, Suspend: calls > 0}
		}
		en := jobstore.Entry{ID: id, Dir: "/jobs/" + id, Manifest: m}
		if opts&8 != 0 {
			m.CostThreshold = new(math.NaN())
		}
		if opts&16 != 0 {
			en.Manifest, en.Err = nil, errors.New("/jobs/"+id+"/job.json: "+reason)
		}
		for _, prefix := range []string{"", "    "} {
			want, werr := json.MarshalIndent(ListItem("/jobs", en), prefix, "  ")
			var view manifest.Manifest
			got, ok := AppendListItem([]byte("x"), "/jobs", &en, &view, prefix)
			if ok != (werr == nil) {
				t.Fatalf("ok %v, MarshalIndent's error %v", ok, werr)
			}
			if !ok {
				if string(got) != "x" {
					t.Fatalf("appended %q when not ok", got)
				}
				continue
			}
			if string(got[1:]) != string(want) {
				t.Fatalf("prefix %q:\ngot\n%s\nwant\n%s", prefix, got[1:], want)
			}
		}
	})
}
