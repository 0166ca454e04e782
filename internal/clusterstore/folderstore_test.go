package clusterstore_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/clusterstore/storetest"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/testkit"
)

func TestFolderStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) clusterstore.Store {
		s, err := clusterstore.OpenFolder(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// TestOwnFolderConformance: the store file mode's logistd commits through
// (OwnFolder: the jobs folder's owner) passes the suite too.
func TestOwnFolderConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) clusterstore.Store {
		return clusterstore.OwnFolder(jobstore.New(t.TempDir()))
	})
}

type testKey struct{ priv ed25519.PrivateKey }

func (k testKey) ID() string             { return signing.KeyID(k.priv.Public().(ed25519.PublicKey)) }
func (k testKey) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// TestFolderStoreIsFileMode: what the folder store holds is a jobs folder
// file mode reads and writes as its own — the job's folder with job.json
// (jobstore loads it), history.jsonl (history reads the records and a
// file-mode append continues their chain), and the unit's files in the
// folder. A record file mode's own writers append (a steward's CLI) is
// a change the store did not make: the job's epoch moves on and the
// lease holder's next unit is fenced, never forking the history; a
// unit's file may not replace the folder's own files.
func TestFolderStoreIsFileMode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := clusterstore.OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key := testKey{priv}
	m := testkit.ManifestJSON(t, "a", map[string]any{})
	if err := s.Submit(ctx, "a", lifecycle.Pending, m, 0); err != nil {
		t.Fatal(err)
	}
	l, err := s.Claim(ctx, "n1", time.Minute)
	if err != nil || l == nil {
		t.Fatalf("claim %+v %v", l, err)
	}
	lines, _, err := history.Seal([]*history.Record{{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: "from the store"}}}, 0, "", time.Now(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: lines, Files: map[string][]byte{"artifacts/sha256/ab": []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	// File mode's readers.
	js := jobstore.New(dir)
	es, err := js.List()
	if err != nil || len(es) != 1 || es[0].ID != "a" || es[0].Err != nil {
		t.Fatalf("jobstore lists %+v %v", es, err)
	}
	if _, err := js.Load("a"); err != nil {
		t.Fatalf("jobstore loads the manifest: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a", "artifacts", "sha256", "ab")); err != nil || string(b) != "x" {
		t.Fatalf("the unit's file in the folder: %q %v", b, err)
	}
	// File mode's writer continues the chain the store wrote.
	lg, _, err := history.OpenWith(js.JobDir("a"), history.Options{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Append(&history.Record{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: "from file mode"}}); err != nil {
		t.Fatal(err)
	}
	_ = lg.Close()
	recs := testkit.Records(t, js.JobDir("a"))
	if len(recs) != 2 || recs[0].Error.Message != "from the store" || recs[1].Error.Message != "from file mode" {
		t.Fatalf("records %+v", recs)
	}
	// That record is a change the store did not make (a steward's, in
	// file mode): the epoch moves on, the lease holder is fenced out.
	j, err := s.Job(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if j.Epoch != l.Epoch+1 || j.Owner != "" || j.NextSeq != 2 {
		t.Fatalf("after file mode's record: %+v", j)
	}
	more, _, err := history.Seal([]*history.Record{{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: "forked"}}}, j.NextSeq, j.LastHash, time.Now(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: more, Status: lifecycle.Success}); !errors.Is(err, clusterstore.ErrFenced) {
		t.Fatalf("the old lease's unit after file mode wrote: %v, want ErrFenced", err)
	}
	if recs := testkit.Records(t, js.JobDir("a")); len(recs) != 2 {
		t.Fatalf("%d records after the refused unit", len(recs))
	}
	l, err = s.Claim(ctx, "n2", time.Minute)
	if err != nil || l == nil || l.Epoch != j.Epoch+1 {
		t.Fatalf("claim after file mode wrote: %+v %v", l, err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: more}); err != nil {
		t.Fatalf("the new lease's unit: %v", err)
	}
	if recs := testkit.Records(t, js.JobDir("a")); len(recs) != 3 || recs[2].Error.Message != "forked" {
		t.Fatalf("records %+v", recs)
	}
	for _, own := range []string{"job.json", "history.jsonl", ".cluster-row.json"} {
		err := s.Commit(ctx, l, clusterstore.Unit{Files: map[string][]byte{own: []byte("{}")}})
		if err == nil || errors.Is(err, clusterstore.ErrFenced) {
			t.Fatalf("a unit's file replaced the folder's %s: %v", own, err)
		}
	}
	if _, err := js.Load("a"); err != nil {
		t.Fatalf("the manifest after the refused files: %v", err)
	}
}

// TestFolderStoreReadsFileModeJobs: a job file mode made (a folder with
// job.json, no row) is a job of the store as its manifest says — its
// status, budget and spending, its history's end — and a node may claim
// and run it; a job folder file mode left without a manifest is not one.
// The steward's CLI halting it in file mode (jobtx) is a steward's change
// to the store: the status follows, the lease holder is fenced out.
func TestFolderStoreReadsFileModeJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	testkit.WriteJob(t, dir, "fm", map[string]any{"status": "PENDING", "cost_threshold": 2.5, "metrics": map[string]any{"cumulative_cost": 1, "cumulative_time_seconds": 0}})
	testkit.WriteJob(t, dir, "waits", map[string]any{"status": "INTERVENTION_REQUIRED"})
	if err := os.Mkdir(filepath.Join(dir, "half"), 0o700); err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	key := testKey{priv}
	lg, _, err := history.OpenWith(filepath.Join(dir, "fm"), history.Options{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	if err := lg.Append(&history.Record{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: "file mode"}}); err != nil {
		t.Fatal(err)
	}
	last := lg.LastHash()
	_ = lg.Close()
	s, err := clusterstore.OpenFolder(dir)
	if err != nil {
		t.Fatal(err)
	}
	js, err := s.Jobs(ctx)
	if err != nil || len(js) != 2 || js[0].ID != "fm" || js[1].ID != "waits" {
		t.Fatalf("jobs %+v %v", js, err)
	}
	fm := js[0]
	if fm.Status != lifecycle.Pending || fm.BudgetMicros != 25_000 || fm.SpentMicros != 10_000 || fm.NextSeq != 1 || fm.LastHash != last || fm.Epoch != 0 {
		t.Fatalf("file mode's job as the store reads it: %+v", fm)
	}
	if js[1].Status != lifecycle.InterventionRequired {
		t.Fatalf("waiting job: %+v", js[1])
	}
	if err := s.Submit(ctx, "fm", lifecycle.Pending, []byte(`{}`), 0); !errors.Is(err, clusterstore.ErrExists) {
		t.Fatalf("submit over file mode's job: %v, want ErrExists", err)
	}
	l, err := s.Claim(ctx, "n1", time.Minute)
	if err != nil || l == nil || l.Job != "fm" || l.Epoch != 1 {
		t.Fatalf("claim %+v %v", l, err)
	}
	// A row copied into another job's folder (file mode makes a
	// schedule's run from its template's files) is not that job's.
	row, err := os.ReadFile(filepath.Join(dir, "fm", ".cluster-row.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "waits", ".cluster-row.json"), row, 0o600); err != nil {
		t.Fatal(err)
	}
	if w, err := s.Job(ctx, "waits"); err != nil || w.ID != "waits" || w.Status != lifecycle.InterventionRequired || w.Epoch != 0 || w.Owner != "" {
		t.Fatalf("a job with another's row: %+v %v", w, err)
	}
	lines, _, err := history.Seal([]*history.Record{{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: "store"}}}, fm.NextSeq, fm.LastHash, time.Now(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: lines}); err != nil {
		t.Fatal(err)
	}
	// The steward's CLI in file mode halts the job (jobtx, under the
	// job's flock): the store sees the change, and the lease holder is
	// fenced out.
	st := steward.New(&jobtx.Env{Store: jobstore.New(dir), Logger: testkit.Logger(), History: history.Options{Signer: key}}, nil)
	if _, err := st.Halt("fm", "stop"); err != nil {
		t.Fatal(err)
	}
	j, err := s.Job(ctx, "fm")
	if err != nil || j.Status != lifecycle.Canceled || j.Epoch != l.Epoch+1 || j.Owner != "" {
		t.Fatalf("after file mode's halt: %+v %v", j, err)
	}
	more, _, err := history.Seal([]*history.Record{{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: "late"}}}, j.NextSeq, j.LastHash, time.Now(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: more, Status: lifecycle.Success}); !errors.Is(err, clusterstore.ErrFenced) {
		t.Fatalf("the lease holder's unit after the halt: %v, want ErrFenced", err)
	}
	recs := testkit.Records(t, filepath.Join(dir, "fm"))
	if len(recs) < 3 || recs[1].Error.Message != "store" || recs[len(recs)-1].Transition == nil || recs[len(recs)-1].Transition.To != string(lifecycle.Canceled) {
		t.Fatalf("records %+v", recs)
	}
	if l, err := s.Claim(ctx, "n1", time.Minute); err != nil || l != nil {
		t.Fatalf("claimed %+v %v; nothing is claimable", l, err)
	}
}
