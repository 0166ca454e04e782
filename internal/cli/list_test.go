package cli

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
)

// TestListJSONIsTheEnvelope: `logist list --format json`, its items
// encoded by hand, prints what the envelope of jobview.ListItem's maps
// prints through writeJSON, for valid, invalid and scheduled jobs, agent
// text with characters JSON or a terminal escapes, and an empty folder.
func TestListJSONIsTheEnvelope(t *testing.T) {
	jobs := t.TempDir()
	check := func() {
		t.Helper()
		_, got, stderr := runMain(t, nil, "list", "--jobs-dir", jobs, "--format", "json")
		s := jobstore.New(jobs)
		entries, err := s.ListSummaries(true)
		if err != nil {
			t.Fatal(err)
		}
		items := make([]map[string]any, 0, len(entries))
		for _, en := range entries {
			items = append(items, jobview.ListItem(s.Dir, en))
		}
		var want bytes.Buffer
		render(&want, "json", &Result{Message: fmt.Sprintf("%d jobs in %s", len(entries), s.Dir), Items: items}, nil)
		if got != want.String() {
			t.Fatalf("got\n%s\nwant\n%s\nstderr %s", got, want.String(), stderr)
		}
	}
	check()
	writeJob(t, jobs, "a-done", jobJSON("SUCCESS", `"run": {"reason": "cost <60> & \"more\" \u2028 \u009b[2J é \u0001"}, "cost_threshold": 0.0000001`))
	writeJob(t, jobs, "b-broken", `{"status": "NOPE"}`)
	writeJob(t, jobs, "c-draft", jobJSON("DRAFT", `"time_threshold_minutes": 1e21`))
	writeJob(t, jobs, "d-sched", jobJSON("DRAFT", `"schedule": {"cron": "*/5 * * * *", "timezone": "UTC"}`))
	check()
}
