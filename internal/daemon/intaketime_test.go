package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The intake latency is observed once for each job that came in while the
// daemon watched, whether as a folder renamed in or as a bare manifest; not
// for a job the start-up scan found, nor for an invalid manifest.
func TestIntakeLatencyObservedOncePerJobTakenIn(t *testing.T) {
	dir, staging := t.TempDir(), t.TempDir()
	writeFolderJob(t, dir, "before", quick) // found by the scan
	const n = 5
	var ids []string
	for i := range n {
		id := fmt.Sprintf("in-%d", i)
		ids = append(ids, id)
		writeFolderJob(t, staging, id, quick)
	}
	writeFolderJob(t, staging, "bad", `{"task_description": "t"}`) // no agents: invalid
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 2, Listen: addr, Grace: time.Second}, discard())
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitFor(t, "readyz", func() bool { code, _ := get(t, "http://"+addr+"/readyz"); return code == 200 })
	// Ready comes with the watch, the first scan beside it: a folder
	// renamed in before the scan has listed the jobs folder is the scan's
	// find, not an arrival. The scan has listed it once it ran "before".
	waitLong(t, "before to run", func() bool { return status(dir, "before") == "SUCCESS" })
	for _, id := range append(ids, "bad") {
		if err := os.Rename(filepath.Join(staging, id), filepath.Join(dir, id)); err != nil {
			t.Fatal(err)
		}
	}
	dropJob(t, dir, "bare")
	for _, id := range append(ids, "bare") {
		waitLong(t, id+" to run", func() bool { return status(dir, id) == "SUCCESS" })
	}
	_, body := get(t, "http://"+addr+"/metrics")
	if c := metric(t, body, "logistd_intake_latency_seconds_count"); c != n+1 {
		t.Errorf("intake latency observed %v times, want %d (the folders renamed in and the bare manifest)", c, n+1)
	}
}

// A job's arrival is when it was renamed into the jobs folder, not when its
// folder was made.
func TestArrivalIsTheRename(t *testing.T) {
	dir, staging := t.TempDir(), t.TempDir()
	writeFolderJob(t, staging, "old", quick)
	made := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(staging, "old"), made, made); err != nil {
		t.Fatal(err)
	}
	before, err := os.Lstat(filepath.Join(staging, "old"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(staging, "old"), filepath.Join(dir, "old")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(filepath.Join(dir, "old"))
	if err != nil {
		t.Fatal(err)
	}
	if a := arrival(fi); !a.After(fi.ModTime()) || a.Before(arrival(before)) {
		t.Errorf("arrival %v, want the rename's time (after the folder's mtime %v, not before its staging %v)", a, fi.ModTime(), arrival(before))
	}
}
