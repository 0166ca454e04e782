package runner

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
)

// A preparation gets a place only while nobody holds or waits for one,
// and never keeps a start, an outcome or an end from a free place.
func TestGateAheadOnlyWhenCalm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCPUGate(2)
		var mu sync.Mutex
		var got []string
		release := make(chan struct{})
		end := &gateHold{g: g}
		end.enter(prioEnd)
		queueAt(t, g, prioAhead, "ahead", &mu, &got, release)
		if s := served(&mu, &got); len(s) != 0 {
			t.Fatalf("%v got in while an end held a place (one free)", s)
		}
		// A start comes while the preparation waits: it takes the free
		// place at once.
		start := &gateHold{g: g}
		start.enter(prioStart)
		// Both places held: an outcome waits, and goes before the
		// preparation when the start leaves.
		queueAt(t, g, prioNext, "next", &mu, &got, release)
		start.leave()
		synctest.Wait()
		if s := served(&mu, &got); len(s) != 1 || s[0] != "next" {
			t.Fatalf("served %v after the start left, want [next]", s)
		}
		close(release) // next leaves
		synctest.Wait()
		if s := served(&mu, &got); len(s) != 1 {
			t.Fatalf("served %v while the end still held a place", s)
		}
		end.leave()
		synctest.Wait()
		if s := served(&mu, &got); len(s) != 2 || s[1] != "ahead" {
			t.Fatalf("served %v once the gate was empty, want the preparation last", s)
		}
	})
}

// A job waiting for a slot gets its history, head and workspace made,
// and its folder and its entry in the jobs folder fsync'd, before its
// start; its first unit then fsyncs no folder. (Not parallel: it counts
// the process's folder fsyncs.)
func TestSchedulerPreparesWaitingJobsFiles(t *testing.T) {
	if n := preparedStartDirSyncs(t, false); n != 0 {
		t.Errorf("b's start made %d folder fsyncs before its first call, want 0 (its files prepared and settled)", n)
	}
}

// A job folder removed and made again after its files were made ahead
// (before the daemon has heard of the removal) is a new folder: the start
// settles its new entries, the fsyncs of the old ones notwithstanding.
func TestSchedulerSettlesAFolderMadeAgainAfterItsPreparation(t *testing.T) {
	if n := preparedStartDirSyncs(t, true); n < 2 {
		t.Errorf("b's start, its folder made again, made %d folder fsyncs before its first call, want the job folder's and the jobs folder's", n)
	}
}

// preparedStartDirSyncs runs job a, holds it in its first call while b
// waits for its slot and gets its files made ahead, then (again) puts a
// new folder with b's manifest in the place of b's, and lets a end. It
// returns the folder fsyncs b's start made before its first call.
func preparedStartDirSyncs(t *testing.T, again bool) int64 {
	t.Helper()
	f := newFixture(t)
	for _, id := range []string{"a", "b"} {
		f.WriteJob(id, job(okSupervisor(), okSupervisor()))
	}
	gate := newEndGate("a")
	f.Engine.Env.Obs = gate
	aCalled, releaseA := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var before, atB int64 = -1, -1
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		switch {
		case req.JobID == "a" && req.Role == "worker":
			close(aCalled)
			<-releaseA
		case req.JobID == "a":
			// a's last call: b starts once it returns, while a's end
			// is held (endGate) and makes no fsync.
			mu.Lock()
			before = atomicfile.DirSyncs.Load()
			mu.Unlock()
		case req.JobID == "b" && req.Role == "worker":
			mu.Lock()
			atB = atomicfile.DirSyncs.Load()
			mu.Unlock()
		}
		return answer("COMPLETED", req.Role+" done"), nil
	})
	s := newScheduler(t, f, 1)
	var once sync.Once
	letA := func() { once.Do(func() { close(releaseA) }) }
	t.Cleanup(gate.openAll)
	t.Cleanup(letA) // a failed test's cleanup, before Stop
	s.Nudge("a")
	<-aCalled
	s.Nudge("b") // waits for a's slot
	dir := f.Engine.Env.Store.JobDir("b")
	deadline := time.Now().Add(30 * time.Second)
	prepared := []string{history.Path(dir), filepath.Join(dir, history.HeadFile), f.Engine.Env.Store.Workspace("b")}
	for {
		// All of its files, made one after the other, and settled.
		var err error
		for _, p := range prepared {
			if _, err = os.Stat(p); err != nil {
				break
			}
		}
		if err == nil && !atomicfile.Dirty(dir) && !atomicfile.Dirty(f.Engine.Env.Store.Dir) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b's history not prepared and settled within 30 s (stat: %v)", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	for _, p := range prepared {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("not prepared: %v", err)
		}
		if !fi.IsDir() && fi.Size() != 0 {
			t.Errorf("%s prepared with %d bytes, want empty", p, fi.Size())
		}
	}
	if m := f.Load("b"); m.Status != lifecycle.Pending || m.Run.StartedAt != "" {
		t.Fatalf("b is %s (started %q) while it waits", m.Status, m.Run.StartedAt)
	}
	if again {
		data, err := os.ReadFile(filepath.Join(dir, jobstore.ManifestFile))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, jobstore.ManifestFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	letA()
	deadline = time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		done := atB >= 0
		mu.Unlock()
		if done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b's worker not called within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	n := atB - before
	mu.Unlock()
	gate.open("a")
	waitIdle(t, s, 30*time.Second)
	for _, id := range []string{"a", "b"} {
		if m := f.Load(id); m.Status != lifecycle.Success {
			t.Errorf("%s is %s, want SUCCESS", id, m.Status)
		}
	}
	return n
}

// A job whose lock a steward's command holds is left to its start: the
// preparer does not wait for the lock.
func TestSchedulerLeavesALockedJobToItsStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, id := range []string{"a", "b"} {
		f.WriteJob(id, job(okSupervisor(), okSupervisor()))
	}
	aCalled, releaseA := make(chan struct{}), make(chan struct{})
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		if req.JobID == "a" && req.Role == "worker" {
			close(aCalled)
			<-releaseA
		}
		return answer("COMPLETED", req.Role+" done"), nil
	})
	lk, err := f.Engine.Env.Store.LockJob("b") // a steward's command at work on b
	if err != nil {
		t.Fatal(err)
	}
	s := newScheduler(t, f, 1)
	var once sync.Once
	letA := func() { once.Do(func() { close(releaseA) }) }
	t.Cleanup(letA) // a failed test's cleanup, before Stop
	s.Nudge("a")
	<-aCalled
	s.Nudge("b")
	time.Sleep(100 * time.Millisecond) // the preparer's chance (an absence cannot be waited for)
	if _, err := os.Stat(history.Path(f.Engine.Env.Store.JobDir("b"))); err == nil {
		t.Error("b's history made while a steward held its lock")
	}
	if err := lk.Unlock(); err != nil {
		t.Fatal(err)
	}
	letA()
	waitIdle(t, s, 30*time.Second)
	if m := f.Load("b"); m.Status != lifecycle.Success {
		t.Errorf("b is %s, want SUCCESS", m.Status)
	}
}
