package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
)

// A manifest the schema refuses (cost_threshold below 0) but whose exact
// bytes a signed commit record names is taken as committed; the same bytes
// with no such record, or with a record whose signature is broken, are
// checked and refused.
func TestCommittedManifestIsTrustedOnlyWithItsSignature(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	key, err := signing.LoadOrCreate(jobs)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(jobs, "j")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	manifest := []byte(`{"task_description": "t", "cost_threshold": -1}` + "\n")
	if err := os.WriteFile(filepath.Join(dir, jobstore.ManifestFile), manifest, 0o600); err != nil {
		t.Fatal(err)
	}
	load := func() error {
		s := jobstore.New(jobs)
		s.Committed = committedBySignature(s.Dir)
		_, err := s.Load("j")
		return err
	}
	if err := load(); err == nil || !strings.Contains(err.Error(), "cost_threshold") {
		t.Fatalf("without a commit: %v, want the schema's refusal", err)
	}

	sum := sha256.Sum256(manifest)
	l, _, err := history.OpenWith(dir, history.Options{Signer: key})
	if err != nil {
		t.Fatal(err)
	}
	rec := &history.Record{Type: history.TypeCommit, Commit: &history.Commit{Sum: hex.EncodeToString(sum[:]), Manifest: []byte(`{}`)}}
	if err := l.Append(rec); err != nil {
		t.Fatal(err)
	}
	// A later record without a manifest does not hide the commit.
	if err := l.Append(&history.Record{Type: history.TypeError, Error: &history.ErrorInfo{Code: "X"}}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if err := load(); err != nil {
		t.Fatalf("with a signed commit naming the bytes: %v", err)
	}

	hf := history.Path(dir)
	b, _ := os.ReadFile(hf)
	lines := strings.SplitAfter(string(b), "\n")
	i := strings.Index(lines[0], `"sig":"`) + len(`"sig":"`)
	flip := "A"
	if lines[0][i] == 'A' {
		flip = "B"
	}
	lines[0] = lines[0][:i] + flip + lines[0][i+1:]
	if err := os.WriteFile(hf, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := load(); err == nil {
		t.Fatal("a commit with a broken signature was trusted")
	}
}
