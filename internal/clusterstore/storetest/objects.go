package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
)

// testSubmitKeyed: a submission under an idempotency key inserts its job
// once; the same submission again is a repeat that changes nothing;
// another one with the key (another manifest, another job) is
// ErrIdempotency; racing copies of one submission insert one job.
func testSubmitKeyed(t *testing.T, s clusterstore.Store) {
	m := []byte(`{"job_id":"a"}`)
	sub := clusterstore.Submission{Key: "k1", Command: clusterstore.SubmitCommand("a", m, nil), ID: "a", Status: lifecycle.Pending, Manifest: m}
	if repeat, err := s.SubmitKeyed(ctx, sub); err != nil || repeat {
		t.Fatalf("first submission: repeat %v, %v", repeat, err)
	}
	l := claim(t, s, "n1", time.Minute)
	if repeat, err := s.SubmitKeyed(ctx, sub); err != nil || !repeat {
		t.Fatalf("the same submission again: repeat %v, %v; want a repeat", repeat, err)
	}
	if j := job(t, s, "a"); j.Epoch != l.Epoch || j.Owner != "n1" || j.Status != lifecycle.Pending {
		t.Fatalf("a repeat changed the job: %+v", j)
	}
	other := []byte(`{"job_id":"a","task_description":"other"}`)
	diff := sub
	diff.Command, diff.Manifest = clusterstore.SubmitCommand("a", other, nil), other
	if _, err := s.SubmitKeyed(ctx, diff); !errors.Is(err, clusterstore.ErrIdempotency) {
		t.Fatalf("another manifest with the key: %v, want ErrIdempotency", err)
	}
	if j := job(t, s, "a"); string(j.Manifest) != string(m) {
		t.Fatalf("a refused submission replaced the manifest: %s", j.Manifest)
	}
	// The job exists without this key: not a repeat.
	fresh := sub
	fresh.Key = "k2"
	if _, err := s.SubmitKeyed(ctx, fresh); !errors.Is(err, clusterstore.ErrExists) {
		t.Fatalf("the job again under another key: %v, want ErrExists", err)
	}
	// Racing copies: one job, every copy succeeds.
	race := clusterstore.Submission{Key: "k3", Command: clusterstore.SubmitCommand("b", m, nil), ID: "b", Status: lifecycle.Pending, Manifest: m}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = s.SubmitKeyed(ctx, race) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("racing copies of one submission: %v", err)
	}
	js, err := s.Jobs(ctx)
	if err != nil || len(js) != 2 {
		t.Fatalf("jobs after the race: %v %v", js, err)
	}
}

// testSubmittedFiles: a submission's files are stored with its job, with
// or without a key (none: a job of the id again is ErrExists); a tick's
// run is stored with its files; a file outside the job's folder is
// refused, and nothing is inserted.
func testSubmittedFiles(t *testing.T, s clusterstore.Store) {
	m := []byte(`{"job_id":"f"}`)
	files := map[string][]byte{"scenario.json": []byte("{}"), "prompts/w.md": []byte("be brief")}
	sub := clusterstore.Submission{ID: "f", Status: lifecycle.Pending, Manifest: m, Files: files,
		Command: clusterstore.SubmitCommand("f", m, files)}
	if repeat, err := s.SubmitKeyed(ctx, sub); err != nil || repeat {
		t.Fatalf("a submission without a key: repeat %v, %v", repeat, err)
	}
	if _, err := s.SubmitKeyed(ctx, sub); !errors.Is(err, clusterstore.ErrExists) {
		t.Fatalf("again without a key: %v, want ErrExists", err)
	}
	got, err := s.Files(ctx, "f")
	if err != nil || len(got) != 2 || string(got["prompts/w.md"]) != "be brief" || string(got["scenario.json"]) != "{}" {
		t.Fatalf("stored files %v %v", got, err)
	}
	if clusterstore.SubmitCommand("f", m, files) == clusterstore.SubmitCommand("f", m, map[string][]byte{"scenario.json": []byte("{ }")}) ||
		clusterstore.SubmitCommand("f", m, nil) == clusterstore.SubmitCommand("f", m, files) {
		t.Fatal("a submission's command does not tell its files apart")
	}
	bad := clusterstore.Submission{Key: "kf", ID: "g", Status: lifecycle.Pending, Manifest: m, Files: map[string][]byte{"../escape": nil}}
	if _, err := s.SubmitKeyed(ctx, bad); err == nil {
		t.Fatal("a file outside the job's folder was stored")
	}
	if _, err := s.Job(ctx, "g"); !errors.Is(err, clusterstore.ErrNotFound) {
		t.Fatalf("a refused submission inserted its job: %v", err)
	}
	tm := []byte(`{"job_id":"tf","schedule":{"cron":"* * * * *"}}`)
	if err := s.Submit(ctx, "tf", lifecycle.Pending, tm, 0); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	if ok, err := s.Fire(ctx, clusterstore.Tick{Template: "tf", At: at, Node: "n1", Run: "tf-run", Manifest: []byte(`{"job_id":"tf-run"}`), Files: files}); err != nil || !ok {
		t.Fatalf("fire: %v %v", ok, err)
	}
	if got, err := s.Files(ctx, "tf-run"); err != nil || len(got) != 2 || string(got["scenario.json"]) != "{}" {
		t.Fatalf("the run's files %v %v", got, err)
	}
}

func listing(sums ...string) []byte {
	b := []byte(`{"checkpoint_id":"x","entries":[`)
	for i, sum := range sums {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, `{"path":"f%d","mode":420,"sha256":%q,"size":1}`, i, sum)
	}
	return append(b, "]}"...)
}

// testCollectObjects: an object no point's listing names is collected, a
// named one never (whichever job names it); a point replaced by one that
// no longer names an object leaves it to be collected; a unit whose
// listing names an object the store lacks (collected) is ErrMissingObject
// and stores nothing, and goes through with the object sent again. A
// sweep racing commits never collects what they name.
func testCollectObjects(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	submit(t, s, "b", 0)
	la := claim(t, s, "n1", time.Minute)
	lb := claim(t, s, "n1", time.Minute)
	if la.Job != "a" {
		la, lb = lb, la
	}
	shared, sb := object("shared")
	onlyA, ab := object("only a")
	loose, lo := object("named by no listing")
	if err := s.Commit(ctx, la, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-1", Snapshot: listing(shared, onlyA)},
		Objects: map[string][]byte{shared: sb, onlyA: ab, loose: lo}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, lb, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-1", Snapshot: listing(shared)}}); err != nil {
		t.Fatalf("a point naming a stored object, not sent: %v", err)
	}
	n, err := s.CollectObjects(ctx, nil)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d collected, %v; want 1 (the loose object)", n, err)
	}
	if _, err := s.Objects(ctx, []string{loose}); !errors.Is(err, clusterstore.ErrNotFound) {
		t.Fatalf("loose object after a sweep: %v", err)
	}
	if _, err := s.Objects(ctx, []string{shared, onlyA}); err != nil {
		t.Fatalf("named objects after a sweep: %v", err)
	}
	// Job a's point replaced without onlyA and shared: onlyA is gone
	// (collected with the commit, or by the next sweep), shared stays
	// (job b's point names it).
	if err := s.Commit(ctx, la, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-1", Snapshot: listing()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CollectObjects(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Objects(ctx, []string{onlyA}); !errors.Is(err, clusterstore.ErrNotFound) {
		t.Fatalf("an object no point names any more: %v, want collected", err)
	}
	if _, err := s.Objects(ctx, []string{shared}); err != nil {
		t.Fatalf("an object job b still names: %v", err)
	}
	// A point naming the collected object without sending it: refused,
	// nothing stored; sent again, it goes through.
	before := job(t, s, "a")
	err = s.Commit(ctx, la, clusterstore.Unit{Lines: seal(t, s, "a", 1), Point: &clusterstore.RecoveryPoint{ID: "cp-2", Seq: before.NextSeq, Snapshot: listing(onlyA)}})
	if !errors.Is(err, clusterstore.ErrMissingObject) {
		t.Fatalf("a point naming a collected object: %v, want ErrMissingObject", err)
	}
	if j := job(t, s, "a"); j.NextSeq != before.NextSeq {
		t.Fatal("a unit refused for a missing object stored its records")
	}
	if err := s.Commit(ctx, la, clusterstore.Unit{Lines: seal(t, s, "a", 1), Point: &clusterstore.RecoveryPoint{ID: "cp-2", Seq: before.NextSeq, Snapshot: listing(onlyA)},
		Objects: map[string][]byte{onlyA: ab}}); err != nil {
		t.Fatal(err)
	}
	// Sweeps racing commits: every object a committed point names is
	// still there.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.CollectObjects(ctx, nil); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var named []string
	for i := range 20 {
		sum, b := object(fmt.Sprint("content ", i))
		named = append(named, sum)
		id := fmt.Sprintf("cp-r%d", i)
		u := clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: id, Snapshot: listing(sum)}, Objects: map[string][]byte{sum: b}}
		if err := s.Commit(ctx, lb, u); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if _, err := s.Objects(ctx, named); err != nil {
		t.Fatalf("objects named by points committed beside sweeps: %v", err)
	}
}

// testCollectKeepsBundles: a git job's bundle is an object no listing
// names, named by the job's BundleFile instead: a sweep of every object
// (CollectObjects(nil)) keeps it, and the objects of its point, while
// the bundle the file named before (replaced by a later point's) and an
// object nothing names are collected.
func testCollectKeepsBundles(t *testing.T, s clusterstore.Store) {
	submit(t, s, "g", 0)
	l := claim(t, s, "n1", time.Minute)
	file, fb := object("a workspace file")
	old, ob := bundleObject("the first point's bundle")
	if err := s.Commit(ctx, l, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-1", Snapshot: listing(file)},
		Objects: map[string][]byte{file: fb, old: ob}, Files: map[string][]byte{clusterstore.BundleFile: []byte(old)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CollectObjects(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Objects(ctx, []string{file, old}); err != nil {
		t.Fatalf("a sweep of every object collected one a job names: %v", err)
	}
	bundle, bb := bundleObject("the second point's bundle")
	loose, lb := object("named by nothing")
	if err := s.Commit(ctx, l, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-2", Snapshot: listing(file)},
		Objects: map[string][]byte{bundle: bb, loose: lb}, Files: map[string][]byte{clusterstore.BundleFile: []byte(bundle + "\n")}}); err != nil {
		t.Fatal(err)
	}
	n, err := s.CollectObjects(ctx, nil)
	if err != nil || n != 2 {
		t.Fatalf("sweep: %d collected, %v; want 2 (the replaced bundle, the loose object)", n, err)
	}
	if _, err := s.Objects(ctx, []string{file, bundle}); err != nil {
		t.Fatalf("the job's bundle or point object after a sweep: %v", err)
	}
	for _, sum := range []string{old, loose} {
		if _, err := s.Objects(ctx, []string{sum}); !errors.Is(err, clusterstore.ErrNotFound) {
			t.Fatalf("an object nothing names after a sweep: %v, want collected", err)
		}
	}
}

// testCollectKeepsParkedBundle: a git job stopped for a steward keeps
// the bundle of its repository as the stop left it, named by the job's
// ParkedBundleFile beside its point's BundleFile: a sweep keeps both,
// and collects the parked bundle a later stop replaced.
func testCollectKeepsParkedBundle(t *testing.T, s clusterstore.Store) {
	submit(t, s, "g", 0)
	l := claim(t, s, "n1", time.Minute)
	file, fb := object("a workspace file")
	point, pb := bundleObject("the point's bundle")
	if err := s.Commit(ctx, l, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-1", Snapshot: listing(file)},
		Objects: map[string][]byte{file: fb, point: pb}, Files: map[string][]byte{clusterstore.BundleFile: []byte(point)}}); err != nil {
		t.Fatal(err)
	}
	parked, kb := bundleObject("the bundle the first stop parked")
	if err := s.Commit(ctx, l, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "parked", Snapshot: listing(file)},
		Objects: map[string][]byte{parked: kb}, Files: map[string][]byte{clusterstore.ParkedBundleFile: []byte(parked)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CollectObjects(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Objects(ctx, []string{file, point, parked}); err != nil {
		t.Fatalf("a sweep of every object collected one a job names: %v", err)
	}
	again, ab := bundleObject("the bundle the next stop parked")
	if err := s.Commit(ctx, l, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "parked", Snapshot: listing(file)},
		Objects: map[string][]byte{again: ab}, Files: map[string][]byte{clusterstore.ParkedBundleFile: []byte(again + "\n")}}); err != nil {
		t.Fatal(err)
	}
	n, err := s.CollectObjects(ctx, nil)
	if err != nil || n != 1 {
		t.Fatalf("sweep: %d collected, %v; want 1 (the replaced parked bundle)", n, err)
	}
	if _, err := s.Objects(ctx, []string{file, point, again}); err != nil {
		t.Fatalf("the job's bundles or point object after a sweep: %v", err)
	}
	if _, err := s.Objects(ctx, []string{parked}); !errors.Is(err, clusterstore.ErrNotFound) {
		t.Fatalf("a parked bundle a later stop replaced, after a sweep: %v, want collected", err)
	}
}

// testBundleMustBeStored: a unit whose bundle file (BundleFile or
// ParkedBundleFile) names an object the store does not hold (collected
// since the node stored it) and the unit does not carry is refused with
// ErrMissingObject and stores nothing — records, files, point, objects —
// with a point or without one; the same unit carrying the object goes
// through, and a later one naming it stored, not carried, too. A
// steering's files are held to the same rule.
func testBundleMustBeStored(t *testing.T, s clusterstore.Store) {
	submit(t, s, "g", 0)
	l := claim(t, s, "n1", time.Minute)
	file, fb := object("a workspace file")
	for i, name := range clusterstore.BundleFiles {
		bundle, bb := bundleObject("the bundle named by " + name)
		for _, withPoint := range []bool{true, false} {
			before := job(t, s, "g")
			u := func() clusterstore.Unit {
				u := clusterstore.Unit{Lines: seal(t, s, "g", 1), Objects: map[string][]byte{file: fb},
					Files: map[string][]byte{name: []byte(bundle + "\n")}}
				if withPoint {
					u.Point = &clusterstore.RecoveryPoint{ID: fmt.Sprintf("cp-%d", i), Seq: before.NextSeq, Snapshot: listing(file)}
				}
				return u
			}
			err := s.Commit(ctx, l, u())
			if !errors.Is(err, clusterstore.ErrMissingObject) {
				t.Fatalf("%s naming an object neither stored nor sent (point %v): %v, want ErrMissingObject", name, withPoint, err)
			}
			if j := job(t, s, "g"); j.NextSeq != before.NextSeq {
				t.Fatalf("a unit refused for its %s stored its records", name)
			}
			if fs, err := s.Files(ctx, "g"); err != nil || fs[name] != nil {
				t.Fatalf("a unit refused for its %s stored it: %q, %v", name, fs[name], err)
			}
			if ps, err := s.Points(ctx, "g"); err != nil || len(ps) != 0 {
				t.Fatalf("a unit refused for its %s stored its point: %v, %v", name, ps, err)
			}
			if _, err := s.Objects(ctx, []string{file}); !errors.Is(err, clusterstore.ErrNotFound) {
				t.Fatalf("a unit refused for its %s stored the objects it carried: %v", name, err)
			}
		}
		// Carried, it goes through; named again, stored, it needs no
		// sending.
		before := job(t, s, "g")
		ok := clusterstore.Unit{Lines: seal(t, s, "g", 1), Objects: map[string][]byte{bundle: bb},
			Files: map[string][]byte{name: []byte(bundle)}}
		if err := s.Commit(ctx, l, ok); err != nil {
			t.Fatalf("%s naming an object sent with it: %v", name, err)
		}
		if j := job(t, s, "g"); j.NextSeq != before.NextSeq+1 {
			t.Fatalf("the unit sending its %s's object: next %d, want %d", name, j.NextSeq, before.NextSeq+1)
		}
		if err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "g", 1), Files: map[string][]byte{name: []byte(bundle + "\n")}}); err != nil {
			t.Fatalf("%s naming a stored object, not sent: %v", name, err)
		}
		if fs, err := s.Files(ctx, "g"); err != nil || strings.TrimSpace(string(fs[name])) != bundle {
			t.Fatalf("%s after the commits: %q, %v", name, fs[name], err)
		}
		if _, err := s.Objects(ctx, []string{bundle}); err != nil {
			t.Fatalf("the object %s names: %v", name, err)
		}
	}
	// A steering's files: the same rule.
	missing, mb := bundleObject("a bundle a steering names")
	j := job(t, s, "g")
	st := clusterstore.Steering{Job: "g", Key: "k", From: j.Status, To: lifecycle.Canceled, Lines: seal(t, s, "g", 1),
		Files: map[string][]byte{clusterstore.BundleFile: []byte(missing)}}
	if _, err := s.Steer(ctx, st); !errors.Is(err, clusterstore.ErrMissingObject) {
		t.Fatalf("a steering naming an object neither stored nor sent: %v, want ErrMissingObject", err)
	}
	if after := job(t, s, "g"); after.Status != j.Status || after.Epoch != j.Epoch || after.NextSeq != j.NextSeq {
		t.Fatalf("a refused steering changed the job: %+v", after)
	}
	if use, err := s.SteerKey(ctx, "k"); err != nil || use != nil {
		t.Fatalf("a refused steering used its key: %+v, %v", use, err)
	}
	st.Objects = map[string][]byte{missing: mb}
	if _, err := s.Steer(ctx, st); err != nil {
		t.Fatalf("a steering sending the object its file names: %v", err)
	}
	if _, err := s.Objects(ctx, []string{missing}); err != nil {
		t.Fatalf("the object a steering sent: %v", err)
	}
}

// testSteerKeepsSnapshot: a steering that keeps a snapshot (a rollback's
// discarded work) stores it as a point of the job, with its objects, in
// the steering's transaction: a refused steering stores neither, a
// repeat nothing more; the point must be at one of the steering's own
// records, of a new id, and its listing's objects stored or sent; a sweep
// keeps what it names.
func testSteerKeepsSnapshot(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1), Status: lifecycle.InterventionRequired,
		Point: &clusterstore.RecoveryPoint{ID: "cp-start", Snapshot: listing()}}); err != nil {
		t.Fatal(err)
	}
	work, wb := object("the worker's notes")
	old, ob := object("kept by another point")
	submit(t, s, "b", 0)
	lb := claim(t, s, "n1", time.Minute)
	if err := s.Commit(ctx, lb, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-old", Snapshot: listing(old)}, Objects: map[string][]byte{old: ob}}); err != nil {
		t.Fatal(err)
	}
	kept := func(lines [][]byte, seq int64) clusterstore.Steering {
		return clusterstore.Steering{Job: "a", Key: "rb-1", Command: "rollback a", From: lifecycle.InterventionRequired, To: lifecycle.Pending,
			Lines: lines, Point: &clusterstore.RecoveryPoint{ID: "rollback-1", Seq: seq, Snapshot: listing(work, old)},
			Objects: map[string][]byte{work: wb}}
	}
	j := job(t, s, "a")
	points := func() []clusterstore.RecoveryPoint {
		t.Helper()
		ps, err := s.Points(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		return ps
	}
	// Refused: a point at no record of its own, of an invalid id, with
	// a forged object, naming an object neither stored nor sent, or
	// replacing a point. None stores its records, point, objects or key.
	for name, st := range map[string]clusterstore.Steering{
		"a point at an earlier record": kept(seal(t, s, "a", 1), j.NextSeq-1),
		"a point past its records":     kept(seal(t, s, "a", 1), j.NextSeq+1),
		"an invalid id": func() clusterstore.Steering {
			st := kept(seal(t, s, "a", 1), j.NextSeq)
			st.Point.ID = "../x"
			return st
		}(),
		"a forged object": func() clusterstore.Steering {
			st := kept(seal(t, s, "a", 1), j.NextSeq)
			st.Objects = map[string][]byte{work: []byte("not the notes")}
			return st
		}(),
		"an object neither stored nor sent": func() clusterstore.Steering {
			st := kept(seal(t, s, "a", 1), j.NextSeq)
			st.Objects = nil
			return st
		}(),
		"a point replacing one": func() clusterstore.Steering {
			st := kept(seal(t, s, "a", 1), j.NextSeq)
			st.Point.ID = "cp-start"
			return st
		}(),
	} {
		if _, err := s.Steer(ctx, st); err == nil {
			t.Fatalf("%s: stored", name)
		}
		if ps := points(); len(ps) != 1 || ps[0].ID != "cp-start" {
			t.Fatalf("%s: points %+v", name, ps)
		}
		if got := job(t, s, "a"); got.NextSeq != j.NextSeq || got.Epoch != j.Epoch {
			t.Fatalf("%s: the job changed: %+v", name, got)
		}
		if use, _ := s.SteerKey(ctx, "rb-1"); use != nil {
			t.Fatalf("%s: used its key", name)
		}
	}
	if _, err := s.Objects(ctx, []string{work}); !errors.Is(err, clusterstore.ErrNotFound) {
		t.Fatalf("a refused steering's object: %v, want ErrNotFound", err)
	}
	// Stored with the steering: the point, at its record, and its
	// objects (the one sent, the one another point holds).
	st := kept(seal(t, s, "a", 2), j.NextSeq)
	out, err := s.Steer(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != lifecycle.Pending || out.NextSeq != j.NextSeq+2 {
		t.Fatalf("after the steering: %+v", out)
	}
	ps := points()
	if len(ps) != 2 || ps[1].ID != "rollback-1" || ps[1].Seq != j.NextSeq || string(ps[1].Snapshot) != string(st.Point.Snapshot) {
		t.Fatalf("points after the steering: %+v", ps)
	}
	// Repeated: the first outcome, nothing more.
	if again, err := s.Steer(ctx, st); err != nil || again.NextSeq != out.NextSeq || len(points()) != 2 {
		t.Fatalf("repeat: %+v %v, points %+v", again, err, points())
	}
	// A sweep keeps the kept snapshot's objects, job b's point gone.
	if err := s.Commit(ctx, lb, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-old", Snapshot: listing()}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CollectObjects(ctx, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.Objects(ctx, []string{work, old})
	if err != nil || string(got[work]) != string(wb) || string(got[old]) != string(ob) {
		t.Fatalf("the kept snapshot's objects after a sweep: %q %v", got, err)
	}
}

// testBundleMustBeGit: an object a unit's or a steering's bundle file
// (BundleFile, ParkedBundleFile) names and the change carries must be a
// git bundle (clusterstore.CheckBundle): one that is not — another
// signature, a header without its end or a reference, a truncated pack —
// is refused with the whole change, with an error naming the file, the
// object and what is wrong, storing nothing; the same object named by no
// bundle file (a snapshot's, as a listing names it) is any content; a
// bundle goes through.
func testBundleMustBeGit(t *testing.T, s clusterstore.Store) {
	submit(t, s, "g", 0)
	l := claim(t, s, "n1", time.Minute)
	trunc := packOf(1, "an object's bytes")
	head := "# v2 git bundle\n" + fmt.Sprintf("%040x", 1) + " refs/heads/main\n\n"
	bad := []struct{ name, content, reason string }{
		{"not a bundle", "just some bytes\n", "signature line"},
		{"v4", "# v4 git bundle\n" + head[16:], "signature line"},
		{"no header end", "# v2 git bundle\n" + fmt.Sprintf("%040x", 1) + " refs/heads/main\n", "no empty line"},
		{"no reference", "# v2 git bundle\n-" + fmt.Sprintf("%040x", 1) + "\n\n" + string(packOf(0, "")), "no reference"},
		{"bad reference", "# v2 git bundle\nmain refs/heads/main\n\n" + string(packOf(0, "")), "not a reference"},
		{"no pack", head, "no pack"},
		{"truncated pack", head + string(trunc[:len(trunc)-1]), "checksum"},
		{"altered pack", head + string(packOf(0, "")[:8]) + "\x00\x00\x00\x01" + string(packOf(0, "")[12:]), "checksum"},
		{"capability in v2", "# v2 git bundle\n@object-format=sha1\n" + head[16:] + string(packOf(0, "")), "capability"},
	}
	for _, name := range clusterstore.BundleFiles {
		for _, c := range bad {
			sum, b := object(c.content)
			before := job(t, s, "g")
			err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "g", 1),
				Point:   &clusterstore.RecoveryPoint{ID: "cp-bad", Seq: before.NextSeq, Snapshot: listing()},
				Objects: map[string][]byte{sum: b}, Files: map[string][]byte{name: []byte(sum + "\n")}})
			if err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), sum) || !strings.Contains(err.Error(), c.reason) {
				t.Fatalf("%s naming %s: %v; want refused naming the file, object %s and %q", name, c.name, err, sum, c.reason)
			}
			if errors.Is(err, clusterstore.ErrMissingObject) {
				t.Fatalf("%s naming %s: %v; a bad bundle is not a missing one (the node would send it again)", name, c.name, err)
			}
			if j := job(t, s, "g"); j.NextSeq != before.NextSeq {
				t.Fatalf("a unit refused for its %s (%s) stored its records", name, c.name)
			}
			if fs, err := s.Files(ctx, "g"); err != nil || fs[name] != nil {
				t.Fatalf("a unit refused for its %s (%s) stored it: %q, %v", name, c.name, fs[name], err)
			}
			if ps, err := s.Points(ctx, "g"); err != nil || len(ps) != 0 {
				t.Fatalf("a unit refused for its %s (%s) stored its point: %v, %v", name, c.name, ps, err)
			}
			if _, err := s.Objects(ctx, []string{sum}); !errors.Is(err, clusterstore.ErrNotFound) {
				t.Fatalf("a unit refused for its %s (%s) stored the object: %v", name, c.name, err)
			}
		}
	}
	// Not named as a bundle, the same content is a snapshot's object.
	loose, lb := object(bad[0].content)
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "g", 1), Point: &clusterstore.RecoveryPoint{ID: "cp-1", Snapshot: listing(loose)},
		Objects: map[string][]byte{loose: lb}}); err != nil {
		t.Fatalf("a snapshot's object: %v", err)
	}
	// A steering's bundle files: the same rule.
	sum, b := object(bad[0].content)
	j := job(t, s, "g")
	st := clusterstore.Steering{Job: "g", Key: "k", From: j.Status, To: lifecycle.Canceled, Lines: seal(t, s, "g", 1),
		Objects: map[string][]byte{sum: b}, Files: map[string][]byte{clusterstore.ParkedBundleFile: []byte(sum)}}
	if _, err := s.Steer(ctx, st); err == nil || !strings.Contains(err.Error(), sum) || !strings.Contains(err.Error(), "not a git bundle") {
		t.Fatalf("a steering carrying a bad bundle: %v, want refused naming object %s", err, sum)
	}
	if after := job(t, s, "g"); after.Status != j.Status || after.Epoch != j.Epoch || after.NextSeq != j.NextSeq {
		t.Fatalf("a refused steering changed the job: %+v", after)
	}
	gsum, gb := bundleObject("a steering's bundle")
	st.Objects, st.Files = map[string][]byte{gsum: gb}, map[string][]byte{clusterstore.ParkedBundleFile: []byte(gsum)}
	if _, err := s.Steer(ctx, st); err != nil {
		t.Fatalf("a steering carrying a bundle: %v", err)
	}
}
