package manifest

import (
	"strings"
	"testing"

	"github.com/logist/logist/schemas/schemastest"
)

func FuzzManifestDecode(f *testing.F) {
	for _, s := range []string{
		minimal,
		`{}`,
		`[]`,
		`null`,
		``,
		"{\x00}",
		`{"schema_version":2,"task_description":"t","agents":{}}`,
		`{"schema_version":"2"}`,
		`{"schema_version":1e3,"task_description":"t"}`,
		withFields(`"job_id":"job-1","status":"HALTED_COST","current_phase":"review","cost_threshold":10,"metrics":{"cumulative_cost":12,"cumulative_time_seconds":3}`),
		withFields(`"workflow":{"name":"w","start":"a","phases":{"a":{"role":"worker","on":{"COMPLETED":"SUCCESS","RETRY":"a","STUCK":"INTERVENTION_REQUIRED"}}}}`),
		withFields(`"history":[{"timestamp":"2025-01-29T10:00:00Z","role":"Worker","action":"COMPLETED","phase":null}]`),
		withFields(`"context_files":["a.md","dir/b.md"],"prompts":{"worker":"p.md"},"limits":{"max_retries":0,"call_timeout_seconds":0.5}`),
		`{"task_description":"t","agents":{"worker":{"provider":"command","command":{"argv":["x","{answer_file}"],"answer":"file"}},"supervisor":{"provider":"script","script":[{"raw":"{}"}]}}}`,
		`{"task_description":"t","agents":{"worker":{"provider":"script","script":[]},"supervisor":{"provider":"script","script":[{}]}}}`,
		withFields(`"history":[{}]`),
		withFields(`"cost_threshold":1e1000001,"limits":{"max_retries":1e999999,"call_timeout_seconds":-1e-1000001}`),
		withFields(`"run":{"reason":"x","updated_at":"2025-01-29T10:00:00Z"}`),
		`{"a":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer schemastest.NoFault(t)()
		m, err := Decode("job.json", data)
		if err != nil {
			if m != nil {
				t.Fatalf("manifest returned with error %v", err)
			}
			if !strings.Contains(err.Error(), "job.json") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if !m.Status.Valid() {
			t.Fatalf("accepted status %q", m.Status)
		}
		if m.SchemaVersion != CurrentVersion {
			t.Fatalf("accepted schema_version %d", m.SchemaVersion)
		}
		if m.JobID != "" {
			if err := ValidID(m.JobID); err != nil {
				t.Fatalf("accepted job id: %v", err)
			}
		} else {
			// The job store names a manifest without job_id after its
			// folder before it saves it (jobstore.Load).
			m.JobID = "fuzz-job"
		}
		b, err := m.Encode()
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		m2, err := Decode("job.json", b)
		if err != nil {
			t.Fatalf("decoding the encoded manifest failed: %v\ninput: %q\nencoded: %s", err, data, b)
		}
		if m2.Status != m.Status || m2.JobID != m.JobID || m2.Phase() != m.Phase() || m2.TaskDescription != m.TaskDescription {
			t.Fatalf("round trip changed the manifest: %+v -> %+v", m, m2)
		}
		if len(m2.Agents) != len(m.Agents) || m2.MaxRetries() != m.MaxRetries() || m2.CallTimeout("worker") != m.CallTimeout("worker") {
			t.Fatalf("round trip changed agents or limits")
		}
	})
}
