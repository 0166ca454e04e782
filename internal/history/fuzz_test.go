package history

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func FuzzHistoryOpen(f *testing.F) {
	good := `{"v":1,"seq":0,"type":"intent","ts":"2025-01-29T10:00:00Z","interaction":0,"role":"worker","request":{"prompt":"p","files_context":[],"metadata":{}}}` + "\n" +
		`{"v":1,"seq":1,"type":"response","ts":"2025-01-29T10:00:01Z","interaction":0,"role":"worker","response":{"status":"SUCCESS","action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"s","raw_response":"{}","execution_time_seconds":1,"cost_usd":0}}` + "\n"
	for _, s := range []string{
		"",
		"\n",
		"\n\n",
		good,
		good + `{"v":1,"seq":2,"ty`,
		good + "garbage\n",
		"garbage\n" + good,
		good + `{"v":2,"seq":2,"type":"x"}` + "\n",
		`null` + "\n",
		`{"v":1,"seq":9223372036854775807,"type":"transition"}` + "\n",
		`{"v":1,"seq":0,"type":"intent"}` + "\n" + `{"v":1,"seq":1,"type":"steward","steward":{"command":"halt"}}` + "\n",
		`{"v":1,"seq":0,"type":"recovery_point","recovery_point":{"checkpoint_id":"cp"}}` + "\n",
		"\xff\xfe\x00\n",
		`{"v":1,"seq":0,"type":"response","more":true}` + "\n" + `{"v":1,"seq":1,"type":"transition","commit":{"base_manifest_sha256":"","manifest_sha256":"x","manifest":{}}}` + "\n",
		`{"v":1,"seq":0,"type":"response","more":true}` + "\n",
		`{"v":-1,"seq":-5,"interaction":-3,"type":"response"}` + "\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, FileName), data, 0o600); err != nil {
			t.Fatal(err)
		}
		// Its units go through a store's hook that holds their links to
		// their lines (checkLinks), whatever history they continue.
		l, torn, err := OpenWith(dir, Options{Commit: func(u Unit) error {
			checkLinks(t, u)
			return u.Write()
		}})
		if err != nil {
			return
		}
		defer l.Close()
		fi, err := os.Stat(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		if torn != nil {
			if torn.Offset != fi.Size() || torn.Offset+torn.Bytes != int64(len(data)) {
				t.Fatalf("torn %+v, file size %d, input %d bytes", torn, fi.Size(), len(data))
			}
		} else if fi.Size() != int64(len(data)) {
			t.Fatalf("Open changed the file without reporting a torn tail: %d -> %d", len(data), fi.Size())
		}
		before, err := ReadAll(dir)
		if err != nil {
			t.Fatalf("ReadAll after a successful Open: %v", err)
		}
		if e, ok := LastCommitEntry(dir); ok && (e.Commit == nil || e.More) {
			t.Fatalf("LastCommitEntry returned %+v", e.Record)
		} else if ok {
			// The seal status trusts is that entry's, decoded less.
			if s, sok := LastCommitSeal(dir); !sok || s.Sum != e.Commit.Sum || s.Hash != e.Hash || s.Sig != e.Sig || s.Key != e.Key || !bytes.Equal(s.Body, e.Body) {
				t.Fatalf("LastCommitSeal %+v (%v), LastCommitEntry %+v", s, sok, e)
			}
		}
		// Materialising whatever Open accepted must not panic.
		Materialise("j", "", "/ws", before)

		n := l.NewInteraction()
		rec := &Record{Type: TypeIntent, Interaction: &n, Role: "fuzz-role", Phase: "fuzz-phase",
			Request: &Request{Prompt: string(data[:min(len(data), 256)]), FilesContext: []string{}, Metadata: map[string]any{}}}
		if err := l.Append(rec); err != nil {
			t.Fatalf("Append: %v", err)
		}
		if st := l.State(); st.OpenIntent == nil || st.OpenIntent.Role != "fuzz-role" {
			t.Fatalf("OpenIntent after Append: %+v", st.OpenIntent)
		}
		recs, err := ReadAll(dir)
		if err != nil {
			t.Fatalf("ReadAll after Append: %v", err)
		}
		if len(recs) != len(before)+1 {
			t.Fatalf("%d records after Append, had %d", len(recs), len(before))
		}
		last := recs[len(recs)-1]
		if last.Type != TypeIntent || last.Role != "fuzz-role" || last.Seq != rec.Seq || last.Interaction == nil || *last.Interaction != n || last.V != RecordVersion {
			t.Fatalf("appended record read back as %+v", last)
		}
		// A reopen sees the same history without repair.
		l2, torn2, err := Open(dir)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer l2.Close()
		if torn2 != nil {
			t.Fatalf("reopen found a torn tail %+v", torn2)
		}
		if l2.State().NextSeq != l.State().NextSeq {
			t.Fatalf("reopen NextSeq %d, log had %d", l2.State().NextSeq, l.State().NextSeq)
		}
	})
}
