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
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
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

type testKey struct{ priv ed25519.PrivateKey }

func (k testKey) ID() string             { return signing.KeyID(k.priv.Public().(ed25519.PublicKey)) }
func (k testKey) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

// TestFolderStoreIsFileMode: what the folder store holds is a jobs folder
// file mode reads and writes as its own — the job's folder with job.json
// (jobstore loads it), history.jsonl (history reads the records and a
// file-mode append continues their chain), and the unit's files in the
// folder. A write from outside the store (a steward's CLI in file mode)
// that the store's row does not account for is refused by the store's
// next commit, not overwritten or forked; a unit's file may not replace
// the folder's own files.
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
	// The store's row does not account for that record: its next write
	// is refused, whole.
	j, err := s.Job(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	more, _, err := history.Seal([]*history.Record{{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X", Message: "forked"}}}, j.NextSeq, j.LastHash, time.Now(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: more, Status: lifecycle.Success}); err == nil {
		t.Fatal("the store forked a history a file-mode writer had moved on")
	}
	if recs := testkit.Records(t, js.JobDir("a")); len(recs) != 2 {
		t.Fatalf("%d records after the refused unit", len(recs))
	}
	if j, _ := s.Job(ctx, "a"); j.Status != lifecycle.Pending {
		t.Fatalf("the refused unit changed the status: %s", j.Status)
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
