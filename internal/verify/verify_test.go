package verify

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/builtins"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/testkit"
)

// runExample runs one example job from the repo's jobs/ folder to its end
// in a temp jobs folder, signed, and returns the folder and key.
func runExample(t *testing.T, name string) (string, *signing.Key) {
	t.Helper()
	f := testkit.New(t)
	if err := os.CopyFS(filepath.Join(f.Dir, name), os.DirFS(filepath.Join("..", "..", "jobs", name))); err != nil {
		t.Fatal(err)
	}
	key := f.Sign()
	f.Runner = runner.NewEngine(f.Env, builtins.Effects())
	f.Run(name)
	return f.Dir, key
}

func verifyDir(t *testing.T, dir, id string, pub ed25519.PublicKey) *Report {
	t.Helper()
	m, _ := jobstore.New(dir).Load(id)
	r, err := Job(id, filepath.Join(dir, id), Options{Public: pub, Manifest: m})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func lines(t *testing.T, file string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(b, []byte("\n"))
}

func writeLines(t *testing.T, file string, ls [][]byte) {
	t.Helper()
	if err := os.WriteFile(file, bytes.Join(ls, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestIntactHistoriesVerify(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"demo-retry-success", "demo-stuck", "demo-cost-halt", "demo-invalid-answer", "demo-command"} {
		dir, key := runExample(t, name)
		r := verifyDir(t, dir, name, key.Public())
		if !r.OK() {
			t.Errorf("%s: %v", name, r.Problems)
		}
		if r.Responses == 0 || r.Transitions == 0 || r.Legacy != 0 {
			t.Errorf("%s: report %+v", name, r)
		}
	}
}

// Each way of tampering is caught, and the report names the first record
// that is wrong.
func TestTamperingIsDetected(t *testing.T) {
	t.Parallel()
	var forger history.Signer
	cases := []struct {
		name      string
		tamper    func(t *testing.T, file string)
		wantSeq   int64
		wantClass string
	}{
		{"edit a summary", func(t *testing.T, f string) {
			ls := lines(t, f)
			ls[7] = bytes.Replace(ls[7], []byte("greet.py works"), []byte("greet.py rocks"), 1)
			writeLines(t, f, ls)
		}, 7, ClassHashMismatch},
		{"edit and re-hash without the key", func(t *testing.T, f string) {
			ls := lines(t, f)
			ls[7] = rehash(t, bytes.Replace(ls[7], []byte("greet.py works"), []byte("greet.py rocks"), 1))
			writeLines(t, f, ls)
		}, 7, ClassSignatureInvalid},
		{"delete a record", func(t *testing.T, f string) {
			ls := lines(t, f)
			writeLines(t, f, append(ls[:4:4], ls[5:]...))
		}, 5, ClassSequenceGap},
		{"reorder two records", func(t *testing.T, f string) {
			ls := lines(t, f)
			ls[3], ls[4] = ls[4], ls[3]
			writeLines(t, f, ls)
		}, 3, ClassSequenceGap},
		{"truncate in the middle", func(t *testing.T, f string) {
			ls := lines(t, f)
			writeLines(t, f, append(ls[:2:2], ls[8:]...))
		}, 8, ClassSequenceGap},
		{"swap two signatures", func(t *testing.T, f string) {
			ls := lines(t, f)
			s2, s6 := sigOf(t, ls[2]), sigOf(t, ls[6])
			ls[2] = bytes.Replace(ls[2], []byte(s2), []byte(s6), 1)
			ls[6] = bytes.Replace(ls[6], []byte(s6), []byte(s2), 1)
			writeLines(t, f, ls)
		}, 2, ClassSignatureInvalid},
		{"strip a signature", func(t *testing.T, f string) {
			ls := lines(t, f)
			ls[7] = bytes.Replace(ls[7], []byte(`,"sig":"`+sigOf(t, ls[7])+`"`), nil, 1)
			writeLines(t, f, ls)
		}, 7, ClassSignatureMissing},
		{"change an action so replay diverges", func(t *testing.T, f string) {
			// A consistent forgery of the content (re-hashed and relinked, as
			// someone with the key could) still fails the replay: the answer
			// says RETRY but the recorded outcome is COMPLETED.
			ls := lines(t, f)
			ls[7] = bytes.Replace(ls[7], []byte(`"action":"RETRY"`), []byte(`"action":"COMPLETED"`), 1)
			writeLines(t, f, relink(t, ls, forger))
		}, 7, ClassReplayDivergence},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir, key := runExample(t, "demo-retry-success")
			forger = key
			file := history.Path(filepath.Join(dir, "demo-retry-success"))
			if r := verifyDir(t, dir, "demo-retry-success", key.Public()); !r.OK() {
				t.Fatalf("before tampering: %v", r.Problems)
			}
			c.tamper(t, file)
			r := verifyDir(t, dir, "demo-retry-success", key.Public())
			if r.OK() {
				t.Fatal("tampering not detected")
			}
			first := r.First()
			if first.Seq != c.wantSeq || first.Class != c.wantClass {
				t.Errorf("first problem %s; want record %d %s (all: %v)", first, c.wantSeq, c.wantClass, r.Problems)
			}
		})
	}
}

func TestForeignKeyIsRefused(t *testing.T) {
	t.Parallel()
	dir, _ := runExample(t, "demo-stuck")
	other, _, _ := ed25519.GenerateKey(nil)
	r := verifyDir(t, dir, "demo-stuck", other)
	if r.OK() || r.First().Class != ClassSignatureInvalid || r.First().Seq != 0 || !strings.Contains(r.First().Detail, "not the trusted key") {
		t.Fatalf("foreign key: %v", r.Problems)
	}
}

// The version 1 histories written by Logist's first release (committed
// samples) are migrated on read: they replay cleanly and are reported as
// unprotected; new records appended after them are chained and signed.
func TestVersion1HistoriesMigrate(t *testing.T) {
	t.Parallel()
	samples, _ := filepath.Glob("../history/testdata/v1/*.jsonl")
	if len(samples) == 0 {
		t.Fatal("no v1 samples")
	}
	for _, s := range samples {
		name := strings.TrimSuffix(filepath.Base(s), ".jsonl")
		dir := t.TempDir()
		jobDir := filepath.Join(dir, name)
		if err := os.MkdirAll(jobDir, 0o700); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(s)
		if err := os.WriteFile(history.Path(jobDir), b, 0o600); err != nil {
			t.Fatal(err)
		}
		key, _ := signing.LoadOrCreate(dir)
		r, err := Job(name, jobDir, Options{Public: key.Public()})
		if err != nil || !r.OK() {
			t.Fatalf("%s: %v %v", name, err, r.Problems)
		}
		n := bytes.Count(b, []byte("\n"))
		if r.Legacy != n || r.Records != n {
			t.Errorf("%s: legacy %d records %d, want %d", name, r.Legacy, r.Records, n)
		}
		l, torn, err := history.OpenWith(jobDir, history.Options{Signer: key})
		if err != nil || torn != nil {
			t.Fatalf("open v1 history: %v %v", err, torn)
		}
		st := l.State()
		if st.NextSeq != int64(n) {
			t.Errorf("%s: next seq %d after %d v1 records", name, st.NextSeq, n)
		}
		if err := l.Append(&history.Record{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: "after migration"}}); err != nil {
			t.Fatal(err)
		}
		l.Close()
		r, _ = Job(name, jobDir, Options{Public: key.Public()})
		if !r.OK() || r.Records != n+1 || r.Legacy != n {
			t.Errorf("%s after append: %+v", name, r)
		}
		// A v1 line slipped in after the chain started is refused.
		f, _ := os.OpenFile(history.Path(jobDir), os.O_APPEND|os.O_WRONLY, 0)
		if _, err := f.Write([]byte(`{"v":1,"seq":` + itoa(n+1) + `,"type":"error","ts":"2026-01-01T00:00:00Z"}` + "\n")); err != nil {
			t.Fatal(err)
		}
		f.Close()
		r, _ = Job(name, jobDir, Options{Public: key.Public()})
		if r.OK() || r.First().Class != ClassChainBreak {
			t.Errorf("%s: downgrade not detected: %v", name, r.Problems)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func sigOf(t *testing.T, line []byte) string {
	var env struct {
		Sig string `json:"sig"`
	}
	if err := json.Unmarshal(line, &env); err != nil || env.Sig == "" {
		t.Fatalf("no signature in %s", line)
	}
	return env.Sig
}

// rehash recomputes a line's hash as a forger without the key could.
func rehash(t *testing.T, line []byte) []byte {
	e, err := history.ParseLine(line)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(strings.Replace(string(line), e.Hash, sha(e.Body), 1))
}

// relink rewrites every line as a forger holding the signing key would: new
// hashes, links and signatures, so chain and signatures verify and only the
// replay can tell.
func relink(t *testing.T, ls [][]byte, key history.Signer) [][]byte {
	t.Helper()
	prev := history.GenesisHash
	out := make([][]byte, 0, len(ls))
	for _, ln := range ls {
		if len(bytes.TrimSpace(ln)) == 0 {
			continue
		}
		e, err := history.ParseLine(ln)
		if err != nil {
			t.Fatal(err)
		}
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(e.Body, &rec); err != nil {
			t.Fatal(err)
		}
		rec["prev_hash"], _ = json.Marshal(prev)
		body, _ := json.Marshal(rec)
		var buf bytes.Buffer
		if err := json.Compact(&buf, body); err != nil {
			t.Fatal(err)
		}
		line, h := encodeFor(buf.Bytes(), key)
		prev = h
		out = append(out, line)
	}
	return out
}

// A history cut at a record boundary, or emptied, is a valid chain: only
// the signed head shows the lost tail (issue 18, item 3). A head moved back
// with the tail, without the key, does not verify.
func TestCutTailIsDetected(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"cut", "empty", "forged head", "all gone"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			dir, key := runExample(t, "demo-retry-success")
			jd := filepath.Join(dir, "demo-retry-success")
			file := history.Path(jd)
			ls := lines(t, file)
			last := int64(len(ls) - 2) // SplitAfter leaves an empty last element
			head, err := history.ReadHead(jd)
			if err != nil || head == nil || head.Seq != last {
				t.Fatalf("head %+v, %v; want seq %d", head, err, last)
			}
			wantSeq, wantClass := last, ClassTailMissing
			switch c {
			case "cut":
				writeLines(t, file, ls[:len(ls)-3])
			case "empty":
				writeLines(t, file, nil)
			case "forged head":
				writeLines(t, file, ls[:len(ls)-3])
				es, err := history.ReadEntries(jd)
				if err != nil || len(es) == 0 {
					t.Fatal(err)
				}
				e := es[len(es)-1]
				forged := *head
				forged.Seq, forged.Hash = e.Seq, e.Hash
				b, _ := json.Marshal(forged)
				if err := os.WriteFile(filepath.Join(jd, history.HeadFile), b, 0o600); err != nil {
					t.Fatal(err)
				}
				wantSeq, wantClass = e.Seq, ClassSignatureInvalid
			case "all gone": // its log, head and mark: only job.json says it ran
				for _, f := range []string{file, filepath.Join(jd, history.HeadFile), filepath.Join(jd, "history-mark.json")} {
					if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
				}
				wantSeq = 0
			}
			r := verifyDir(t, dir, "demo-retry-success", key.Public())
			if r.OK() {
				t.Fatal("cut tail not detected")
			}
			if first := r.First(); first.Seq != wantSeq || first.Class != wantClass {
				t.Errorf("first problem %s; want record %d %s (all: %v)", first, wantSeq, wantClass, r.Problems)
			}
		})
	}
}

// A history that cannot be read at all (its log a folder, a file this
// user may not read) is Unreadable; one whose content fails (a corrupt
// record, a lost archive, a corrupt head) was read, and is not.
func TestUnreadableIsNotTampered(t *testing.T) {
	t.Parallel()
	dir, key := runExample(t, "demo-retry-success")
	jd := filepath.Join(dir, "demo-retry-success")
	file := history.Path(jd)
	intact, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	headFile := filepath.Join(jd, history.HeadFile)
	head, err := os.ReadFile(headFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(jd, history.IndexFile)); err == nil {
		t.Fatal("the example's history rotated: the cases below replace its index")
	}
	restore := func() {
		t.Helper()
		if err := os.RemoveAll(file); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, intact, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(headFile, head, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name       string
		damage     func() error
		unreadable bool
	}{
		{"intact", func() error { return nil }, false},
		{"log is a folder", func() error {
			if err := os.Remove(file); err != nil {
				return err
			}
			return os.Mkdir(file, 0o700)
		}, true},
		{"head is a folder", func() error {
			if err := os.Remove(headFile); err != nil {
				return err
			}
			return os.Mkdir(headFile, 0o700)
		}, true},
		{"corrupt record", func() error {
			return os.WriteFile(file, append([]byte("{not json\n"), intact...), 0o600)
		}, false},
		{"corrupt head", func() error { return os.WriteFile(headFile, []byte("{"), 0o600) }, false},
		{"lost archive", func() error {
			return os.WriteFile(filepath.Join(jd, history.IndexFile), []byte(`{"archives": [{"file": "history-000001.jsonl.gz"}]}`), 0o600)
		}, false},
	} {
		if err := c.damage(); err != nil {
			t.Fatal(err)
		}
		r := verifyDir(t, dir, "demo-retry-success", key.Public())
		if r.Unreadable() != c.unreadable || (c.name == "intact") != r.OK() || (c.name == "intact") != (r.ReadErr == nil) {
			t.Errorf("%s: Unreadable %v, want %v (read error %v, problems %v)", c.name, r.Unreadable(), c.unreadable, r.ReadErr, r.Problems)
		}
		if err := os.RemoveAll(headFile); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(filepath.Join(jd, history.IndexFile)) // made by one case only
		restore()
	}
}
