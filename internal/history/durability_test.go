package history_test

// Torn writes and rotation, from the outside: signed histories, cut at
// every byte of their last record or rotated into many archives, must read
// back whole, keep their state across a reopen, keep their hash chain
// across files (internal/verify), and survive a crash in the middle of a
// rotation without losing or repeating a record.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/verify"
)

// signer is a real jobs-folder key, made once per test.
func signer(t *testing.T) *signing.Key {
	t.Helper()
	k, err := signing.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func ptr(n int) *int { return &n }

// record i of a synthetic job: turns of intent, response and, every third
// turn, a recovery point; roles alternate; answers are valid so that
// verify's replay re-validates them.
func record(i int) *history.Record {
	turn, k := i/3, i%3
	role := []string{"worker", "supervisor"}[turn%2]
	switch {
	case k == 0:
		return &history.Record{Type: history.TypeIntent, Interaction: ptr(turn), Phase: "work", Role: role, Attempt: 1, StateBefore: "RUNNING",
			Request: &history.Request{Prompt: fmt.Sprintf("turn %d: do the work", turn), FilesContext: []string{"spec.md"}, Metadata: map[string]any{"role": role}}}
	case k == 1:
		raw := fmt.Sprintf(`{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"turn %d done"}`, turn)
		return &history.Record{Type: history.TypeResponse, Interaction: ptr(turn), Phase: "work", Role: role, Attempt: 1, StateBefore: "RUNNING",
			Response: &history.Response{Status: history.StatusSuccess, Action: "COMPLETED", EvidenceFiles: []string{},
				Summary: fmt.Sprintf("turn %d done", turn), RawResponse: raw, ExecutionTimeSeconds: 0.5, CostUSD: 0.01}}
	case turn%3 == 0:
		return &history.Record{Type: history.TypeRecoveryPoint, Phase: "work", Role: role,
			RecoveryPoint: &history.RecoveryPoint{CheckpointID: fmt.Sprintf("cp-%04d", turn), Sequence: turn, ResumePhase: "work",
				CanResumeFrom: true, Description: "checkpoint", RollbackFiles: []string{}}}
	default:
		return &history.Record{Type: history.TypeError, Phase: "work", Role: role,
			Error: &history.ErrorInfo{Code: "NOTE", Message: fmt.Sprintf("turn %d", turn)}}
	}
}

func openLog(t *testing.T, dir string, o history.Options) *history.Log {
	t.Helper()
	l, torn, err := history.OpenWith(dir, o)
	if err != nil {
		t.Fatalf("OpenWith: %v", err)
	}
	if torn != nil {
		t.Fatalf("unexpected torn tail %+v", *torn)
	}
	return l
}

// build appends records [from, to) and returns the log still open.
func build(t *testing.T, dir string, o history.Options, from, to int) *history.Log {
	t.Helper()
	l := openLog(t, dir, o)
	for i := from; i < to; i++ {
		if err := l.Append(record(i)); err != nil {
			l.Close()
			t.Fatalf("append %d: %v", i, err)
		}
	}
	return l
}

// intact asserts the history in dir holds exactly records 0..n-1 of the
// synthetic job, in order, chained and signed (internal/verify).
func intact(t *testing.T, dir string, key *signing.Key, n int) {
	t.Helper()
	chained(t, dir, n)
	rep, err := verify.Job("j", dir, verify.Options{Public: key.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Records != n {
		t.Fatalf("verify: %d records, problems %v", rep.Records, rep.Problems)
	}
}

// chained is intact's cheap half: records, order, hashes and links.
func chained(t *testing.T, dir string, n int) {
	t.Helper()
	es, err := history.ReadEntries(dir)
	if err != nil {
		t.Fatalf("ReadEntries: %v", err)
	}
	if len(es) != n {
		t.Fatalf("%d records, want %d", len(es), n)
	}
	prev := history.GenesisHash
	for i, e := range es {
		want := record(i)
		if e.Seq != int64(i) || e.Type != want.Type || !reflect.DeepEqual(e.Interaction, want.Interaction) {
			t.Fatalf("record %d: seq %d type %s, want seq %d type %s", i, e.Seq, e.Type, i, want.Type)
		}
		sum := sha256.Sum256(e.Body)
		if e.PrevHash != prev || hex.EncodeToString(sum[:]) != e.Hash {
			t.Fatalf("record %d does not chain to its predecessor, or does not match its hash", i)
		}
		prev = e.Hash
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tornEverywhere cuts the active file of the history in src at every byte
// offset inside its last record (which is record n-1) and checks each cut.
func tornEverywhere(t *testing.T, src string, o history.Options, key *signing.Key, n int) {
	t.Helper()
	data := readFile(t, filepath.Join(src, history.FileName))
	lastStart := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	if lastStart == 0 && n > 1 {
		t.Fatal("the active file has only one record; the test wants the last of several")
	}
	// A crash while record n-1 was written leaves the head at record
	// n-2: the head is written only after the records are durable.
	es, err := history.ReadEntries(src)
	if err != nil || len(es) != n {
		t.Fatalf("%d entries, %v", len(es), err)
	}
	staleHead, _ := json.Marshal(history.Head{Seq: es[n-2].Seq, Hash: es[n-2].Hash})
	work := t.TempDir()
	for cut := lastStart; cut < len(data); cut++ {
		dir := filepath.Join(work, fmt.Sprint(cut))
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, history.FileName), data[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, history.HeadFile), staleHead, 0o600); err != nil {
			t.Fatal(err)
		}
		l, torn, err := history.OpenWith(dir, o)
		if err != nil {
			t.Fatalf("cut at %d: OpenWith: %v", cut, err)
		}
		switch {
		case cut == lastStart && torn != nil:
			t.Fatalf("cut at a line boundary (%d) reported as torn: %+v", cut, *torn)
		case cut > lastStart && torn == nil:
			t.Fatalf("cut at %d (inside the last record, %d..%d) not reported", cut, lastStart, len(data))
		case cut > lastStart && (torn.Offset != int64(lastStart) || torn.Bytes != int64(cut-lastStart) || torn.Path != filepath.Join(dir, history.FileName)):
			t.Fatalf("cut at %d: torn tail %+v, want offset %d, %d bytes", cut, *torn, lastStart, cut-lastStart)
		}
		if fi, err := os.Stat(filepath.Join(dir, history.FileName)); err != nil || fi.Size() != int64(lastStart) {
			t.Fatalf("cut at %d: file not repaired to %d bytes (%v)", cut, lastStart, err)
		}
		if st := l.State(); st.NextSeq != int64(n-1) {
			t.Fatalf("cut at %d: next seq %d, want %d", cut, st.NextSeq, n-1)
		}
		// Every cut: the records left read back and chain; the next
		// append takes the lost record's place and chains on. Signatures
		// and replay (internal/verify, slow under -race) on a sample.
		full := cut == lastStart || cut == lastStart+1 || cut == len(data)-1 || cut%16 == 0
		check := chained
		if full {
			check = func(t *testing.T, dir string, n int) { intact(t, dir, key, n) }
		}
		check(t, dir, n-1)
		if err := l.Append(record(n - 1)); err != nil {
			t.Fatalf("cut at %d: append after repair: %v", cut, err)
		}
		l.Close()
		check(t, dir, n)
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTornLastRecordAtEveryOffset(t *testing.T) {
	t.Parallel()
	key := signer(t)
	o := history.Options{Signer: key}
	src := t.TempDir()
	const n = 6 // the last record a short one: fewer offsets to cut at
	build(t, src, o, 0, n).Close()
	intact(t, src, key, n)
	tornEverywhere(t, src, o, key, n)
}

func TestTornLastRecordAfterRotation(t *testing.T) {
	t.Parallel()
	key := signer(t)
	o := history.Options{Signer: key, MaxBytes: 2048}
	src := t.TempDir()
	// Enough for rotations, and then at least two records in the active
	// file so that the cut one is not its first.
	n := 0
	l := openLog(t, src, o)
	for ; n < 100; n++ {
		if err := l.Append(record(n)); err != nil {
			t.Fatal(err)
		}
		// Stop at a short record (fewer offsets to cut at).
		if archives(t, src) >= 2 && lines(t, src) >= 3 && record(n).Type == history.TypeError {
			n++
			break
		}
	}
	l.Close()
	if archives(t, src) < 2 {
		t.Fatal("no rotation happened")
	}
	before := readFile(t, filepath.Join(src, history.IndexFile))
	tornEverywhere(t, src, o, key, n)
	if !bytes.Equal(before, readFile(t, filepath.Join(src, history.IndexFile))) {
		t.Error("the template's index changed")
	}
}

func archives(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "history-*.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

func lines(t *testing.T, dir string) int {
	return bytes.Count(readFile(t, filepath.Join(dir, history.FileName)), []byte("\n"))
}

func readIndex(t *testing.T, dir string) history.Index {
	t.Helper()
	var idx history.Index
	if err := json.Unmarshal(readFile(t, filepath.Join(dir, history.IndexFile)), &idx); err != nil {
		t.Fatal(err)
	}
	return idx
}

func gunzip(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRotationManyArchives(t *testing.T) {
	t.Parallel()
	key := signer(t)
	o := history.Options{Signer: key, MaxBytes: 2048}
	dir := t.TempDir()
	const n = 499 // the last record an intent: the state has an open call
	l := build(t, dir, o, 0, n)
	before := l.State()
	if before.NextSeq != n || before.OpenIntent == nil || before.NextInteraction != n/3+1 || len(before.Responses) != 2 || before.LastCheckpoint == "" {
		t.Fatalf("the synthetic job should leave a rich state, got %+v", before)
	}
	l.Close()

	// Archives, numbered from 1, listed in the index with their ranges.
	idx := readIndex(t, dir)
	if len(idx.Archives) < 50 {
		t.Fatalf("%d archives for %d records of ~400 bytes at 2 KB", len(idx.Archives), n)
	}
	if a := archives(t, dir); a != len(idx.Archives) {
		t.Fatalf("%d archive files, index lists %d", a, len(idx.Archives))
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "history-*.jsonl")); len(m) != 0 {
		t.Fatalf("plain archives left: %v", m)
	}
	next := int64(0)
	prev := history.GenesisHash
	for i, a := range idx.Archives {
		if a.File != fmt.Sprintf("history-%06d.jsonl.gz", i+1) {
			t.Fatalf("archive %d is %s", i+1, a.File)
		}
		if a.FirstSeq != next || a.LastSeq < a.FirstSeq || a.Records != int(a.LastSeq-a.FirstSeq+1) || a.FirstPrevHash != prev {
			t.Fatalf("archive %s: %+v does not continue at seq %d", a.File, a, next)
		}
		data := gunzip(t, filepath.Join(dir, a.File))
		if int64(len(data)) != a.Bytes || bytes.Count(data, []byte("\n")) != a.Records || len(data) < 2048 {
			t.Fatalf("archive %s: %d bytes, %d lines; index says %d bytes, %d records", a.File, len(data), bytes.Count(data, []byte("\n")), a.Bytes, a.Records)
		}
		next, prev = a.LastSeq+1, a.LastHash
	}
	if idx.LastHash != prev {
		t.Fatal("index last hash is not the last archive's")
	}
	if first, err := history.ParseLine(bytes.SplitN(readFile(t, filepath.Join(dir, history.FileName)), []byte("\n"), 2)[0]); err == nil {
		if first.Seq != next || first.PrevHash != prev {
			t.Fatalf("active file starts at seq %d (prev %s…), want %d after the last archive", first.Seq, first.PrevHash[:8], next)
		}
	}

	// Everything reads back, in order, and verifies across the files.
	recs, err := history.ReadAll(dir)
	if err != nil || len(recs) != n {
		t.Fatalf("ReadAll: %d records, %v", len(recs), err)
	}
	for i, r := range recs {
		if r.Seq != int64(i) || r.Type != record(i).Type {
			t.Fatalf("ReadAll record %d: seq %d type %s", i, r.Seq, r.Type)
		}
	}
	intact(t, dir, key, n)

	// Any record, by number.
	for seq := int64(0); seq < n; seq++ {
		e, err := history.ReadSeq(dir, seq)
		if err != nil || e.Seq != seq {
			t.Fatalf("ReadSeq(%d): %v", seq, err)
		}
	}
	if _, err := history.ReadSeq(dir, n); !errors.Is(err, history.ErrNoRecord) {
		t.Fatalf("ReadSeq past the end: %v", err)
	}

	// Reopened, the state is the same.
	l = openLog(t, dir, o)
	after := l.State()
	l.Close()
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("state after reopening differs:\nbefore %+v (open intent %+v)\nafter  %+v (open intent %+v)", before, before.OpenIntent, after, after.OpenIntent)
	}
}

// ReadSeq decompresses only the archive that holds the record: with every
// other archive destroyed, records in the others are still found, and
// records in the destroyed ones are not.
func TestReadSeqReadsOneArchive(t *testing.T) {
	t.Parallel()
	key := signer(t)
	dir := t.TempDir()
	const n = 150
	build(t, dir, history.Options{Signer: key, MaxBytes: 2048}, 0, n).Close()
	idx := readIndex(t, dir)
	if len(idx.Archives) < 6 {
		t.Fatalf("only %d archives", len(idx.Archives))
	}
	for i, a := range idx.Archives {
		if i%2 == 1 {
			if err := os.WriteFile(filepath.Join(dir, a.File), []byte("not gzip at all"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, a := range idx.Archives {
		for seq := a.FirstSeq; seq <= a.LastSeq; seq++ {
			e, err := history.ReadSeq(dir, seq)
			if i%2 == 0 && (err != nil || e.Seq != seq) {
				t.Fatalf("record %d in intact archive %s: %v", seq, a.File, err)
			}
			if i%2 == 1 && err == nil {
				t.Fatalf("record %d read from destroyed archive %s", seq, a.File)
			}
		}
	}
	// Records in the active file need no archive at all.
	for seq := idx.Archives[len(idx.Archives)-1].LastSeq + 1; seq < n; seq++ {
		if _, err := history.ReadSeq(dir, seq); err != nil {
			t.Fatalf("record %d in the active file: %v", seq, err)
		}
	}
	if _, err := history.ReadAll(dir); err == nil {
		t.Fatal("ReadAll read through destroyed archives")
	}
}

// rotated builds a history of at least 40 records with small files, two
// archives or more and records in the active file; it returns the index
// and the number of records. The log is closed.
func rotated(t *testing.T, dir string, o history.Options) (history.Index, int) {
	t.Helper()
	l := openLog(t, dir, o)
	n := 0
	for ; n < 40 || lines(t, dir) == 0; n++ {
		if err := l.Append(record(n)); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	idx := readIndex(t, dir)
	if len(idx.Archives) < 2 {
		t.Fatalf("want at least two archives; %d", len(idx.Archives))
	}
	return idx, n
}

func stateOf(t *testing.T, dir string, o history.Options) history.State {
	t.Helper()
	l := openLog(t, dir, o)
	defer l.Close()
	return l.State()
}

// finishes asserts that opening dir finishes what a rotation left, loses
// and repeats nothing, and that appending goes on from where it was.
func finishes(t *testing.T, dir string, o history.Options, key *signing.Key, n int, want history.State) {
	t.Helper()
	l := openLog(t, dir, o)
	if got := l.State(); !reflect.DeepEqual(got, want) {
		t.Errorf("state after recovery %+v, want %+v", got, want)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "history-*.jsonl")); len(m) != 0 {
		t.Errorf("plain archives left after recovery: %v", m)
	}
	idx := readIndex(t, dir)
	for i, a := range idx.Archives {
		if a.File != fmt.Sprintf("history-%06d.jsonl.gz", i+1) {
			t.Errorf("index entry %d is %s", i+1, a.File)
		}
	}
	if err := l.Append(record(n)); err != nil {
		t.Fatal(err)
	}
	l.Close()
	intact(t, dir, key, n+1)
}

func TestCrashDuringRotation(t *testing.T) {
	t.Parallel()
	key := signer(t)
	o := history.Options{Signer: key, MaxBytes: 2048}

	// The active file renamed to the next archive, not yet compressed or
	// indexed; the new active file created (or not yet).
	for _, withActive := range []bool{true, false} {
		t.Run(fmt.Sprintf("renamed, new active file %v", withActive), func(t *testing.T) {
			dir := t.TempDir()
			idx, n := rotated(t, dir, o)
			want := stateOf(t, dir, o)
			plain := filepath.Join(dir, fmt.Sprintf("history-%06d.jsonl", len(idx.Archives)+1))
			if err := os.Rename(filepath.Join(dir, history.FileName), plain); err != nil {
				t.Fatal(err)
			}
			if withActive {
				if err := os.WriteFile(filepath.Join(dir, history.FileName), nil, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			finishes(t, dir, o, key, n, want)
			if got := readIndex(t, dir); len(got.Archives) != len(idx.Archives)+1 {
				t.Errorf("%d archives after recovery, want %d", len(got.Archives), len(idx.Archives)+1)
			}
		})
	}

	// An archive written by hand from records (a rotation that stopped
	// right after the rename, of a file that had just been started).
	t.Run("hand-made plain archive", func(t *testing.T) {
		dir := t.TempDir()
		idx, n := rotated(t, dir, o)
		want := stateOf(t, dir, o)
		active := readFile(t, filepath.Join(dir, history.FileName))
		plain := filepath.Join(dir, fmt.Sprintf("history-%06d.jsonl", len(idx.Archives)+1))
		var b bytes.Buffer
		for _, ln := range bytes.SplitAfter(active, []byte("\n")) {
			b.Write(ln)
		}
		if err := os.WriteFile(plain, b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, history.FileName), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		finishes(t, dir, o, key, n, want)
	})

	// Compressed and indexed, but the plain file not yet removed.
	t.Run("indexed, plain file left", func(t *testing.T) {
		dir := t.TempDir()
		idx, n := rotated(t, dir, o)
		want := stateOf(t, dir, o)
		last := idx.Archives[len(idx.Archives)-1]
		plain := filepath.Join(dir, strings.TrimSuffix(last.File, ".gz"))
		if err := os.WriteFile(plain, gunzip(t, filepath.Join(dir, last.File)), 0o600); err != nil {
			t.Fatal(err)
		}
		finishes(t, dir, o, key, n, want)
		if got := readIndex(t, dir); len(got.Archives) != len(idx.Archives) {
			t.Errorf("%d archives after recovery, want %d (indexed twice?)", len(got.Archives), len(idx.Archives))
		}
	})

	// Compressed, but the index not yet written: the archive is sealed
	// again (and a half-written compressed temp file is no obstacle).
	t.Run("compressed, not indexed", func(t *testing.T) {
		dir := t.TempDir()
		idx, n := rotated(t, dir, o)
		want := stateOf(t, dir, o)
		last := idx.Archives[len(idx.Archives)-1]
		plain := filepath.Join(dir, strings.TrimSuffix(last.File, ".gz"))
		if err := os.WriteFile(plain, gunzip(t, filepath.Join(dir, last.File)), 0o600); err != nil {
			t.Fatal(err)
		}
		older := idx
		older.Archives = older.Archives[:len(older.Archives)-1]
		older.LastHash = older.Archives[len(older.Archives)-1].LastHash
		older.State = stateAfter(t, dir, older.Archives[len(older.Archives)-1].LastSeq)
		b, _ := json.Marshal(older)
		if err := os.WriteFile(filepath.Join(dir, history.IndexFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "."+last.File+".tmp"), []byte("\x1f\x8b half"), 0o600); err != nil {
			t.Fatal(err)
		}
		finishes(t, dir, o, key, n, want)
		if got := readIndex(t, dir); len(got.Archives) != len(idx.Archives) {
			t.Errorf("%d archives after recovery, want %d", len(got.Archives), len(idx.Archives))
		}
	})
}

// stateAfter is the state of the synthetic job after record last, computed
// by opening a copy of its first last+1 records.
func stateAfter(t *testing.T, dir string, last int64) history.State {
	t.Helper()
	es, err := history.ReadEntries(dir)
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	var b bytes.Buffer
	for _, e := range es[:last+1] {
		line, _ := json.Marshal(map[string]any{"hash": e.Hash, "key": e.Key, "sig": e.Sig, "rec": json.RawMessage(e.Body)})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(tmp, history.FileName), b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, tmp, history.Options{MaxBytes: -1})
	defer l.Close()
	return l.State()
}

// A rotation whose compression failed leaves its plain archive; the next
// rotation must not take the same archive number and replace it.
func TestFailedSealIsNotOverwrittenByTheNextRotation(t *testing.T) {
	t.Parallel()
	key := signer(t)
	o := history.Options{Signer: key, MaxBytes: 2048}
	dir := t.TempDir()
	l := openLog(t, dir, o)
	// Make the first seal fail: its temp file's name is taken by a folder.
	block := filepath.Join(dir, ".history-000001.jsonl.gz.tmp")
	if err := os.Mkdir(block, 0o700); err != nil {
		t.Fatal(err)
	}
	n, failures := 0, 0
	for ; n < 60; n++ {
		if err := l.Append(record(n)); err != nil {
			failures++ // the record is stored; only the rotation failed
		}
	}
	if failures == 0 {
		t.Fatal("the blocked seal did not fail")
	}
	l.Close()
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, o)
	l.Close()
	intact(t, dir, key, n)
	var names []string
	for _, a := range readIndex(t, dir).Archives {
		names = append(names, a.File)
	}
	sort.Strings(names)
	for i, name := range names {
		if name != fmt.Sprintf("history-%06d.jsonl.gz", i+1) {
			t.Fatalf("archives %v", names)
		}
	}
}
