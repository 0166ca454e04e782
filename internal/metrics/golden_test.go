package metrics

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/logist/logist/internal/lifecycle"
)

var update = flag.Bool("update", false, "rewrite testdata/exposition.golden")

// The exposition of logistd's own metrics after a fixed set of events is
// what testdata/exposition.golden says: names, help, types, label sets and
// initial zeros are a contract with dashboards and alerts. Regenerate with
// go test ./internal/metrics -run Golden -update after an intended change.
func TestGoldenExposition(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v1.2.3", "abc1234")
	m.nowFunc = func() time.Time { return time.Unix(1700000000, 0) }
	m.JobStatus("a", "", lifecycle.Pending)
	m.JobStatus("a", lifecycle.Pending, lifecycle.Running)
	m.FirstStart()
	m.Stalled("a", "STORAGE_DENIED")
	m.Stalled("b", "HISTORY_WRITE")
	m.Stalled("b", "")
	m.Seen("tpl", lifecycle.Pending, true)
	m.JobStatus("a", lifecycle.Running, lifecycle.InterventionRequired)
	m.AgentCall("worker", "script", "ok", 1500*time.Millisecond, 0.25)
	m.AgentCall("worker", "script", "invalid", 200*time.Millisecond, 0.05)
	m.Violation("SCHEMA_INVALID")
	m.Retry("api_error")
	m.Halt("cost")
	m.Tokens("command", 100, 20, 5)
	m.Pickup(3 * time.Millisecond)
	m.Intake(2 * time.Millisecond)
	m.Phase("worker", 2*time.Second)
	m.HistoryAppend(400*time.Microsecond, nil)
	m.HistoryWrite(512, 300*time.Microsecond)
	m.TornTail()
	m.Steward("resume", "ok")
	m.Cron("created")
	m.SetInvalid(2)

	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, f := range fams {
		if !strings.HasPrefix(f.GetName(), "logistd_") {
			continue // go_ and process_ vary by machine
		}
		if _, err := expfmt.MetricFamilyToText(&buf, f); err != nil {
			t.Fatal(err)
		}
	}
	golden := filepath.Join("testdata", "exposition.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		got, wantS := strings.Split(buf.String(), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < len(got) && i < len(wantS); i++ {
			if got[i] != wantS[i] {
				t.Fatalf("exposition differs at line %d:\n got: %s\nwant: %s\n(run with -update if intended)", i+1, got[i], wantS[i])
			}
		}
		t.Fatalf("exposition has %d lines, golden %d (run with -update if intended)", len(got), len(wantS))
	}
}
