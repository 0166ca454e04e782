package protocol

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func artErr(t *testing.T, err error) *ArtifactError {
	t.Helper()
	var ae *ArtifactError
	if !errors.As(err, &ae) {
		t.Fatalf("%v (%T) is not an *ArtifactError", err, err)
	}
	return ae
}

// TestStorePutGetVerify: content-addressed, private, idempotent; missing
// and altered artifacts are told apart.
func TestStorePutGetVerify(t *testing.T) {
	t.Parallel()
	s := NewStore(t.TempDir())
	id, err := s.Put([]byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if id != "sha256:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824" || !ValidArtifactID(id) {
		t.Fatalf("id %s", id)
	}
	file := filepath.Join(s.Dir, strings.TrimPrefix(id, "sha256:"))
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("artifact file %v %v", fi, err)
	}
	// Putting the same content again leaves the stored file alone.
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(file, old, old); err != nil {
		t.Fatal(err)
	}
	id2, err := s.Put([]byte("hello"))
	if err != nil || id2 != id {
		t.Fatalf("second Put %s %v", id2, err)
	}
	if fi, _ := os.Stat(file); !fi.ModTime().Equal(old) {
		t.Error("idempotent Put rewrote the file")
	}
	if b, err := s.Get(id); err != nil || string(b) != "hello" {
		t.Errorf("Get %q %v", b, err)
	}
	if err := s.Verify(id); err != nil {
		t.Error(err)
	}
	ents, _ := os.ReadDir(s.Dir)
	if len(ents) != 1 {
		t.Errorf("%d entries (temporaries left?)", len(ents))
	}

	missing := ArtifactID([]byte("never stored"))
	if ae := artErr(t, s.Verify(missing)); ae.Class != FailMissingArtifact {
		t.Errorf("missing: %v", ae)
	}
	if ae := artErr(t, s.Verify("../../etc/passwd")); ae.Class != FailMissingArtifact {
		t.Errorf("bad id: %v", ae)
	}
	if err := os.WriteFile(file, []byte("HELLO"), 0o600); err != nil {
		t.Fatal(err)
	}
	if ae := artErr(t, s.Verify(id)); ae.Class != FailHashMismatch {
		t.Errorf("altered: %v", ae)
	}
	if _, err := s.Get(id); err == nil {
		t.Error("Get returned altered content")
	}
	// Put of the right content repairs a damaged copy.
	if _, err := s.Put([]byte("hello")); err != nil || s.Verify(id) != nil {
		t.Errorf("repair: %v %v", err, s.Verify(id))
	}
}

func TestStoreEmptyArtifact(t *testing.T) {
	t.Parallel()
	s := NewStore(t.TempDir())
	id, err := s.Put(nil)
	if err != nil || s.Verify(id) != nil {
		t.Fatalf("%s %v", id, err)
	}
}
