package jobstore

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// writeIndexMap writes entries as the index, with a mark no listing
// trusts without a stat per manifest.
func writeIndexMap(s *Store, entries map[string]indexEntry) error {
	return s.writeIndex(indexMark{}, 0, func(add func(*indexEntry)) {
		for _, id := range slices.Sorted(maps.Keys(entries)) {
			e := entries[id]
			add(&e)
		}
	})
}

func encodeIndex(t testing.TB, mark indexMark, es []indexEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	x := newIndexWriter(&b)
	for i := range es {
		x.add(&es[i])
	}
	if err := x.close(mark); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func sampleEntries() []indexEntry {
	cost, minutes, deadline := 2.5, 30.0, 60.0
	return []indexEntry{
		{Key: statKey{1, 2, 3, 4}, Sum: Summary{JobID: "a", Status: lifecycle.Success, Phase: "work", Reason: "done ✓",
			UpdatedAt: "2026-11-25T10:00:00Z", Sandbox: "none", EncryptHistory: true, CostThreshold: &cost, TimeThresholdMinutes: &minutes,
			Metrics: manifest.Metrics{CumulativeCost: 125.5, CumulativeTimeSeconds: 3.25, AgentCalls: 7}}},
		{Key: statKey{5, 6, 7, 8}, Sum: Summary{JobID: "b"}, Err: "job.json: /status: not a status"},
		{Key: statKey{9, 10, 11, 12}, Sum: Summary{JobID: "c", Status: lifecycle.Pending, Sandbox: "none",
			Schedule: &manifest.Schedule{Cron: "*/5 * * * *", Timezone: "UTC", StartingDeadlineSeconds: &deadline, Suspend: true}}},
		{Key: statKey{13, 14, 15, 16}, Sum: Summary{JobID: "d", Status: lifecycle.Success, Phase: "work"}, Unchecked: true},
	}
}

// Every field a listing shows comes back from the file as it went in,
// and so does the mark that says whether the index is current.
func TestIndexRoundTrip(t *testing.T) {
	t.Parallel()
	mark := indexMark{Checker: [32]byte{1}, Dir: statKey{21, 22, 23, 24}, Gen: 42, Off: 99, Boot: [16]byte{7}, CheckedBy: [16]byte{8}}
	es := sampleEntries()
	v, err := parseIndex(encodeIndex(t, mark, es))
	if err != nil {
		t.Fatal(err)
	}
	if v.mark != mark || v.n != len(es) {
		t.Fatalf("mark %+v n %d", v.mark, v.n)
	}
	for _, want := range es {
		i := v.find(want.Sum.JobID)
		if i < 0 {
			t.Fatalf("%s not found", want.Sum.JobID)
		}
		if got := v.entry(i); !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v", want.Sum.JobID, got, want)
		}
	}
	if v.find("0") != -1 || v.find("bb") != -1 || v.find("z") != -1 {
		t.Error("found an id not in the index")
	}
	var b bytes.Buffer
	x := newIndexWriter(&b)
	x.add(&es[1])
	x.add(&es[0])
	if x.close(mark) == nil {
		t.Error("ids out of order were written")
	}
}

// A torn, truncated or altered index is no index: never trusted.
func TestIndexTornIsRejected(t *testing.T) {
	t.Parallel()
	b := encodeIndex(t, indexMark{Gen: 1}, sampleEntries())
	for n := 0; n < len(b); n += 1 + n/8 {
		if _, err := parseIndex(b[:n]); err == nil {
			t.Fatalf("cut at %d of %d accepted", n, len(b))
		}
	}
	for i := 0; i < len(b); i += 7 {
		c := bytes.Clone(b)
		c[i] ^= 0x40
		if _, err := parseIndex(c); err == nil {
			t.Fatalf("a byte changed at %d accepted", i)
		}
	}
}

func FuzzParseIndex(f *testing.F) {
	f.Add(encodeIndex(f, indexMark{Gen: 1}, sampleEntries()))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := parseIndex(b)
		if err != nil {
			return
		}
		for i := 0; i < v.n; i++ {
			e := v.entry(i)
			if v.find(e.Sum.JobID) != i {
				t.Fatalf("record %d not found by its id %q", i, e.Sum.JobID)
			}
		}
	})
}

func stableJobs(t *testing.T, s *Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		writeJob(t, s, id, strings.Replace(strings.Replace(validJob, `"a"`, `"`+id+`"`, 1), `"job_id"`, `"status": "SUCCESS", "job_id"`, 1))
	}
	time.Sleep(indexStable + 100*time.Millisecond)
}

func statusOf(t *testing.T, es []Entry, id string) lifecycle.Status {
	t.Helper()
	for _, e := range es {
		if e.ID == id {
			if e.Err != nil {
				return "INVALID"
			}
			return e.View().Status
		}
	}
	return ""
}

// A job changed without the daemon (a steward's command saves through a
// Store) shows in the next listing, which trusts the index for the rest
// without a stat of each manifest; the folder's own changes (a new job, a
// job removed) show too.
func TestListSeesAJobChangedWithoutTheDaemon(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	stableJobs(t, s, "a", "b")
	for i := 0; i < 2; i++ { // the index, then its folder mark once stable
		if _, err := New(dir).ListSummaries(true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(indexStable + 100*time.Millisecond)
	}
	if _, err := New(dir).ListSummaries(true); err != nil {
		t.Fatal(err)
	}
	if v := s.readIndex(); v == nil || v.mark.Dir == (statKey{}) || v.mark.Gen == 0 {
		t.Fatalf("no current index: %+v", v)
	}
	m, err := New(dir).Load("b")
	if err != nil {
		t.Fatal(err)
	}
	m.Status = lifecycle.Canceled
	if err := New(dir).Save(m); err != nil { // another process's Store
		t.Fatal(err)
	}
	es, err := New(dir).ListSummaries(true)
	if err != nil || statusOf(t, es, "b") != lifecycle.Canceled || statusOf(t, es, "a") != lifecycle.Success {
		t.Fatalf("the change was not listed: %+v %v", es, err)
	}
	// Again from the index the listing wrote.
	if es, err := New(dir).ListSummaries(true); err != nil || statusOf(t, es, "b") != lifecycle.Canceled {
		t.Fatalf("relisted: %+v %v", es, err)
	}
	// A new job and a removed one change the folder itself.
	writeJob(t, s, "c", strings.Replace(validJob, `"a"`, `"c"`, 1))
	if err := os.RemoveAll(s.JobDir("a")); err != nil {
		t.Fatal(err)
	}
	es, err = New(dir).ListSummaries(true)
	if err != nil || len(es) != 2 || es[0].ID != "b" || es[1].ID != "c" || statusOf(t, es, "c") != lifecycle.Pending {
		t.Fatalf("the folder's changes were not listed: %+v %v", es, err)
	}
}

// A hand edit made while no daemon runs bypasses the journal: a display
// trusts the index until the daemon's scan, which stats every manifest,
// sees the edit and indexes it. (A daemon that runs hears the edit and
// journals it: TestHandEditJournaled in internal/daemon.)
func TestHandEditSeenAtTheDaemonsScan(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	stableJobs(t, s, "a")
	if _, err := New(dir).ListSummaries(true); err != nil {
		t.Fatal(err)
	}
	writeJob(t, s, "a", strings.Replace(validJob, `"job_id"`, `"status": "CANCELED", "job_id"`, 1))
	es, err := New(dir).ScanSummaries()
	if err != nil || statusOf(t, es, "a") != lifecycle.Canceled {
		t.Fatalf("the scan missed a hand edit: %+v %v", es, err)
	}
	time.Sleep(indexStable + 100*time.Millisecond)
	if _, err := New(dir).ScanSummaries(); err != nil {
		t.Fatal(err)
	}
	if es, err := New(dir).ListSummaries(true); err != nil || statusOf(t, es, "a") != lifecycle.Canceled {
		t.Fatalf("a listing after the scan: %+v %v", es, err)
	}
}

// An index whose journal is not the current one (another generation, a
// journal removed) or that was written in another boot is checked with a
// stat per manifest, never trusted as it stands.
func TestIndexNotCurrentIsChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	stableJobs(t, s, "a")
	if _, err := New(dir).ListSummaries(true); err != nil {
		t.Fatal(err)
	}
	v := s.readIndex()
	if v == nil || v.mark.Gen == 0 {
		t.Fatal("no index")
	}
	edit := func(status string) {
		t.Helper()
		writeJob(t, s, "a", strings.Replace(validJob, `"job_id"`, `"status": "`+status+`", "job_id"`, 1))
		time.Sleep(indexStable + 100*time.Millisecond)
	}
	rewrite := func(mark indexMark) {
		t.Helper()
		if err := s.writeIndex(mark, 0, func(add func(*indexEntry)) {
			e := v.entry(0)
			add(&e)
		}); err != nil {
			t.Fatal(err)
		}
	}
	mark := v.mark
	mark.Boot[0] ^= 1
	rewrite(mark)
	edit("CANCELED")
	if es, err := New(dir).ListSummaries(true); err != nil || statusOf(t, es, "a") != lifecycle.Canceled {
		t.Fatalf("an index of another boot was trusted: %+v %v", es, err)
	}
	v = s.readIndex()
	if err := os.Remove(s.changesPath()); err != nil {
		t.Fatal(err)
	}
	edit("DRAFT")
	if es, err := New(dir).ListSummaries(true); err != nil || statusOf(t, es, "a") != lifecycle.Draft {
		t.Fatalf("an index without its journal was trusted: %+v %v", es, err)
	}
}

// A grown journal is replaced by a new generation, and what is written
// after still shows.
func TestJournalRenewed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	stableJobs(t, s, "a")
	if _, err := New(dir).ListSummaries(true); err != nil {
		t.Fatal(err)
	}
	gen := s.readIndex().mark.Gen
	f, err := os.OpenFile(s.changesPath(), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(bytes.Repeat([]byte("zz\n"), journalMax/3+1)); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if _, err := New(dir).ListSummaries(true); err != nil {
		t.Fatal(err)
	}
	v := s.readIndex()
	if fi, err := os.Stat(s.changesPath()); err != nil || fi.Size() != journalHeader || v.mark.Gen == gen || v.mark.Off != journalHeader {
		t.Fatalf("journal not renewed: %v %+v", err, v.mark)
	}
	m, err := s.Load("a")
	if err != nil {
		t.Fatal(err)
	}
	m.Status = lifecycle.Canceled
	if err := New(dir).Save(m); err != nil {
		t.Fatal(err)
	}
	if es, err := New(dir).ListSummaries(true); err != nil || statusOf(t, es, "a") != lifecycle.Canceled {
		t.Fatalf("a change after the renewal: %+v %v", es, err)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir, IndexDir)); len(entries) != 2 {
		t.Errorf("left behind in %s: %v", IndexDir, entries)
	}
}

// The daemon's scan takes the reason an index gives for an invalid
// manifest only if this program found it; one another build found is
// checked again (its checks may differ).
func TestInvalidTrustedOnlyFromTheSameProgram(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := New(dir)
	stableJobs(t, s, "x")
	fi, err := os.Stat(filepath.Join(s.JobDir("x"), ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	k, _ := statKeyOf(fi)
	for _, c := range []struct {
		by      [16]byte
		invalid bool
	}{{[16]byte{1}, false}, {checkedBy(), true}} {
		if err := s.writeIndex(indexMark{CheckedBy: c.by}, 0, func(add func(*indexEntry)) {
			add(&indexEntry{Key: k, Sum: Summary{JobID: "x"}, Err: "found invalid before"})
		}); err != nil {
			t.Fatal(err)
		}
		es, err := New(dir).ScanSummaries()
		if err != nil || len(es) != 1 || (es[0].Err != nil) != c.invalid {
			t.Errorf("checked by %x: %+v %v", c.by, es, err)
		}
	}
}
