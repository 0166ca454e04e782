package jobstore

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

const validJob = `{"job_id": "a", "task_description": "t", "agents": {
 "worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]},
 "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`

func writeJob(t *testing.T, s *Store, id, body string) {
	t.Helper()
	if err := os.MkdirAll(s.JobDir(id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.JobDir(id), ManifestFile), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A manifest checked once is not checked again while its bytes are the
// same; an edit from outside is checked in full, however small.
func TestLoadChecksAChangedFileAgain(t *testing.T) {
	t.Parallel()
	s := New(t.TempDir())
	writeJob(t, s, "a", validJob)
	if _, err := s.Load("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("a"); err != nil {
		t.Fatalf("second load: %v", err)
	}
	// Same length, schema-invalid: provider "scripx" is not a provider.
	writeJob(t, s, "a", strings.Replace(validJob, `"provider": "script"`, `"provider": "scripx"`, 1))
	if _, err := s.Load("a"); err == nil {
		t.Fatal("an invalid manifest from outside was taken from the cache")
	}
}

// What this process wrote itself needs no check when read back.
func TestWriteManifestIsTrusted(t *testing.T) {
	t.Parallel()
	s := New(t.TempDir())
	writeJob(t, s, "a", validJob)
	m, err := s.Load("a")
	if err != nil {
		t.Fatal(err)
	}
	m.Status = lifecycle.Success
	if err := s.Save(m); err != nil {
		t.Fatal(err)
	}
	if !s.WrittenHere("a") {
		t.Error("own write not recognised")
	}
	m2, err := s.Load("a")
	if err != nil || m2.Status != lifecycle.Success {
		t.Fatalf("reload: %v %v", m2, err)
	}
}

// The index serves unchanged manifests, never a changed one, and never
// indexes a file changed within indexStable (its ctime could repeat).
func TestListSummariesIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	writeJob(t, s, "a", validJob)
	writeJob(t, s, "b", strings.Replace(validJob, `"a"`, `"b"`, 1))
	es, err := s.ListSummaries(true)
	if err != nil || len(es) != 2 || es[0].Partial || es[1].Partial {
		t.Fatalf("first listing: %+v %v", es, err)
	}
	if _, err := os.Stat(filepath.Join(dir, IndexFile)); err == nil {
		t.Fatal("files changed just now were indexed")
	}
	// ctime cannot be set back; pretend the listing runs later instead.
	idx := map[string]indexEntry{}
	for _, id := range []string{"a", "b"} {
		fi, _ := os.Stat(filepath.Join(s.JobDir(id), ManifestFile))
		k, _ := statKeyOf(fi)
		m, err := s.Load(id)
		if err != nil {
			t.Fatal(err)
		}
		idx[id] = indexEntry{Key: k, Sum: summaryOf(m)}
	}
	if err := writeIndexMap(s, idx); err != nil {
		t.Fatal(err)
	}
	es, err = New(dir).ListSummaries(true)
	if err != nil || !es[0].Partial || !es[1].Partial || es[0].Sum().Status != lifecycle.Pending {
		t.Fatalf("indexed listing: %+v %v", es, err)
	}
	// Replaced (a new file, as a steward's save; a hand edit made with
	// no daemon to hear it is seen at the daemon's next scan:
	// TestHandEditSeenAtTheDaemonsScan): read again.
	if err := s.WriteManifest("b", []byte(strings.Replace(strings.Replace(validJob, `"a"`, `"b"`, 1), `"job_id"`, `"status": "DRAFT", "job_id"`, 1))); err != nil {
		t.Fatal(err)
	}
	es, err = New(dir).ListSummaries(true)
	if err != nil || es[1].Partial || es[1].Manifest.Status != lifecycle.Draft {
		t.Fatalf("changed file served from the index: %+v %v", es[1], err)
	}
	// A torn index is ignored.
	if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if es, err := New(dir).ListSummaries(true); err != nil || len(es) != 2 || es[0].Partial {
		t.Fatalf("torn index used: %+v %v", es, err)
	}
}

// A first listing (no index) keeps only the summary of a finished job it
// read in full, as the index would give it, and running jobs whole.
func TestFirstListingKeepsSummaries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	writeJob(t, s, "a", validJob)
	writeJob(t, s, "b", strings.Replace(strings.Replace(validJob, `"a"`, `"b"`, 1), `"job_id"`, `"status": "SUCCESS", "job_id"`, 1))
	time.Sleep(indexStable + 100*time.Millisecond)
	es, err := s.ListSummaries(false)
	if err != nil || len(es) != 2 {
		t.Fatalf("listing: %+v %v", es, err)
	}
	if es[0].Partial || es[0].Manifest.Status != lifecycle.Pending || len(es[0].Manifest.Agents) != 2 {
		t.Errorf("a running job was not kept whole: %+v", es[0])
	}
	full, err := s.Load("b")
	if err != nil {
		t.Fatal(err)
	}
	if !es[1].Partial || es[1].Manifest != nil || !reflect.DeepEqual(es[1].View(), summaryOf(full).manifest()) || len(es[1].View().Agents) != 0 {
		t.Errorf("a finished job kept whole, or not as the index would give it: %+v", es[1])
	}
	// The index written from this listing serves the same.
	again, err := New(dir).ListSummaries(false)
	if err != nil || !again[1].Partial || !reflect.DeepEqual(again[1].Sum(), es[1].Sum()) {
		t.Fatalf("indexed listing differs: %+v %v", again, err)
	}
}

// A listing holds a Summary, not a manifest, per finished job, whether the
// index or a full read gave it; and a start that finds an invalid manifest
// invalid again for the same reason does not rewrite the index.
func TestListingHoldsSummariesOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	done := strings.Replace(validJob, `"job_id"`, `"status": "SUCCESS", "job_id"`, 1)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		writeJob(t, s, id, strings.Replace(done, `"a"`, `"`+id+`"`, 1))
	}
	writeJob(t, s, "x-bad", `{"job_id": "x-bad", "status": "SUCCESS"}`)
	time.Sleep(indexStable + 100*time.Millisecond)
	for pass := 0; pass < 2; pass++ { // a full read, then the index
		es, err := New(dir).ListSummaries(false)
		if err != nil || len(es) != 4 {
			t.Fatalf("pass %d: %+v %v", pass, es, err)
		}
		for _, e := range es[:3] { // sorted: "x-bad" last
			if !e.Partial || e.Manifest != nil || e.Sum() == nil || e.Sum().Status != lifecycle.Success ||
				e.View().Status != lifecycle.Success || e.View().JobID != e.ID {
				t.Errorf("pass %d: %s holds more than a summary, or the wrong one: %+v", pass, e.ID, e)
			}
		}
		if e := es[3]; e.Err == nil || e.View() != nil {
			t.Errorf("pass %d: invalid manifest listed as valid: %+v", pass, e)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(dir).ListSummaries(false); err != nil {
		t.Fatal(err)
	}
	again, err := os.Stat(filepath.Join(dir, IndexFile))
	if err != nil || !os.SameFile(fi, again) {
		t.Errorf("index rewritten though nothing changed: %v", err)
	}
	// A summary is small: this bounds what a listing holds per job.
	if n := unsafe.Sizeof(Summary{}); n > 160 {
		t.Errorf("Summary is %d bytes", n)
	}
}

// A summary-only entry shows what `logist list` and the console show of
// a job, including a sandbox opt-out (merged after summaries, it was lost:
// the list's "uncontained (sandbox none)" note vanished for finished jobs).
func TestSummaryKeepsWhatListingsShow(t *testing.T) {
	t.Parallel()
	cost, minutes := 2.5, 30.0
	m := &manifest.Manifest{JobID: "j", Status: lifecycle.Success, CostThreshold: &cost, TimeThresholdMinutes: &minutes}
	m.SetPhase("work")
	m.Run.Reason, m.Run.UpdatedAt, m.Run.Sandbox = "done", "2026-11-25T10:00:00Z", "none"
	m.Metrics.CumulativeCost = 125
	v := summaryOf(m).manifest()
	if v.JobID != m.JobID || v.Status != m.Status || v.Phase() != "work" || v.Run.Reason != "done" ||
		v.Run.UpdatedAt != m.Run.UpdatedAt || v.Run.Sandbox != "none" || v.Metrics.CumulativeCost != 125 ||
		*v.CostThreshold != cost || *v.TimeThresholdMinutes != minutes {
		t.Errorf("summary view %+v lost what the listing shows of %+v", v, m)
	}
}

// The daemon's scan (ScanSummaries) summarises a finished job it finds
// outside the index without checking it (Unchecked), and indexes it so;
// running jobs are checked as always. A listing that checks (ListSummaries)
// never trusts an unchecked summary: it reads and checks the manifest,
// finds an invalid one invalid, and indexes the rest as checked.
func TestScanLeavesFinishedJobsUnchecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	job := func(id, status string) string {
		return strings.Replace(strings.Replace(validJob, `"a"`, `"`+id+`"`, 1), `"job_id"`, `"status": "`+status+`", "job_id"`, 1)
	}
	writeJob(t, s, "done", job("done", "SUCCESS"))
	// Schema-invalid ("scripx" is no provider), but it decodes.
	writeJob(t, s, "odd", strings.Replace(job("odd", "SUCCESS"), `"provider": "script"`, `"provider": "scripx"`, 1))
	writeJob(t, s, "run", job("run", "PENDING"))
	time.Sleep(indexStable + 100*time.Millisecond)
	for round := 0; round < 2; round++ { // the second from the index
		es, err := New(dir).ScanSummaries()
		if err != nil || len(es) != 3 {
			t.Fatalf("scan %d: %+v %v", round, es, err)
		}
		for _, e := range es[:2] {
			if e.Err != nil || !e.Partial || !e.Unchecked || e.Sum().Status != lifecycle.Success {
				t.Errorf("scan %d: finished job %s not summarised unchecked: %+v", round, e.ID, e)
			}
		}
		if run := es[2]; run.Unchecked || run.View() == nil || run.View().Status != lifecycle.Pending {
			t.Errorf("scan %d: a job to run was not read and checked: %+v", round, run)
		}
	}
	if _, err := New(dir).Load("odd"); err == nil {
		t.Fatal("the unchecked manifest loads")
	}
	for round := 0; round < 2; round++ { // the second from the index it wrote
		es, err := New(dir).ListSummaries(false)
		if err != nil || len(es) != 3 {
			t.Fatalf("listing %d: %+v %v", round, es, err)
		}
		if done := es[0]; done.Unchecked || done.Err != nil || done.Sum() == nil || done.Sum().Status != lifecycle.Success {
			t.Errorf("listing %d: %+v", round, done)
		}
		if odd := es[1]; odd.Unchecked || odd.Err == nil {
			t.Errorf("listing %d: an unchecked summary was trusted: %+v", round, odd)
		}
	}
	// Checked in the index now: a scan finds them checked.
	es, err := New(dir).ScanSummaries()
	if err != nil || es[0].Unchecked || !es[0].Partial || es[1].Err == nil {
		t.Fatalf("scan after a checking listing: %+v %v", es, err)
	}
}

// A display (ListSummaries(true): logist list, the console) trusts the
// scan's unchecked summaries as the index holds them, rather than
// checking every one (a minute of CPU at 50,000 jobs right after a daemon
// stopped before its late check); it leaves them unchecked, so the
// daemon's late check (ListSummaries(false)) still checks them.
func TestDisplayTrustsUncheckedSummaries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	job := func(id, status string) string {
		return strings.Replace(strings.Replace(validJob, `"a"`, `"`+id+`"`, 1), `"job_id"`, `"status": "`+status+`", "job_id"`, 1)
	}
	writeJob(t, s, "done", job("done", "SUCCESS"))
	writeJob(t, s, "odd", strings.Replace(job("odd", "SUCCESS"), `"provider": "script"`, `"provider": "scripx"`, 1))
	time.Sleep(indexStable + 100*time.Millisecond)
	if _, err := New(dir).ScanSummaries(); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		es, err := New(dir).ListSummaries(true)
		if err != nil || len(es) != 2 {
			t.Fatalf("display %d: %+v %v", round, es, err)
		}
		for _, e := range es {
			if !e.Unchecked || !e.Partial || e.Err != nil || e.Sum().Status != lifecycle.Success {
				t.Errorf("display %d: %s not shown from its unchecked summary: %+v", round, e.ID, e)
			}
		}
	}
	es, err := New(dir).ListSummaries(false)
	if err != nil || len(es) != 2 || es[0].Unchecked || es[1].Err == nil {
		t.Fatalf("the late check after a display did not check them: %+v %v", es, err)
	}
	if es, err := New(dir).ListSummaries(true); err != nil || es[0].Unchecked || es[1].Err == nil {
		t.Fatalf("display after the late check: %+v %v", es, err)
	}
}

// A display renders each job from the index's record, with no copy of its
// summary per entry (50,000 of them in a listing), and shows what the
// record holds; the daemon's listings keep a copy of their own.
func TestDisplayRendersFromTheIndexRecords(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	want := sampleEntries()
	idx := map[string]indexEntry{}
	for _, ie := range want {
		writeJob(t, s, ie.Sum.JobID, validJob)
		fi, err := os.Stat(filepath.Join(s.JobDir(ie.Sum.JobID), ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		ie.Key, _ = statKeyOf(fi)
		idx[ie.Sum.JobID] = ie
	}
	if err := writeIndexMap(s, idx); err != nil {
		t.Fatal(err)
	}
	es, err := New(dir).ListSummaries(true)
	if err != nil || len(es) != len(want) {
		t.Fatalf("display: %+v %v", es, err)
	}
	for i, e := range es {
		w := want[i]
		if w.Err != "" {
			if e.Err == nil || e.Err.Error() != w.Err || e.Sum() != nil || e.View() != nil {
				t.Errorf("%s: got %v, %+v; want the index's reason %q", e.ID, e.Err, e.Sum(), w.Err)
			}
			continue
		}
		if !e.Partial || e.Manifest != nil || e.Unchecked != w.Unchecked || !reflect.DeepEqual(e.Sum(), &w.Sum) {
			t.Errorf("%s: got %+v (unchecked %v), want %+v", e.ID, e.Sum(), e.Unchecked, w.Sum)
		}
		if e.sum != nil || e.idx == nil {
			t.Errorf("%s: the display copied the summary rather than rendering the record", e.ID)
		}
		var view manifest.Manifest
		if got := e.ViewInto(&view); !reflect.DeepEqual(got, w.Sum.manifest()) {
			t.Errorf("%s: view %+v, want %+v", e.ID, got, w.Sum.manifest())
		}
		if e.Live() != (w.Sum.Status.Active() || w.Sum.Schedule != nil) {
			t.Errorf("%s: Live %v", e.ID, e.Live())
		}
	}
	// A change to a summary read from an entry is the caller's own.
	es[0].Sum().Reason = "changed"
	if es[0].Sum().Reason != want[0].Sum.Reason {
		t.Error("Sum returned the entry's own summary")
	}
	// The daemon's listing keeps its entries' summaries, not the index.
	es, err = New(dir).ListSummaries(false)
	if err != nil || len(es) != len(want) {
		t.Fatalf("daemon's listing: %+v %v", es, err)
	}
	if e := es[0]; !e.Partial || e.idx != nil || e.sum == nil || !reflect.DeepEqual(e.Sum(), &want[0].Sum) {
		t.Errorf("daemon's listing of %s: %+v", e.ID, e)
	}
}

// A manifest whose status is none of the nine (PAUSED) is not "finished":
// the scan reads and checks it, so a display right after a daemon that
// stopped before its late check (logistd --once under load) shows it
// invalid rather than as the status it claims.
func TestScanChecksAStatusOutsideTheNine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	writeJob(t, s, "paused", strings.Replace(strings.Replace(validJob, `"a"`, `"paused"`, 1), `"job_id"`, `"status": "PAUSED", "job_id"`, 1))
	time.Sleep(indexStable + 100*time.Millisecond)
	es, err := New(dir).ScanSummaries()
	if err != nil || len(es) != 1 {
		t.Fatalf("scan: %+v %v", es, err)
	}
	if e := es[0]; e.Unchecked || e.Err == nil {
		t.Fatalf("scan: a status outside the nine was summarised unchecked: %+v", e)
	}
	es, err = New(dir).ListSummaries(true)
	if err != nil || len(es) != 1 || es[0].Err == nil || !strings.Contains(es[0].Err.Error(), "status") {
		t.Fatalf("display: %+v %v", es, err)
	}
}

// A git job whose manifest names no id takes its folder's, which must
// make a job branch git will name.
func TestGitJobFolderNameMakesABranch(t *testing.T) {
	t.Parallel()
	s := New(t.TempDir())
	git := strings.Replace(validJob, `{"job_id": "a", `, `{"workspace": {"git": {"repo": "/r"}}, `, 1)
	writeJob(t, s, "foo.lock", git)
	var e *manifest.Error
	if _, err := s.Load("foo.lock"); !errors.As(err, &e) || e.Pointer != "/job_id" || !strings.Contains(e.Reason, "the folder's name: job id \"foo.lock\" ends in \".lock\"") {
		t.Errorf("git job in folder foo.lock: %v", err)
	}
	writeJob(t, s, "bar.lock", strings.Replace(validJob, `{"job_id": "a", `, `{`, 1))
	if _, err := s.Load("bar.lock"); err != nil {
		t.Errorf("a job without a git workspace in folder bar.lock: %v", err)
	}
}
