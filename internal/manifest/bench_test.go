package manifest

import (
	"fmt"
	"testing"
	"time"
)

var benchManifest = []byte(`{"job_id": "b", "task_description": "bench", "status": "RUNNING", "current_phase": "work",
 "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}},
 "metrics": {"cumulative_cost": 1, "cumulative_time_seconds": 2, "agent_calls": 3},
 "history": [{"timestamp": "2026-01-01T00:00:00Z", "role": "Worker", "action": "COMPLETED", "note": "done"}],
 "run": {"updated_at": "2026-01-01T00:00:00Z", "started_at": "2026-01-01T00:00:00Z"}}`)

// BenchmarkDecode is the full check every manifest from outside gets.
func BenchmarkDecode(b *testing.B) {
	for b.Loop() {
		if _, err := Decode("job.json", benchManifest); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeTrusted is the reload of a manifest already checked.
func BenchmarkDecodeTrusted(b *testing.B) {
	for b.Loop() {
		if _, err := DecodeTrusted("job.json", benchManifest); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode is the manifest write's encoding.
func BenchmarkEncode(b *testing.B) {
	m, err := Decode("job.json", benchManifest)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.Encode(); err != nil {
			b.Fatal(err)
		}
	}
}

// The audit trail keeps its newest entries only.
func TestAuditTrailIsBounded(t *testing.T) {
	m, err := Decode("job.json", benchManifest)
	if err != nil {
		t.Fatal(err)
	}
	for i := range MaxAuditEntries + 10 {
		m.Audit(time.Unix(int64(i), 0), "Worker", "RETRY", fmt.Sprint(i), nil)
	}
	if len(m.History) != MaxAuditEntries || m.History[len(m.History)-1].Note != fmt.Sprint(MaxAuditEntries+9) {
		t.Errorf("%d entries, last %+v", len(m.History), m.History[len(m.History)-1])
	}
}
