package atomicfile

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// newKey makes distinct content per creator, as a key generator does.
func newKey() ([]byte, error) {
	b := make([]byte, 16)
	rand.Read(b)
	return []byte(hex.EncodeToString(b) + "\n"), nil
}

// noTemps fails if a creator's temporary file is left in dir.
func noTemps(t *testing.T, dir string) {
	t.Helper()
	for _, n := range listDir(t, dir) {
		if strings.Contains(n, ".tmp-") {
			t.Errorf("temporary file left: %s", n)
		}
	}
}

func TestCreateExclusiveOnceWholePrivate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "k.key")
	if err := CreateExclusive(p, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := CreateExclusive(p, []byte("second\n"), 0o600)
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second create: %v, want fs.ErrExist", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "first\n" {
		t.Fatalf("content %q, want the first", b)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	noTemps(t, dir)
}

// race starts n ReadOrCreate of p at once and returns what each got.
func race(t *testing.T, p string, n int) [][]byte {
	t.Helper()
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got[i], _, errs[i] = ReadOrCreate(p, 0o600, newKey)
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("racer %d: %v", i, err)
		}
	}
	return got
}

// agree fails unless every racer got the content now stored at p.
func agree(t *testing.T, p string, got [][]byte) {
	t.Helper()
	stored, err := os.ReadFile(p)
	if err != nil || len(stored) == 0 {
		t.Fatalf("stored: %q, %v", stored, err)
	}
	for i, g := range got {
		if !bytes.Equal(g, stored) {
			t.Fatalf("racer %d uses %q, the file holds %q", i, g, stored)
		}
	}
}

// Goroutines racing to create one file all end with the same content,
// the one the file holds, and leave no temporary file.
func TestReadOrCreateRacersAgree(t *testing.T) {
	for range 40 {
		dir := t.TempDir()
		p := filepath.Join(dir, "content.key")
		got := race(t, p, 8)
		agree(t, p, append(got, race(t, p, 2)...)) // and later readers read it
		noTemps(t, dir)
	}
}

// TestHelperReadOrCreateProcess is one racer of
// TestReadOrCreateProcessesAgree, run as a process of its own.
func TestHelperReadOrCreateProcess(t *testing.T) {
	p := os.Getenv("ATOMICFILE_RACE_FILE")
	if p == "" {
		t.Skip("a helper process of TestReadOrCreateProcessesAgree")
	}
	// Wait for the go: every racer is started before any creates.
	for {
		if _, err := os.Stat(p + ".go"); err == nil {
			break
		}
		time.Sleep(100 * time.Microsecond)
	}
	b, _, err := ReadOrCreate(p, 0o600, newKey)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Printf("KEY=%s", b)
}

// Processes racing to create one file (a daemon and a steward command
// starting on a fresh jobs folder) use the same content.
func TestReadOrCreateProcessesAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	for round := range 2 {
		dir := t.TempDir()
		p := filepath.Join(dir, "signing.key")
		const n = 4
		cmds := make([]*exec.Cmd, n)
		outs := make([]*bytes.Buffer, n)
		for i := range n {
			cmds[i] = exec.Command(os.Args[0], "-test.run=^TestHelperReadOrCreateProcess$", "-test.count=1")
			cmds[i].Env = append(os.Environ(), "ATOMICFILE_RACE_FILE="+p)
			outs[i] = &bytes.Buffer{}
			cmds[i].Stdout, cmds[i].Stderr = outs[i], outs[i]
			if err := cmds[i].Start(); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p+".go", nil, 0o600); err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for i, c := range cmds {
			if err := c.Wait(); err != nil {
				t.Fatalf("round %d: racer %d: %v\n%s", round, i, err, outs[i])
			}
			_, key, ok := strings.Cut(outs[i].String(), "KEY=")
			if !ok {
				t.Fatalf("round %d: racer %d said %q", round, i, outs[i])
			}
			key, _, _ = strings.Cut(key, "\n")
			got = append(got, []byte(key+"\n"))
		}
		agree(t, p, got)
		noTemps(t, dir)
	}
}

// What a crash can leave, and CreateExclusive's rule for each.
func TestCreateExclusiveAfterCrash(t *testing.T) {
	t.Run("temporary file: ignored", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "content.key")
		left := filepath.Join(dir, ".content.key.tmp-123")
		if err := os.WriteFile(left, []byte("half a k"), 0o600); err != nil {
			t.Fatal(err)
		}
		b, created, err := ReadOrCreate(p, 0o600, newKey)
		if err != nil || len(b) != 33 || !created {
			t.Fatalf("%q, %v", b, err)
		}
		if l, _ := os.ReadFile(left); string(l) != "half a k" {
			t.Errorf("the leftover was touched: %q", l)
		}
	})
	t.Run("empty file: replaced", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "content.key")
		if err := os.WriteFile(p, nil, 0o644); err != nil { // as a version that created it in place left it
			t.Fatal(err)
		}
		b, created, err := ReadOrCreate(p, 0o600, newKey)
		if err != nil || len(b) != 33 || !created {
			t.Fatalf("%q, %v", b, err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v, %v", fi.Mode(), err)
		}
		agree(t, p, [][]byte{b})
	})
	t.Run("empty file: racers replace it once", func(t *testing.T) {
		for range 20 {
			dir := t.TempDir()
			p := filepath.Join(dir, "content.key")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			agree(t, p, race(t, p, 8))
			noTemps(t, dir)
		}
	})
	t.Run("damaged file: kept", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "content.key")
		if err := os.WriteFile(p, []byte("\x00\x00\x00"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := CreateExclusive(p, []byte("new\n"), 0o600); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("err %v, want fs.ErrExist", err)
		}
		if b, created, err := ReadOrCreate(p, 0o600, newKey); err != nil || created || string(b) != "\x00\x00\x00" {
			t.Fatalf("%q, %v: the caller must see the damage to refuse it", b, err)
		}
	})
}

// On file systems without hard links CreateExclusive renames without
// replacing; without that either, it creates in place under the folder's
// lock. Each way, the file is made once, whole, private.
func TestCreateExclusiveFallbacks(t *testing.T) {
	defer func(l, r func(string, string) error) { linkHook, renameNoreplaceHook = l, r }(linkHook, renameNoreplaceHook)
	noLinks := func(from, to string) error { return &os.LinkError{Op: "link", Old: from, New: to, Err: syscall.EPERM} }
	noRename := func(from, to string) error {
		return &os.LinkError{Op: "renameat2", Old: from, New: to, Err: syscall.EINVAL}
	}
	for _, c := range []struct {
		name         string
		link, rename func(string, string) error
	}{
		{"rename-noreplace", noLinks, renameNoreplaceHook},
		{"in place", noLinks, noRename},
	} {
		t.Run(c.name, func(t *testing.T) {
			linkHook, renameNoreplaceHook = c.link, c.rename
			dir := t.TempDir()
			p := filepath.Join(dir, "k.key")
			if err := CreateExclusive(p, []byte("first\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := CreateExclusive(p, []byte("second\n"), 0o600); !errors.Is(err, fs.ErrExist) {
				t.Fatalf("second create: %v, want fs.ErrExist", err)
			}
			if b, _ := os.ReadFile(p); string(b) != "first\n" {
				t.Fatalf("content %q", b)
			}
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v, %v", fi.Mode(), err)
			}
			noTemps(t, dir)
			for range 10 {
				q := filepath.Join(t.TempDir(), "k.key")
				agree(t, q, race(t, q, 6))
			}
		})
	}
	// An error that is not "unsupported" is reported, not worked around.
	linkHook = func(from, to string) error { return &os.LinkError{Op: "link", Old: from, New: to, Err: syscall.EIO} }
	if err := CreateExclusive(filepath.Join(t.TempDir(), "k"), []byte("x"), 0o600); !errors.Is(err, syscall.EIO) {
		t.Fatalf("err %v, want EIO", err)
	}
}
