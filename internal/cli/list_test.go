package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

// logist list says of a job folder whose name is no job id that the name
// is the problem, the rule, and to rename it; of a bare manifest not yet
// placed, its file and what becomes of it: placed by logistd as which
// job, or why not and what to do.
func TestListSaysWhatFolderAndBareFileNeed(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "bad name", jobJSON("PENDING", ""))
	writeJob(t, jobs, "taken", jobJSON("PENDING", ""))
	for name, body := range map[string]string{
		"x.json":      jobJSON("PENDING", `"job_id": "fresh"`),
		"broken.json": `{"task_description": 3}`,
		"half.json":   `{"task_descr`,
		"dup.json":    jobJSON("PENDING", `"job_id": "taken"`),
		"sp ace.json": jobJSON("PENDING", ""),
	} {
		if err := os.WriteFile(filepath.Join(jobs, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := filepath.Base(jobs)
	code, out, errOut := runMain(t, nil, "list", "--jobs-dir", jobs)
	if code != 0 {
		t.Fatalf("list exit %d:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{
		`bad name +INVALID +- +- +- +folder name is not a valid job id: rename the folder \(a job id uses letters, digits`,
		`x +PENDING .* ` + base + `/x\.json: waiting for logistd to place it as job fresh$`,
		`broken +INVALID \(unplaced\) .* ` + base + `/broken\.json: waiting for logistd to place it as job broken; its manifest is invalid: `,
		`half +INVALID \(unplaced\) .* ` + base + `/half\.json: invalid JSON, cut short: logistd places it once its writer finishes it`,
		`dup +PENDING .* ` + base + `/dup\.json: not placed: job taken already exists; rename the file or change its job_id$`,
		`sp ace +PENDING .* ` + base + `/sp ace\.json: not placed: job id "sp ace" is invalid: rename the file or set a valid job_id`,
	} {
		if !regexp.MustCompile(`(?m)^` + want).MatchString(out) {
			t.Errorf("list does not match %s:\n%s", want, out)
		}
	}
	// JSON says the same of an invalid one, whole.
	_, out, _ = runMain(t, nil, "list", "--jobs-dir", jobs, "--format", "json")
	for _, want := range []string{
		`"error": "folder name is not a valid job id: rename the folder (a job id uses letters, digits, '.', '_' and '-', at most 128, no '..')"`,
		`"error": "` + base + `/half.json: invalid JSON, cut short`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("list --format json does not say %s:\n%s", want, out)
		}
	}
}
