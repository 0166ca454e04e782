package signing

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Processes starting together on a fresh jobs folder (a daemon and a
// steward command) must end up with one key: none may read the winner's
// key file before it is whole.
func TestConcurrentCreateAgreesOnOneKey(t *testing.T) {
	t.Parallel()
	for round := range 60 {
		dir := t.TempDir()
		const n = 8
		ids := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				k, err := LoadOrCreate(dir)
				if err == nil {
					ids[i] = k.ID()
				}
				errs[i] = err
			}()
		}
		close(start)
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d: LoadOrCreate %d: %v", round, i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("round %d: two keys: %s and %s", round, ids[0], ids[i])
			}
		}
		k, err := Load(dir)
		if err != nil || k.ID() != ids[0] {
			t.Fatalf("round %d: stored key %v, %v; want %s", round, k, err, ids[0])
		}
		pub, err := LoadPublic(filepath.Join(dir, Dir, PublicFile))
		if err != nil || KeyID(pub) != ids[0] {
			t.Fatalf("round %d: public key %v does not match", round, err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, Dir, ".*tmp*")); len(left) != 0 {
			t.Fatalf("round %d: temporary files left: %v", round, left)
		}
	}
}

// What a crash in the middle of creating the key can leave: a temporary
// file, or the private key without its public half. The next start goes on.
func TestCreateAfterCrash(t *testing.T) {
	t.Parallel()
	t.Run("temporary file only", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, Dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, Dir, "."+PrivateFile+".tmp-123"), []byte("AAAA"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, Dir, PublicFile+".0123456789abcdef"), []byte("AAAA\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := LoadOrCreate(dir)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := LoadOrCreate(dir); err != nil || again.ID() != k.ID() {
			t.Fatalf("second start: %v, %v", again, err)
		}
	})
	t.Run("public half missing", func(t *testing.T) {
		dir := t.TempDir()
		k, err := LoadOrCreate(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(dir, Dir, PublicFile)); err != nil {
			t.Fatal(err)
		}
		again, err := LoadOrCreate(dir)
		if err != nil || again.ID() != k.ID() {
			t.Fatalf("restart: %v, %v", again, err)
		}
		if pub, err := LoadPublic(filepath.Join(dir, Dir, PublicFile)); err != nil || KeyID(pub) != k.ID() {
			t.Fatalf("public key not restored: %v", err)
		}
	})
	t.Run("private key file mode", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := LoadOrCreate(dir); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, Dir, PrivateFile))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file mode %v, %v", fi.Mode(), err)
		}
		if fi, err := os.Stat(filepath.Join(dir, Dir)); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("key folder mode %v, %v", fi.Mode(), err)
		}
	})
	// A creation cut short by a crash (as when keys were created in
	// place): nothing was ever signed with an empty key file, so a new
	// key replaces it, with its public half.
	t.Run("empty key file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, Dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, Dir, PrivateFile), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		// The public half of the key that was lost, if it got written.
		if err := os.WriteFile(filepath.Join(dir, Dir, PublicFile), []byte("ZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ=\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := LoadOrCreate(dir)
		if err != nil {
			t.Fatal(err)
		}
		if again, err := Load(dir); err != nil || again.ID() != k.ID() {
			t.Fatalf("stored key %v, %v; want %s", again, err, k.ID())
		}
		if pub, err := LoadPublic(filepath.Join(dir, Dir, PublicFile)); err != nil || KeyID(pub) != k.ID() {
			t.Fatalf("public key: %v", err)
		}
	})
	// A damaged key is refused, never replaced: the history it signed
	// would no longer verify.
	t.Run("damaged key file", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, Dir), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, Dir, PrivateFile), []byte("AAAA\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreate(dir); err == nil || !strings.Contains(err.Error(), "malformed") {
			t.Fatalf("err = %v, want malformed", err)
		}
		if b, _ := os.ReadFile(filepath.Join(dir, Dir, PrivateFile)); string(b) != "AAAA\n" {
			t.Fatalf("the damaged key was replaced: %q", b)
		}
	})
}
