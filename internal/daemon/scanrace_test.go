package daemon

// The start-up scan runs beside the event loop (docs/performance.md,
// "Readiness"): the daemon is ready, and picks up new work, while the scan
// of the jobs already there goes on; nothing is missed or run twice, and
// what the scan read is not noted over what an event read since.

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/jobstore"
)

// waitLong is waitFor with room for a loaded machine.
func waitLong(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if f() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
}

// count is how many of the log's lines carry every key/value given.
func (l *logBuffer) count(kv ...string) int {
	l.mu.Lock()
	data := append([]byte(nil), l.b.Bytes()...)
	l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			if m[kv[i]] != kv[i+1] {
				ok = false
			}
		}
		if ok {
			n++
		}
	}
	return n
}

func writeFolderJob(t *testing.T, dir, id, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, id), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, id, jobstore.ManifestFile), []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The daemon answers /readyz and runs a manifest dropped while its first
// scan is held after reading the folder; a job to run that the scan found
// has started meanwhile; a finished job made invalid during the scan stays
// invalid (the scan's older summary is not noted over the event's read);
// once the scan ends every job ran exactly once and the gauges are whole.
func TestReadyDuringFirstScan(t *testing.T) {
	dir := t.TempDir()
	// A finished job, from a --once daemon.
	dropJob(t, dir, "old")
	if err := Run(context.Background(), Options{JobsDir: dir, MaxParallel: 2, Once: true, Grace: time.Second}, discard()); err != nil {
		t.Fatal(err)
	}
	if s := status(dir, "old"); s != "SUCCESS" {
		t.Fatalf("old: %s", s)
	}
	writeFolderJob(t, dir, "resume", quick) // to run, found by the scan

	held, release := make(chan *Daemon, 1), make(chan struct{})
	var once sync.Once
	testHookScanned = func(d *Daemon) {
		once.Do(func() {
			held <- d
			<-release
		})
	}
	t.Cleanup(func() { testHookScanned = nil })
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)

	addr := freeAddr(t)
	lb := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 2, Listen: addr, Grace: time.Second}, slog.New(slog.NewJSONHandler(lb, nil)))
	}()
	t.Cleanup(func() {
		releaseOnce()
		cancel()
		select {
		case <-done: //nolint:errcheck // not the subject
		case <-time.After(30 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	var d *Daemon
	select {
	case d = <-held:
	case err := <-done:
		t.Fatalf("daemon stopped: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the scan never read the folder")
	}

	// Held: ready, and saying the scan is under way.
	waitLong(t, "readyz during the scan", func() bool {
		code, body := get(t, "http://"+addr+"/readyz")
		return code == 200 && strings.Contains(body, "under way")
	})
	if _, body := get(t, "http://"+addr+"/metrics"); !strings.Contains(body, "logistd_startup_scan_complete 0") {
		t.Error("/metrics does not say the scan is under way")
	}
	dropJob(t, dir, "new")
	waitLong(t, "the job dropped during the scan to run", func() bool { return status(dir, "new") == "SUCCESS" })
	waitLong(t, "the job the scan found to run", func() bool { return status(dir, "resume") == "SUCCESS" })
	// A steward's change to a finished job, heard while the scan holds
	// that job's older summary.
	bad := filepath.Join(dir, "old", "job.json.tmp")
	if err := os.WriteFile(bad, []byte(`{"agents": {}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(bad, filepath.Join(dir, "old", jobstore.ManifestFile)); err != nil {
		t.Fatal(err)
	}
	isInvalid := func(id string) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		_, ok := d.invalid[id]
		return ok
	}
	waitLong(t, "the event to report old invalid", func() bool { return isInvalid("old") })

	releaseOnce()
	select {
	case <-d.scanDone:
	case <-time.After(60 * time.Second):
		t.Fatal("the scan did not end")
	}
	if !isInvalid("old") {
		t.Error("the scan's older summary of old cleared the invalid manifest an event read after it")
	}
	jobs := d.metrics.Jobs()
	for _, want := range []string{"new", "resume"} {
		if !strings.Contains(strings.Join(jobs, ","), want) {
			t.Errorf("gauges lack %s: %v", want, jobs)
		}
	}
	for _, id := range jobs {
		if id == "old" {
			t.Errorf("the invalid job old is counted as a job: %v", jobs)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "new.json")); err == nil {
		t.Error("new.json left unplaced")
	}
	if n := lb.count("msg", "placed manifest", "job_id", "new"); n != 1 {
		t.Errorf("new placed %d times, want once", n)
	}
	if n := lb.count("msg", "invalid manifest"); n != 1 {
		t.Errorf("%d invalid manifest lines, want 1 (old's)", n)
	}
	_, body := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{
		"logistd_startup_scan_complete 1",
		// Each of new and resume asked its worker once.
		`logistd_agent_calls_total{outcome="ok",provider="script",role="worker"} 2`,
		"logistd_invalid_manifests 1",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if _, body := get(t, "http://"+addr+"/readyz"); !strings.Contains(body, "scan complete") {
		t.Errorf("/readyz after the scan: %q", body)
	}
	verified(t, dir, "new")
	verified(t, dir, "resume")
}

// A scan and an event that bring the same bare manifest at once place it
// once, and neither reports the other's move as a failure.
func TestPlaceRaceOnce(t *testing.T) {
	dir := t.TempDir()
	d, lb, _, _ := startDaemon(t, dir)
	for i := 0; i < 20; i++ {
		id := "race" + string(rune('a'+i))
		// The watcher does not hear of it: the two callers are the test's.
		if err := d.watcher.Remove(dir); err != nil {
			t.Fatal(err)
		}
		dropJob(t, dir, id)
		var wg sync.WaitGroup
		for _, atStart := range []bool{true, false} {
			wg.Add(1)
			go func() { defer wg.Done(); d.place(filepath.Join(dir, id+".json"), atStart, time.Time{}) }()
		}
		wg.Wait()
		if err := d.watcher.Add(dir); err != nil {
			t.Fatal(err)
		}
		if n := lb.count("msg", "placed manifest", "job_id", id); n != 1 {
			t.Errorf("%s placed %d times, want once", id, n)
		}
		waitLong(t, id+" to run", func() bool { return status(dir, id) == "SUCCESS" })
	}
	if n := lb.count("msg", "invalid manifest"); n != 0 {
		t.Errorf("%d invalid manifest lines, want none", n)
	}
}
