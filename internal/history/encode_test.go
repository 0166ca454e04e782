package history

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/logist/logist/internal/signing"
)

// oldLine is a stored line as Logist encoded it before appendLine:
// json.Marshal of the record inside the envelope, built apart. Histories
// written so must read the same, and a record must hash the same.
func oldLine(rec *Record, signer Signer) ([]byte, string, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	var key, sig string
	if signer != nil {
		key, sig = signer.ID(), base64.StdEncoding.EncodeToString(signer.Sign(sum[:]))
	}
	var b bytes.Buffer
	b.WriteString(`{"hash":"` + hash + `"`)
	if key != "" || sig != "" {
		b.WriteString(`,"key":"` + key + `","sig":"` + sig + `"`)
	}
	b.WriteString(`,"rec":`)
	b.Write(body)
	b.WriteString("}\n")
	return b.Bytes(), hash, nil
}

// linesRecords are records of every type, with text that JSON escapes
// (quotes, control characters, HTML, U+2028, bytes that are not UTF-8),
// numbers of every form, maps, raw JSON laid out loosely, and committed
// manifests plain and packed.
func linesRecords() []*Record {
	odd := "line\nbreak \"quoted\" \\ <tag> & \u2028\u2029 \xff\xfe é \x00\x1f \t 日本"
	n, zero := 7, 0
	reported := 0.1
	plain, _ := json.Marshal(map[string]any{"status": "RUNNING", "task_description": odd, "metrics": map[string]any{"cumulative_cost": 1e21}})
	return []*Record{
		{Type: TypeIntent, Interaction: &n, Role: odd, Phase: "work", Attempt: 3, StateBefore: "RUNNING",
			Request: &Request{Prompt: odd, FilesContext: []string{odd, ""}, SystemPrompt: odd, TaskDescription: "t", WorkspacePath: "/w",
				Metadata: map[string]any{"k": odd, "attempt": 1, "f": 2.5e-7, "nested": map[string]any{"b": []any{true, nil, "x"}}, "a": math.Copysign(0, -1)}}},
		{Type: TypeIntent, Interaction: &zero, Request: &Request{}},
		benchRecord(3),
		{Type: TypeResponse, Interaction: &n, Response: &Response{Status: StatusError, ErrorCode: "X", Error: odd, Warnings: []string{odd},
			ExecutionTimeSeconds: 123456789.125, CostUSD: 1e-9, Metered: true, ReportedCostUSD: &reported, Tokens: &Tokens{Input: 1 << 40, Output: 2},
			Violations: []Violation{{Code: "C", Detail: odd, Path: "p", Workspace: true}}, WorkspaceChanges: &FileChanges{Added: []string{"a"}},
			Stderr: odd, Outcome: "REJECTED", SentBack: true, SessionID: "s", NewStatus: "N"}},
		{Type: TypeTransition, Transition: &Transition{From: "PENDING", To: "RUNNING", Event: "start", Actor: "SYSTEM", Reason: odd}},
		{Type: TypeRecoveryPoint, More: true, RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-1"}},
		{Type: TypeEvent, Event: &ProtocolEvent{Type: "proposal", Role: odd, Subject: "p1", Body: map[string]any{"z": 1, "a": odd}}},
		{Type: TypeMessage, Message: json.RawMessage("{ \"text\" : \"hi <b>\" ,\n \"n\": [1, 2] }")},
		{Type: TypeSteward, Steward: &Steward{Command: CommandSet, CommandID: "c", Changes: map[string]any{"cost_threshold": 12.5, "x": odd}}},
		{Type: TypeError, Error: &ErrorInfo{Code: "TEST", Message: odd}},
		{Type: TypeCommit, Commit: &Commit{Base: "b", Sum: "s", Manifest: plain, Plain: plain}},
		{Type: TypeCommit, Commit: &Commit{Base: "b", Sum: "s", Manifest: json.RawMessage(`"deflate:q1YqyS/JzM9TsgJSLkWpxSmpxUq1AAA="`)}},
		{Type: TypeCommit, Commit: &Commit{Manifest: json.RawMessage(" {\"a\": \"<&>\"} ")}},
		// Encoded by json.Marshal, not appended as they are: hashes that
		// are not lower-case hex, a manifest not Plain's, or packed with
		// what base64 has not.
		{Type: TypeCommit, Commit: &Commit{Base: "<&>", Sum: GenesisHash, Manifest: plain, Plain: plain}},
		{Type: TypeCommit, Commit: &Commit{Base: "ABCDEF", Sum: "0", Manifest: json.RawMessage(`"deflate:q1Y="`)}},
		{Type: TypeCommit, Commit: &Commit{Base: GenesisHash, Sum: GenesisHash, Manifest: json.RawMessage(`"deflate:q1 Y<="`)}},
		{Type: TypeCommit, Commit: &Commit{Base: GenesisHash, Sum: GenesisHash, Manifest: append(json.RawMessage(nil), plain...), Plain: plain}},
		{Type: TypeCommit, More: true, Commit: &Commit{Base: GenesisHash, Sum: GenesisHash, Manifest: json.RawMessage(`"deflate:"`)}},
	}
}

// TestVerbatimCommits: the manifests a transaction commits (Plain itself,
// or packed) are appended as they are; anything else is left to
// json.Marshal.
func TestVerbatimCommits(t *testing.T) {
	t.Parallel()
	plain := []byte(`{"job_id":"j"}`)
	for _, c := range []struct {
		commit *Commit
		want   bool
	}{
		{&Commit{Base: GenesisHash, Sum: "0a", Manifest: plain, Plain: plain}, true},
		{&Commit{Base: GenesisHash, Sum: "0a", Manifest: json.RawMessage(`"deflate:q1Y+/=="`), Plain: plain}, true},
		{&Commit{Base: GenesisHash, Sum: "0a", Manifest: append([]byte(nil), plain...), Plain: plain}, false},
		{&Commit{Base: GenesisHash, Sum: "0a", Manifest: plain[:len(plain)-1], Plain: plain}, false},
		{&Commit{Base: GenesisHash, Sum: "0A", Manifest: plain, Plain: plain}, false},
		{&Commit{Base: GenesisHash, Sum: "0a", Manifest: json.RawMessage(`"sealed:q1Y="`)}, false},
		{&Commit{Base: GenesisHash, Sum: "0a", Manifest: json.RawMessage(`"deflate:q1Y\u003d"`)}, false},
		{&Commit{Base: GenesisHash, Sum: "0a"}, false},
	} {
		if got := verbatim(c.commit); got != c.want {
			t.Errorf("verbatim(%s / %s) = %v, want %v", c.commit.Sum, c.commit.Manifest, got, c.want)
		}
	}
}

// shortSigner signs with a signature shorter than Ed25519's: the record
// must move to where the envelope's head ends.
type shortSigner struct{}

func (shortSigner) ID() string             { return "short" }
func (shortSigner) Sign(msg []byte) []byte { return msg[:7] }

// eachSigner runs f with each signer the encoder must agree with the old
// one under: a real key, none, and a signature of another length.
func eachSigner(t *testing.T, f func(t *testing.T, signer Signer)) {
	t.Helper()
	key, err := signing.LoadOrCreate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, signer := range []Signer{key, nil, shortSigner{}} {
		t.Run(fmt.Sprintf("%T", signer), func(t *testing.T) { f(t, signer) })
	}
}

func TestLinesAsBefore(t *testing.T) {
	t.Parallel()
	eachSigner(t, func(t *testing.T, signer Signer) {
		// One at a time, and many into one buffer.
		var buf, want []byte
		for i, rec := range linesRecords() {
			rec.V, rec.Seq, rec.PrevHash, rec.Time = RecordVersion, int64(i), GenesisHash, "2026-01-01T00:00:00.5Z"
			old, oldHash, err := oldLine(rec, signer)
			if err != nil {
				t.Fatal(err)
			}
			line, hash, err := encodeLine(rec, signer)
			if err != nil || !bytes.Equal(line, old) || hash != oldHash {
				t.Errorf("record %d (%s) encoded as\n%s (%s, %v)\nbefore as\n%s (%s)", i, rec.Type, line, hash, err, old, oldHash)
			}
			if buf, hash, err = appendLine(buf, rec, signer); err != nil || hash != oldHash {
				t.Errorf("record %d appended with hash %s (%v), want %s", i, hash, err, oldHash)
			}
			want = append(want, old...)
		}
		if !bytes.Equal(buf, want) {
			t.Errorf("lines appended into one buffer:\n%s\nwant\n%s", buf, want)
		}
		// A record that cannot be encoded leaves the buffer as it was.
		bad := &Record{Type: TypeMessage, Message: json.RawMessage(`{"unclosed":`)}
		if _, _, err := oldLine(bad, signer); err == nil {
			t.Fatal("the old encoder took invalid JSON")
		}
		if got, _, err := appendLine(buf, bad, signer); err == nil || !bytes.Equal(got, want) {
			t.Errorf("invalid record: %v, buffer %d bytes, want an error and %d", err, len(got), len(want))
		}
	})
}

// TestUnitAsBefore: a unit's write and the lines handed to its store are
// the lines the old encoder gave for its records, as the log assigned them.
func TestUnitAsBefore(t *testing.T) {
	t.Parallel()
	eachSigner(t, func(t *testing.T, signer Signer) {
		dir := t.TempDir()
		var units [][][]byte
		l, _, err := OpenWith(dir, Options{Signer: signer, Commit: func(u Unit) error {
			units = append(units, u.Lines)
			return u.Write()
		}})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		all := linesRecords()
		batches := [][]*Record{all[:1], all[1:2], all[2:9], all[9:17], all[17:]}
		var want []byte
		for _, b := range batches {
			if err := l.AppendBatch(b); err != nil {
				t.Fatal(err)
			}
			var lines [][]byte
			for _, rec := range b {
				old, _, err := oldLine(rec, signer)
				if err != nil {
					t.Fatal(err)
				}
				lines = append(lines, old)
				want = append(want, old...)
			}
			got := units[len(units)-1]
			if len(got) != len(lines) {
				t.Fatalf("a unit of %d records handed over as %d lines", len(lines), len(got))
			}
			for i := range lines {
				if !bytes.Equal(got[i], lines[i]) {
					t.Errorf("line %d of a unit:\n%s\nwant\n%s", i, got[i], lines[i])
				}
			}
			// A store that keeps a line and appends to it does not
			// touch the next.
			if len(got) > 1 {
				_ = append(got[0], "x"...)
				if !bytes.Equal(got[1], lines[1]) {
					t.Error("appending to a unit's line changed the next one")
				}
			}
		}
		file, err := os.ReadFile(Path(dir))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(file, want) {
			t.Errorf("history file:\n%s\nwant\n%s", file, want)
		}
	})
}

// sink keeps a benchmark's result from being optimised away.
var sink []byte

// BenchmarkEncodeUnit encodes a worker answer's unit (response, recovery
// point, transition with a 1 KB manifest) as one buffer: old is the
// encoder before appendLine (each record marshalled apart, wrapped, then
// the lines joined), new is appendLine. Unsigned: signing is the same
// work either way, and three times the rest.
func BenchmarkEncodeUnit(b *testing.B) {
	var key Signer
	var err error
	manifest := json.RawMessage(bytes.Repeat([]byte(`{"a":"0123456789"},`), 50))
	manifest = append(append(json.RawMessage(`[`), manifest[:len(manifest)-1]...), ']')
	unit := []*Record{benchRecord(1),
		{Type: TypeRecoveryPoint, Phase: "work", RecoveryPoint: &RecoveryPoint{CheckpointID: "cp-1", RollbackFiles: []string{}}},
		{Type: TypeTransition, Phase: "review", Transition: &Transition{From: "RUNNING", To: "REVIEWING", Event: "phase_advance", Actor: "worker"},
			Commit: &Commit{Base: GenesisHash, Sum: GenesisHash, Manifest: manifest, Plain: manifest}}} // as a transaction commits it
	for i, rec := range unit {
		rec.V, rec.Seq, rec.PrevHash, rec.Time = RecordVersion, int64(i), GenesisHash, "2026-01-01T00:00:00.5Z"
	}
	b.Run("old", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var lines [][]byte
			size := 0
			for _, rec := range unit {
				line, _, err := oldLine(rec, key)
				if err != nil {
					b.Fatal(err)
				}
				lines = append(lines, line)
				size += len(line)
			}
			buf := make([]byte, 0, size)
			for _, line := range lines {
				buf = append(buf, line...)
			}
			sink = buf
		}
	})
	b.Run("new", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf := make([]byte, 0, unitRoom*len(unit))
			for _, rec := range unit {
				if buf, _, err = appendLine(buf, rec, key); err != nil {
					b.Fatal(err)
				}
			}
			sink = buf
		}
	})
}
