package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// logist history shows its first page (the last historyPage interactions,
// read from the end of the history) in text output unless told --last;
// --last 0 and --format json give every interaction (issue 21's goal 4).
func TestHistoryFirstPageByDefault(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "long", jobJSON("RUNNING", `"current_phase": "work"`))
	l, _, err := history.OpenWith(jobstore.New(jobs).JobDir("long"), history.Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const calls = historyPage + 10
	for i := range calls {
		in := i
		if err := l.AppendBatch([]*history.Record{
			{Type: history.TypeIntent, Role: "worker", Phase: "work", Interaction: &in, Attempt: 1},
			{Type: history.TypeResponse, Role: "worker", Phase: "work", Interaction: &in,
				Response: &history.Response{Status: history.StatusSuccess, Action: "RETRY", Summary: "again"}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(out string) int { return strings.Count(out, " RETRY ") }
	code, out, errOut := runMain(t, nil, "history", "long", "--jobs-dir", jobs)
	if code != 0 || rows(out) != historyPage || !strings.Contains(out, "--last 0 shows all") {
		t.Fatalf("history exit %d, %d rows, want the last %d and a word on --last 0:\n%s%s", code, rows(out), historyPage, out, errOut)
	}
	if _, out, _ = runMain(t, nil, "history", "long", "--jobs-dir", jobs, "--last", "0"); rows(out) != calls {
		t.Errorf("--last 0: %d rows, want %d:\n%s", rows(out), calls, out)
	}
	if _, out, _ = runMain(t, nil, "history", "long", "--jobs-dir", jobs, "--last", "5"); rows(out) != 5 {
		t.Errorf("--last 5: %d rows, want 5:\n%s", rows(out), out)
	}
	_, out, _ = runMain(t, nil, "history", "long", "--jobs-dir", jobs, "--format", "json")
	var doc struct {
		Interactions []json.RawMessage `json:"interactions"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Interactions) != calls {
		t.Errorf("--format json: %d interactions (%v), want %d:\n%.500s", len(doc.Interactions), err, calls, out)
	}
}
