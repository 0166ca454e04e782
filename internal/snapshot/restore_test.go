package snapshot

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A rollback puts back files as large as an agent made them (up to the
// snapshot's cap, 1 GiB by default): each was read whole into logistd's
// memory before it was written. It is streamed now, its mode kept.
func TestRestoreStreamsEachFile(t *testing.T) {
	root := t.TempDir()
	ws, job := filepath.Join(root, "ws"), filepath.Join(root, "job")
	big := bytes.Repeat([]byte("logist!\n"), 8<<20) // 64 MiB, no zero block
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "big.bin"), big, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Take(ws, job, "cp-1"); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "big.bin"), "changed")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	if err := Restore(ws, job, "cp-1"); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Errorf("Restore allocated %d MiB for a 64 MiB file", got>>20)
	}
	fi, err := os.Stat(filepath.Join(ws, "big.bin"))
	if err != nil || fi.Size() != int64(len(big)) || fi.Mode().Perm() != 0o640 {
		t.Fatalf("big.bin after restore: %v %v", fi, err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "big.bin")); !bytes.Equal(b, big) {
		t.Error("big.bin restored with other content")
	}
}
