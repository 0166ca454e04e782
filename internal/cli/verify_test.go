package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/testkit"
)

// verifiedJobs runs jobs ids to their end, signed, and copies them with
// the public key (not the private one) into a jobs folder other users
// may read: what logist verify reads as whoever runs it.
func verifiedJobs(t *testing.T, ids ...string) string {
	t.Helper()
	f := testkit.New(t)
	f.Sign()
	f.Runner = runner.NewEngine(f.Env, builtins.Effects())
	for _, id := range ids {
		f.WriteJob(id, map[string]any{})
		f.Run(id)
	}
	jobs, err := os.MkdirTemp("", "logist-cli-verify-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(jobs) }) // best effort: a temporary folder
	for _, id := range ids {
		if err := os.CopyFS(filepath.Join(jobs, id), os.DirFS(filepath.Join(f.Dir, id))); err != nil {
			t.Fatal(err)
		}
	}
	pub, err := os.ReadFile(filepath.Join(f.Dir, signing.Dir, signing.PublicFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jobs, "signing.pub"), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(jobs, 0o755); err != nil {
		t.Fatal(err)
	}
	return jobs
}

// verify --all reports a job whose files this user may not read, and
// counts it, without stopping: the jobs after it are verified, and it
// exits 1 as a failed verification does (not 3: the others could be
// read). A manifest it may not read is not verified (its workflow
// unknown); a history it may not read is not a failed one.
func TestVerifyAllGoesOnPastUnreadableJobs(t *testing.T) {
	jobs := verifiedJobs(t, "a", "b", "c", "d")
	deny := []string{
		filepath.Join(jobs, "b", jobstore.ManifestFile),
		filepath.Join(jobs, "b", history.FileName),
		filepath.Join(jobs, "c", history.FileName),
	}
	for _, p := range deny {
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, p := range deny {
			os.Chmod(p, 0o600) //nolint:errcheck // best effort: RemoveAll follows
		}
	})
	key := filepath.Join(jobs, "signing.pub")

	code, out, errs := runAsOther(t, "--jobs-dir", jobs, "verify", "--all", "--key", key)
	for _, want := range []string{
		`^OK +a +\d+ records; chain, signatures`,
		`^UNREADABLE +b +could not be read: permission denied on job.json \(run logist as the user that runs logistd\)$`,
		`^UNREADABLE +c +could not be read: read history: open history.jsonl: permission denied \(run logist as the user that runs logistd\)$`,
		`^OK +d +\d+ records; chain, signatures`,
		`^4 jobs in \S+: 2 verified intact, 0 failed verification, 2 could not be read$`,
	} {
		if !regexp.MustCompile("(?m)" + want).MatchString(out) {
			t.Errorf("verify --all: no line %s", want)
		}
	}
	if code != ExitUsage || errs != "" || strings.Count(out, "\n") != 5 {
		t.Errorf("verify --all: exit %d (want %d), %d lines\n%s%s", code, ExitUsage, strings.Count(out, "\n"), out, errs)
	}

	code, out, _ = runAsOther(t, "--jobs-dir", jobs, "verify", "--all", "--key", key, "--format", "json")
	var doc struct {
		OK    bool `json:"ok"`
		Items []struct {
			JobID   string `json:"job_id"`
			Result  string `json:"result"`
			Error   string `json:"error"`
			Records *int   `json:"records"`
		} `json:"items"`
		Summary map[string]int `json:"summary"`
		Error   struct {
			Code     string `json:"code"`
			ExitCode int    `json:"exit_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("verify --all --format json: not one JSON document: %v\n%s", err, out)
	}
	var got []string
	for _, it := range doc.Items {
		got = append(got, it.JobID+":"+it.Result)
	}
	if code != ExitUsage || doc.OK || doc.Error.Code != "invalid" || doc.Error.ExitCode != ExitUsage ||
		strings.Join(got, " ") != "a:intact b:unreadable c:unreadable d:intact" ||
		doc.Summary["jobs"] != 4 || doc.Summary["intact"] != 2 || doc.Summary["unreadable"] != 2 || doc.Summary["failed"] != 0 ||
		doc.Items[1].Records != nil || doc.Items[2].Records == nil || !strings.Contains(doc.Items[2].Error, "permission denied") {
		t.Errorf("verify --all --format json: exit %d, items %v, summary %v, error %+v\n%s", code, got, doc.Summary, doc.Error, out)
	}
}

// A job this user may not read is reported so by every command about one
// job, whichever of its files refused first (its folder, as root's 0700
// one refuses another user; its manifest; its history): the job and the
// path named, whom to run logist as, exit 3 (permission_denied), never
// "not found": the job may well be there, readable by logistd's user. A
// job that is not there is still not found.
func TestSingleJobCommandsReportAnUnreadableJob(t *testing.T) {
	jobs := verifiedJobs(t, "a", "b", "c")
	folder := os.FileMode(0o700) // root's job folder: nobody may not enter it
	if os.Geteuid() != 0 {
		folder = 0 // this user owns it: only a mode binds it
	}
	deny := map[string]os.FileMode{
		filepath.Join(jobs, "a"):                        folder,
		filepath.Join(jobs, "b", jobstore.ManifestFile): 0,
		filepath.Join(jobs, "c", history.FileName):      0,
	}
	for p, mode := range deny {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for p := range deny {
			os.Chmod(p, 0o700) //nolint:errcheck // best effort: RemoveAll follows
		}
	})
	key := filepath.Join(jobs, "signing.pub")
	refused := map[string]string{
		"a": filepath.Join(jobs, "a", jobstore.ManifestFile),
		"b": filepath.Join(jobs, "b", jobstore.ManifestFile),
		"c": filepath.Join(jobs, "c", history.FileName),
	}
	for _, c := range []struct {
		job  string
		args []string
	}{
		{"a", []string{"status"}}, {"a", []string{"history"}}, {"a", []string{"logs"}},
		{"a", []string{"verify", "--key", key}}, {"a", []string{"result"}}, {"a", []string{"discarded"}},
		{"a", []string{"diff"}}, {"a", []string{"history", "--record", "1"}},
		{"b", []string{"verify", "--key", key}}, {"b", []string{"status"}}, {"b", []string{"result"}},
		{"c", []string{"verify", "--key", key}}, {"c", []string{"history"}}, {"c", []string{"logs"}},
	} {
		args := append([]string{"--jobs-dir", jobs, c.args[0], c.job}, c.args[1:]...)
		code, out, errs := runAsOther(t, args...)
		if code != ExitPermission || !strings.Contains(errs, "job "+c.job+" could not be read by ") ||
			!strings.Contains(errs, "permission denied on "+refused[c.job]) ||
			!strings.Contains(errs, "run logist as the user that runs logistd") || strings.Contains(out+errs, "not found") {
			t.Errorf("%v: exit %d, want %d saying job %s could not be read (%s)\n%s%s", c.args, code, ExitPermission, c.job, refused[c.job], out, errs)
		}
	}
	code, out, _ := runAsOther(t, "--jobs-dir", jobs, "verify", "a", "--key", key, "--format", "json")
	if code != ExitPermission || !strings.Contains(out, `"code": "permission_denied"`) || !strings.Contains(out, "job a could not be read") {
		t.Errorf("verify --format json: exit %d\n%s", code, out)
	}
	for _, args := range [][]string{{"status", "zz"}, {"history", "zz"}, {"logs", "zz"}, {"verify", "zz", "--key", key}} {
		code, out, errs := runAsOther(t, append([]string{"--jobs-dir", jobs}, args...)...)
		if code != ExitNotFound || !strings.Contains(errs, "job zz not found") {
			t.Errorf("%v: exit %d, want %d (not found)\n%s%s", args, code, ExitNotFound, out, errs)
		}
	}
}

// verify JOB... goes on past a job it cannot read or find, as verify
// --all does: each job has its line. A history that failed its checks
// decides the exit code (1, as for --all); with none, it is ExitCode's of
// the jobs' errors joined (permission denied before not found).
func TestVerifyNamedJobsGoOnPastUnreadableJobs(t *testing.T) {
	jobs := verifiedJobs(t, "a", "b", "c", "d")
	deny := filepath.Join(jobs, "b", history.FileName)
	if err := os.Chmod(deny, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(deny, 0o600) }) //nolint:errcheck // best effort: RemoveAll follows
	hist := filepath.Join(jobs, "d", history.FileName)
	b, err := os.ReadFile(hist)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"SYSTEM"`) {
		t.Fatalf("d's history has no SYSTEM record to tamper with:\n%s", b)
	}
	if err := os.WriteFile(hist, []byte(strings.Replace(string(b), `"SYSTEM"`, `"SYSTEX"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(jobs, "signing.pub")

	for _, c := range []struct {
		jobs  []string
		code  int
		lines []string
	}{
		{[]string{"a", "b", "zz", "c", "d"}, ExitUsage, []string{
			`^a +\d+ +intact: chain, signatures`,
			`^b +- +UNREADABLE: job b could not be read by \S+: permission denied on \S+history.jsonl`,
			`^zz +- +NOT FOUND: job zz not found in `,
			`^c +\d+ +intact: chain, signatures`,
			`^d +\d+ +FAILED: `,
		}},
		{[]string{"zz", "a", "d"}, ExitUsage, []string{`^zz +- +NOT FOUND: `, `^a +\d+ +intact`, `^d +\d+ +FAILED: `}},
		{[]string{"zz", "a", "b"}, ExitPermission, []string{`^zz +- +NOT FOUND: `, `^a +\d+ +intact`, `^b +- +UNREADABLE: `}},
		{[]string{"zz", "a"}, ExitNotFound, []string{`^zz +- +NOT FOUND: `, `^a +\d+ +intact`}},
		{[]string{"d", "a"}, ExitUsage, []string{`^d +\d+ +FAILED: `, `^a +\d+ +intact`}},
		{[]string{"a", "c"}, ExitOK, []string{`^a +\d+ +intact`, `^c +\d+ +intact`}},
	} {
		args := append([]string{"--jobs-dir", jobs, "verify", "--key", key}, c.jobs...)
		code, out, errs := runAsOther(t, args...)
		for _, want := range c.lines {
			if !regexp.MustCompile("(?m)" + want).MatchString(out) {
				t.Errorf("verify %v: no line %s", c.jobs, want)
			}
		}
		if code != c.code || strings.Count(out, "\n") != len(c.jobs)+1 {
			t.Errorf("verify %v: exit %d (want %d), %d lines\n%s%s", c.jobs, code, c.code, strings.Count(out, "\n"), out, errs)
		}
	}

	code, out, _ := runAsOther(t, "--jobs-dir", jobs, "verify", "--key", key, "a", "b", "zz", "--format", "json")
	var doc struct {
		OK    bool `json:"ok"`
		Items []struct {
			JobID string `json:"job_id"`
		} `json:"items"`
		Error struct {
			Code     string `json:"code"`
			ExitCode int    `json:"exit_code"`
			Message  string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("verify --format json: not one JSON document: %v\n%s", err, out)
	}
	if code != ExitPermission || doc.OK || doc.Error.Code != "permission_denied" || doc.Error.ExitCode != ExitPermission ||
		len(doc.Items) != 1 || !strings.Contains(doc.Error.Message, "job b could not be read") || !strings.Contains(doc.Error.Message, "job zz not found") {
		t.Errorf("verify --format json: exit %d, %+v\n%s", code, doc, out)
	}
}

// verify --all over a jobs folder logistd has not run over yet (no key,
// no job) reports 0 jobs and exits 0: a check set up before the daemon's
// first start is not an alarm. With a job there, or a --key named, a
// missing key is still an error (exit 4).
func TestVerifyAllOnAJobsFolderWithNoJobYet(t *testing.T) {
	jobs := t.TempDir()
	code, out, errs := runMain(t, nil, "--jobs-dir", jobs, "verify", "--all")
	if code != 0 || !strings.Contains(out, "0 jobs in ") || errs != "" {
		t.Errorf("verify --all on an empty jobs folder: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runMain(t, nil, "--jobs-dir", jobs, "verify", "--all", "--key", filepath.Join(jobs, "none.pub"))
	if code != ExitNotFound {
		t.Errorf("verify --all --key MISSING: exit %d, want %d\n%s%s", code, ExitNotFound, out, errs)
	}
	f := testkit.New(t)
	f.WriteJob("a", map[string]any{})
	code, out, errs = runMain(t, nil, "--jobs-dir", f.Dir, "verify", "--all")
	if code != ExitNotFound || !strings.Contains(errs+out, "signing.pub") {
		t.Errorf("verify --all with a job and no key: exit %d, want %d\n%s%s", code, ExitNotFound, out, errs)
	}
}
