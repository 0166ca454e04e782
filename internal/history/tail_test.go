package history

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/logist/logist/internal/signing"
)

// LastResponse finds the newest answer (or the newest with warnings:
// status shows them) at the end of the history, past the records that follow it, and never one of a
// unit a writer has not finished.
func TestLastResponse(t *testing.T) {
	dir := t.TempDir()
	if _, ok := LastResponse(dir); ok {
		t.Fatal("LastResponse found an answer in a folder without history")
	}
	l := open(t, dir)
	first := response(0, "worker", "COMPLETED")
	second := response(1, "supervisor", "RETRY")
	second.Response.Warnings = []string{`evidence file "gone.txt" does not exist in the workspace`}
	appendAll(t, l, intent(0, "worker"), first, intent(1, "supervisor"), second,
		&Record{Type: TypeTransition, Transition: &Transition{From: "REVIEWING", To: "RUNNING", Event: "phase_retry", Actor: "supervisor"}})
	r, ok := LastResponse(dir)
	if !ok || r.Role != "supervisor" || len(r.Response.Warnings) != 1 || r.Response.Warnings[0] != second.Response.Warnings[0] {
		t.Fatalf("LastResponse = %+v, %v; want the supervisor's answer with its warning", r, ok)
	}
	// The newest answer that had warnings, past one that had none.
	appendAll(t, l, intent(2, "worker"), response(2, "worker", "COMPLETED"))
	if r, ok := LastWarned(dir); !ok || r.Role != "supervisor" {
		t.Fatalf("LastWarned = %+v, %v; want the supervisor's answer", r, ok)
	}
	if r, ok := LastResponse(dir); !ok || r.Role != "worker" {
		t.Fatalf("LastResponse = %+v, %v; want the worker's last answer", r, ok)
	}

	// A unit cut short (its records say more follow) does not count.
	unfinished := response(3, "worker", "COMPLETED")
	unfinished.More, unfinished.V, unfinished.Seq = true, RecordVersion, 7
	line, _, err := encodeLine(unfinished, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(Path(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(line); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if r, ok := LastResponse(dir); !ok || r.Interaction == nil || *r.Interaction != 2 {
		t.Fatalf("LastResponse = %+v, %v; want interaction 2, not the unfinished unit's", r, ok)
	}
}

// ReadLast returns the suffix of the history from the n-th newest intent,
// as ReadAll would have it, from the active file alone or, when that
// holds fewer calls, from the whole history.
func TestReadLast(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	richHistory(t, l, 0, 400) // rotates: archives and an active file
	l.Close()
	all, err := ReadAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	intents := 0
	for _, r := range all {
		if r.Type == TypeIntent {
			intents++
		}
	}
	for _, calls := range []int{1, 2, 7, 50, 399, intents, intents + 5} {
		got, whole, err := ReadLast(dir, calls)
		if err != nil {
			t.Fatal(err)
		}
		want, wantWhole := all, true
		seen := 0
		for i := len(all) - 1; i >= 0; i-- {
			if all[i].Type == TypeIntent {
				if seen++; seen == calls {
					want, wantWhole = all[i:], i == 0
					break
				}
			}
		}
		if whole != wantWhole || len(got) != len(want) || got[0].Seq != want[0].Seq || got[len(got)-1].Seq != want[len(want)-1].Seq {
			t.Fatalf("calls %d: %d records from %d (whole %v), want %d from %d (whole %v)",
				calls, len(got), got[0].Seq, whole, len(want), want[0].Seq, wantWhole)
		}
	}
	// A unit a writer has not finished is not part of the page.
	f, err := os.OpenFile(Path(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	line, _, err := encodeLine(&Record{V: RecordVersion, Seq: all[len(all)-1].Seq + 1, Type: TypeIntent, Interaction: ip(9999), More: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(line); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, _, err := ReadLast(dir, 1)
	if err != nil || got[len(got)-1].Seq != all[len(all)-1].Seq {
		t.Fatalf("unfinished unit: %v, last %d", err, got[len(got)-1].Seq)
	}
}

// ReadLast on one long active file: its blocks cut lines and units (and a
// line longer than the first block) anywhere, and a torn last line is
// left out; each page is exactly ReadAll's suffix from the calls-th newest
// intent, record for record.
func TestReadLastLongFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	richHistory(t, l, 0, 500)
	in := l.NewInteraction()
	if err := l.Append(&Record{Type: TypeIntent, Interaction: ip(in), Phase: "work", Role: "worker",
		Request: &Request{Prompt: strings.Repeat("long ", 30<<10)}}); err != nil {
		t.Fatal(err)
	}
	richHistory(t, l, 500, 20)
	l.Close()
	check := func(label string) {
		t.Helper()
		all, err := ReadAll(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, calls := range []int{1, 2, 3, 20, 21, 22, 50, 199, 400, 522, 523, 600} {
			got, whole, err := ReadLast(dir, calls)
			if err != nil {
				t.Fatal(err)
			}
			want, wantWhole := all, true
			seen := 0
			for i := len(all) - 1; i >= 0; i-- {
				if all[i].Type == TypeIntent {
					if seen++; seen == calls {
						want, wantWhole = all[i:], i == 0
						break
					}
				}
			}
			if whole != wantWhole || len(got) != len(want) {
				t.Fatalf("%s, calls %d: %d records (whole %v), want %d (whole %v)", label, calls, len(got), whole, len(want), wantWhole)
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], want[i]) {
					t.Fatalf("%s, calls %d: record %d is seq %d %s, want seq %d %s", label, calls, i, got[i].Seq, got[i].Type, want[i].Seq, want[i].Type)
				}
			}
		}
	}
	check("whole")
	f, err := os.OpenFile(Path(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"v":1,"seq":99999,"type":"intent","interaction":9`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	check("torn last line")
}

// LastCommitSeal is LastCommitEntry's commit with its signed envelope,
// past the records after it, never a unit a writer has not finished, and
// nothing when the newest commit is beyond a line that is no record.
func TestLastCommitSeal(t *testing.T) {
	t.Parallel()
	key, err := signing.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, ok := LastCommitSeal(dir); ok {
		t.Fatal("a seal in a folder without history")
	}
	l, _, err := OpenWith(dir, Options{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	commit := func(sum string) []*Record {
		return []*Record{benchRecord(0), {Type: TypeTransition, Phase: "review", Transition: &Transition{From: "RUNNING", To: "REVIEWING"},
			Commit: &Commit{Sum: sum, Base: "b", Manifest: []byte(`{"a":1}`)}}}
	}
	for _, sum := range []string{"first", "second"} {
		if err := l.AppendBatch(commit(sum)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Append(benchRecord(1)); err != nil {
		t.Fatal(err)
	}
	check := func(wantSum string) {
		t.Helper()
		e, eok := LastCommitEntry(dir)
		s, ok := LastCommitSeal(dir)
		if !eok || !ok || e.Commit.Sum != wantSum || s.Sum != wantSum || s.Hash != e.Hash || s.Sig != e.Sig || s.Key != e.Key ||
			!bytes.Equal(s.Body, e.Body) || s.Key != key.ID() || len(s.Body) == 0 {
			t.Fatalf("seal %+v (%v), entry %+v (%v); want the commit %q", s, ok, e, eok, wantSum)
		}
	}
	check("second")
	// A unit cut short: its commit does not count.
	cut := commit("cut")
	cut[1].More, cut[1].V, cut[1].Seq = true, RecordVersion, 99
	line, _, err := encodeLine(cut[1], key)
	if err != nil {
		t.Fatal(err)
	}
	appendRaw(t, dir, line)
	check("second")
	// A line that is no record ends the search, as for LastCommitEntry.
	appendRaw(t, dir, []byte(`{"rec": {"v": 2}}`+"\n"))
	if _, ok := LastCommitSeal(dir); ok {
		t.Fatal("a seal past a line that is no record")
	}
	if _, ok := LastCommitEntry(dir); ok {
		t.Fatal("an entry past a line that is no record")
	}
}

func appendRaw(t *testing.T, dir string, line []byte) {
	t.Helper()
	f, err := os.OpenFile(Path(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(line); err != nil {
		t.Fatal(err)
	}
}

// ReadLast counts interactions, not intents: an interrupted call asked
// again (a second intent, attempt 2, under the same interaction number)
// is one interaction, and its page starts at its first attempt, so the
// records of its cut (AGENT_INTERRUPTED) are on the page that shows it,
// from the active file and from the whole history alike; a new call of
// attempt 2 (after a failed one) starts its own page.
func TestReadLastKeepsAnInterruptedCallWhole(t *testing.T) {
	t.Parallel()
	for _, maxBytes := range []int64{-1, 2 << 10} { // one active file; archives
		dir := t.TempDir()
		l, _, err := OpenWith(dir, Options{MaxBytes: maxBytes})
		if err != nil {
			t.Fatal(err)
		}
		cut := func(n int) []*Record {
			return []*Record{intent(n, "worker"),
				{Type: TypeError, Role: "worker", Phase: "work", Error: &ErrorInfo{Code: "AGENT_INTERRUPTED", Message: "cut"}}}
		}
		again := func(n int) *Record { r := intent(n, "worker"); r.Attempt = 2; return r }
		for n := range 8 {
			switch n {
			case 3, 5: // interrupted, asked again
				appendAll(t, l, cut(n)...)
				appendAll(t, l, again(n))
			case 6: // the first call after a failed one: attempt 2, its own interaction
				appendAll(t, l, again(n))
			default:
				appendAll(t, l, intent(n, "worker"))
			}
			appendAll(t, l, response(n, "worker", "RETRY"))
		}
		l.Close()
		all, err := ReadAll(dir)
		if err != nil {
			t.Fatal(err)
		}
		// Interaction k's first intent, for the page of the last 8-k.
		firstOf := map[int]int64{}
		for _, r := range all {
			if r.Type != TypeIntent {
				continue
			}
			if _, ok := firstOf[*r.Interaction]; !ok {
				firstOf[*r.Interaction] = r.Seq
			}
		}
		for calls := 1; calls <= 9; calls++ {
			got, whole, err := ReadLast(dir, calls)
			if err != nil {
				t.Fatal(err)
			}
			from, wantWhole := int64(0), calls >= 8
			if calls < 8 {
				from = firstOf[8-calls]
			}
			if got[0].Seq != from || whole != wantWhole || got[len(got)-1].Seq != all[len(all)-1].Seq {
				t.Errorf("MaxBytes %d, calls %d: seq %d to %d (whole %v), want from %d (whole %v)",
					maxBytes, calls, got[0].Seq, got[len(got)-1].Seq, whole, from, wantWhole)
			}
		}
	}
}

// A page that starts at the active file's first record is the whole
// history only when no older record is stored apart (an archive, or one
// a rotation has not sealed): before, such a page always said it was not
// whole, and logist history offered --last 0 for nothing more.
func TestReadLastWholeFromTheActiveFile(t *testing.T) {
	t.Parallel()
	// One active file, no archives: its first record starts the history.
	dir := t.TempDir()
	l, _, err := OpenWith(dir, Options{MaxBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	for n := range 5 {
		appendAll(t, l, intent(n, "worker"), response(n, "worker", "RETRY"))
	}
	l.Close()
	for calls, want := range map[int]bool{4: false, 5: true, 6: true} {
		got, whole, err := ReadLast(dir, calls)
		if err != nil || whole != want || len(got) == 0 || (want && got[0].Seq != 0) {
			t.Errorf("one file, calls %d: %d records, whole %v, %v; want whole %v", calls, len(got), whole, err, want)
		}
	}

	// Archives, and an active file that starts with an intent: a page
	// from that intent is not the whole history.
	dir = t.TempDir()
	l, _, err = OpenWith(dir, Options{MaxBytes: 2 << 10})
	if err != nil {
		t.Fatal(err)
	}
	var active []Entry
	for n := 0; ; n++ {
		if n > 200 {
			t.Fatal("no rotation left an active file that starts with an intent")
		}
		appendAll(t, l, intent(n, "worker"), response(n, "worker", "RETRY"))
		data, err := os.ReadFile(Path(dir))
		if err != nil {
			t.Fatal(err)
		}
		if active, err = parseLines(data, 0); err != nil {
			t.Fatal(err)
		}
		if len(active) > 2 && active[0].Type == TypeIntent && active[0].Seq > 0 {
			break
		}
	}
	l.Close()
	calls := 0
	for _, e := range active {
		if e.Type == TypeIntent {
			calls++
		}
	}
	got, whole, err := ReadLast(dir, calls)
	if err != nil || whole || len(got) == 0 || got[0].Seq != active[0].Seq {
		t.Errorf("archives, calls %d: %d records, whole %v, %v; want from seq %d, not whole", calls, len(got), whole, err, active[0].Seq)
	}
}
