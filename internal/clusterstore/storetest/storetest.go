// Package storetest is the conformance suite every clusterstore.Store
// passes: claims, leases and rescues, the fence on every ownership-
// dependent write (River's rescuer overwriting a completed job; the zombie
// node that wakes after its lease was taken), budgets debited under the
// fence, history continuity, recovery points and their content-addressed
// objects, a job waiting for a human holding no lease,
// and idempotent steward commands (and the snapshot a rollback keeps). The folder store and the PostgreSQL store
// run the same tests (each package's own test calls Run).
package storetest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha1" //nolint:gosec // git's object ids and pack checksums
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/signing"
)

// Open returns a fresh, empty store for one test.
type Open func(t *testing.T) clusterstore.Store

// Run runs the suite.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		f    func(*testing.T, clusterstore.Store)
	}{
		{"SubmitOnce", testSubmitOnce},
		{"ClaimBumpsEpochOnce", testClaimOnce},
		{"ConcurrentClaimsNeverShare", testConcurrentClaims},
		{"RescueExpiredLease", testRescue},
		{"RescuerCannotOverwriteCompleted", testRiverRescuer},
		{"ZombieWritesRejected", testZombie},
		{"BudgetLastDollarOnce", testBudget},
		{"HumanWaitHoldsNoLease", testHumanWait},
		{"HistoryMustContinue", testContinuity},
		{"RecoveryPointUnderFence", testRecoveryPoint},
		{"SteerIdempotent", testSteerIdempotent},
		{"SteerStaleRefused", testSteerStale},
		{"SteerKeepsSnapshot", testSteerKeepsSnapshot},
		{"CommitFilesUnderFence", testCommitFiles},
		{"TemplateTickFiresOnce", testTemplates},
		{"NodeKeys", testNodes},
		{"SubmitKeyed", testSubmitKeyed},
		{"SubmittedFiles", testSubmittedFiles},
		{"CollectObjects", testCollectObjects},
		{"CollectKeepsBundles", testCollectKeepsBundles},
		{"CollectKeepsParkedBundle", testCollectKeepsParkedBundle},
		{"BundleMustBeStored", testBundleMustBeStored},
		{"BundleMustBeGit", testBundleMustBeGit},
		{"ReleaseBackoff", testReleaseBackoff},
		{"LeaseEndedIsNotAFence", testLeaseEnded},
		{"TakeBackOwnLeases", testTakeBack},
		{"CommitWritesTheCallersCopy", testCommitWrite},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			defer s.Close()
			tc.f(t, s)
		})
	}
}

type key struct {
	priv ed25519.PrivateKey
	id   string
}

func (k *key) ID() string             { return k.id }
func (k *key) Sign(msg []byte) []byte { return ed25519.Sign(k.priv, msg) }

func newKey(t *testing.T) *key {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &key{priv, signing.KeyID(pub)}
}

var ctx = context.Background()

// seal makes n transition records continuing j's history.
func seal(t *testing.T, s clusterstore.Store, id string, n int) [][]byte {
	t.Helper()
	j, err := s.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var recs []*history.Record
	for i := range n {
		recs = append(recs, &history.Record{Type: history.TypeError, Error: &history.ErrorInfo{Code: "TEST", Message: fmt.Sprint(i)}})
	}
	lines, _, err := history.Seal(recs, j.NextSeq, j.LastHash, time.Now(), newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func submit(t *testing.T, s clusterstore.Store, id string, budget int64) {
	t.Helper()
	if err := s.Submit(ctx, id, lifecycle.Pending, []byte(`{"job_id":"`+id+`"}`), budget); err != nil {
		t.Fatal(err)
	}
}

func claim(t *testing.T, s clusterstore.Store, node string, ttl time.Duration) *clusterstore.Lease {
	t.Helper()
	l, err := s.Claim(ctx, node, ttl)
	if err != nil {
		t.Fatal(err)
	}
	if l == nil {
		t.Fatalf("%s: nothing to claim", node)
	}
	return l
}

func noClaim(t *testing.T, s clusterstore.Store, node string) {
	t.Helper()
	l, err := s.Claim(ctx, node, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if l != nil {
		t.Fatalf("%s claimed %s at epoch %d; nothing should be claimable", node, l.Job, l.Epoch)
	}
}

func fenced(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, clusterstore.ErrFenced) {
		t.Fatalf("%s: got %v, want ErrFenced", what, err)
	}
}

func job(t *testing.T, s clusterstore.Store, id string) *clusterstore.Job {
	t.Helper()
	j, err := s.Job(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func testSubmitOnce(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	if err := s.Submit(ctx, "a", lifecycle.Pending, []byte(`{}`), 0); !errors.Is(err, clusterstore.ErrExists) {
		t.Fatalf("second submit: %v, want ErrExists", err)
	}
	if _, err := s.Job(ctx, "nope"); !errors.Is(err, clusterstore.ErrNotFound) {
		t.Fatalf("missing job: %v, want ErrNotFound", err)
	}
	j := job(t, s, "a")
	if j.Status != lifecycle.Pending || j.Epoch != 0 || j.Owner != "" || string(j.Manifest) != `{"job_id":"a"}` {
		t.Fatalf("submitted job: %+v", j)
	}
	js, err := s.Jobs(ctx)
	if err != nil || len(js) != 1 {
		t.Fatalf("Jobs: %v %v", js, err)
	}
}

func testClaimOnce(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	if l.Job != "a" || l.Epoch != 1 || l.Rescued {
		t.Fatalf("lease %+v", l)
	}
	noClaim(t, s, "n2")
	if err := s.Heartbeat(ctx, l, time.Minute); err != nil {
		t.Fatal(err)
	}
	if j := job(t, s, "a"); j.Owner != "n1" || j.Epoch != 1 {
		t.Fatalf("job after claim: %+v", j)
	}
}

func testConcurrentClaims(t *testing.T, s clusterstore.Store) {
	const jobs, nodes = 20, 4
	for i := range jobs {
		submit(t, s, fmt.Sprintf("j%02d", i), 0)
	}
	var mu sync.Mutex
	got := map[string]string{}
	var wg sync.WaitGroup
	var errs atomic.Int64
	for n := range nodes {
		wg.Go(func() {
			node := fmt.Sprintf("n%d", n)
			for {
				l, err := s.Claim(ctx, node, time.Minute)
				if err != nil {
					errs.Add(1)
					t.Error(err)
					return
				}
				if l == nil {
					return
				}
				mu.Lock()
				if prev, ok := got[l.Job]; ok {
					t.Errorf("job %s claimed by %s and %s", l.Job, prev, node)
				}
				got[l.Job] = node
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != jobs {
		t.Fatalf("claimed %d jobs of %d", len(got), jobs)
	}
}

const shortTTL = 300 * time.Millisecond

func expire() { time.Sleep(shortTTL + 300*time.Millisecond) }

func testRescue(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	old := claim(t, s, "n1", shortTTL)
	expire()
	l := claim(t, s, "n2", time.Minute)
	if !l.Rescued || l.Epoch != old.Epoch+1 || l.Job != "a" {
		t.Fatalf("rescue lease %+v after %+v", l, old)
	}
	if j := job(t, s, "a"); j.Rescues != 1 || j.Owner != "n2" {
		t.Fatalf("job after rescue: %+v", j)
	}
	fenced(t, s.Heartbeat(ctx, old, time.Minute), "old owner's heartbeat")
}

// testRiverRescuer: River's rescuer updated a job by id alone and so
// overwrote a job its first owner had completed meanwhile. Here: a
// completed job is not claimable, so no rescue; and when the rescue came
// first, the old owner's completion is the one refused.
func testRiverRescuer(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l1 := claim(t, s, "n1", shortTTL)
	expire()
	// The first owner completes after its lease expired but before any
	// rescue: nobody else wrote, so the epoch still holds.
	if err := s.Commit(ctx, l1, clusterstore.Unit{Lines: seal(t, s, "a", 1), Status: lifecycle.Success}); err != nil {
		t.Fatal(err)
	}
	noClaim(t, s, "rescuer")
	if j := job(t, s, "a"); j.Status != lifecycle.Success || j.Owner != "" {
		t.Fatalf("completed job: %+v", j)
	}

	// The rescue comes first: the rescuer completes; the old owner's
	// late writes, whatever they say, are refused.
	submit(t, s, "b", 0)
	old := claim(t, s, "n1", shortTTL)
	expire()
	res := claim(t, s, "rescuer", time.Minute)
	if err := s.Commit(ctx, res, clusterstore.Unit{Lines: seal(t, s, "b", 2), Status: lifecycle.Success}); err != nil {
		t.Fatal(err)
	}
	fenced(t, s.Commit(ctx, old, clusterstore.Unit{Lines: seal(t, s, "b", 1), Status: lifecycle.Running}), "old owner's overwrite")
	fenced(t, s.Commit(ctx, old, clusterstore.Unit{Status: lifecycle.InterventionRequired}), "old owner's bare transition")
	j := job(t, s, "b")
	if j.Status != lifecycle.Success || j.NextSeq != 2 {
		t.Fatalf("completed job after the old owner's writes: %+v", j)
	}
}

// testZombie: a node paused past its lease (SIGSTOP, a GC pause, a
// partition) wakes and carries on; every write it makes is refused, and
// the history holds only the live owner's records.
func testZombie(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	zombie := claim(t, s, "n1", shortTTL)
	if err := s.Commit(ctx, zombie, clusterstore.Unit{Lines: seal(t, s, "a", 1), Status: lifecycle.Running}); err != nil {
		t.Fatal(err)
	}
	expire() // paused
	live := claim(t, s, "n2", time.Minute)
	liveLines := seal(t, s, "a", 2)
	if err := s.Commit(ctx, live, clusterstore.Unit{Lines: liveLines}); err != nil {
		t.Fatal(err)
	}
	// The zombie wakes: heartbeat, append, debit, recovery point,
	// release — all refused.
	fenced(t, s.Heartbeat(ctx, zombie, time.Minute), "zombie heartbeat")
	fenced(t, s.Commit(ctx, zombie, clusterstore.Unit{Lines: seal(t, s, "a", 1)}), "zombie append")
	fenced(t, s.Commit(ctx, zombie, clusterstore.Unit{DebitMicros: 1}), "zombie debit")
	zsum, zb := object("the zombie's file")
	fenced(t, s.Commit(ctx, zombie, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-z", Seq: 1},
		Objects: map[string][]byte{zsum: zb}}), "zombie recovery point")
	fenced(t, s.Commit(ctx, zombie, clusterstore.Unit{Release: true}), "zombie release")
	lines, err := s.History(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != 3 || string(lines[1]) != string(liveLines[0]) || string(lines[2]) != string(liveLines[1]) {
		t.Fatalf("history has %d records; want the zombie's first and the live owner's two", len(lines))
	}
	if ps, _ := s.Points(ctx, "a"); len(ps) != 0 {
		t.Fatalf("zombie stored a recovery point: %+v", ps)
	}
	if _, err := s.Objects(ctx, []string{zsum}); !errors.Is(err, clusterstore.ErrNotFound) {
		t.Fatalf("zombie's snapshot object: %v, want ErrNotFound", err)
	}
	if j := job(t, s, "a"); j.SpentMicros != 0 || j.Owner != "n2" {
		t.Fatalf("job after the zombie: %+v", j)
	}
}

// intentLines makes a unit's records that start a call: an error record
// and an intent, continuing a's history.
func intentLines(t *testing.T, s clusterstore.Store, id string) [][]byte {
	t.Helper()
	j := job(t, s, id)
	n := int(j.NextSeq)
	recs := []*history.Record{
		{Type: history.TypeError, Error: &history.ErrorInfo{Code: "TEST", Message: "before the call"}},
		{Type: history.TypeIntent, Interaction: &n, Phase: "work", Role: "worker"},
	}
	lines, _, err := history.Seal(recs, j.NextSeq, j.LastHash, time.Now(), newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// testBudget: the budget is checked, under the fence, where spending
// starts. Two nodes (one of them stale) race to debit a call and start
// the next with the job's last dollar: only the owner's commit lands. A
// commit whose debit spends the last dollar cannot start a call, and
// stores nothing; a debit alone records what a call cost, even past the
// budget (it was spent in the world), and no call starts after it.
func testBudget(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 3_000_000)
	stale := claim(t, s, "n1", shortTTL)
	if err := s.Commit(ctx, stale, clusterstore.Unit{DebitMicros: 2_000_000}); err != nil {
		t.Fatal(err)
	}
	expire()
	live := claim(t, s, "n2", time.Minute)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, l := range []*clusterstore.Lease{stale, live} {
		lines := intentLines(t, s, "a")
		wg.Go(func() { errs[i] = s.Commit(ctx, l, clusterstore.Unit{DebitMicros: 500_000, Lines: lines}) })
	}
	wg.Wait()
	fenced(t, errs[0], "stale node's call")
	if errs[1] != nil {
		t.Fatalf("live node's call with a dollar left: %v", errs[1])
	}
	if j := job(t, s, "a"); j.SpentMicros != 2_500_000 {
		t.Fatalf("spent %d µ$, want 2500000", j.SpentMicros)
	}
	// The last half dollar debited with a call to start: refused whole.
	before := job(t, s, "a")
	err := s.Commit(ctx, live, clusterstore.Unit{DebitMicros: 500_000, Lines: intentLines(t, s, "a")})
	if !errors.Is(err, clusterstore.ErrBudget) {
		t.Fatalf("a call started with the last dollar spent: %v, want ErrBudget", err)
	}
	if j := job(t, s, "a"); j.SpentMicros != before.SpentMicros || j.NextSeq != before.NextSeq {
		t.Fatalf("a refused unit was stored: %+v", j)
	}
	// The call's cost is recorded past the budget: it was spent.
	if err := s.Commit(ctx, live, clusterstore.Unit{DebitMicros: 1_000_000, Lines: seal(t, s, "a", 1)}); err != nil {
		t.Fatalf("debit past the budget: %v", err)
	}
	if j := job(t, s, "a"); j.SpentMicros != 3_500_000 {
		t.Fatalf("spent %d µ$, want 3500000", j.SpentMicros)
	}
	if err := s.Commit(ctx, live, clusterstore.Unit{Lines: intentLines(t, s, "a")}); !errors.Is(err, clusterstore.ErrBudget) {
		t.Fatalf("a call after the budget was spent: %v, want ErrBudget", err)
	}
	// A raised budget (the manifest the unit commits says it) lets the
	// next call start: the budget is checked after it is raised.
	raised := int64(5_000_000)
	if err := s.Commit(ctx, live, clusterstore.Unit{BudgetMicros: &raised, Lines: intentLines(t, s, "a")}); err != nil {
		t.Fatalf("a call after the budget was raised: %v", err)
	}
	if j := job(t, s, "a"); j.BudgetMicros != raised {
		t.Fatalf("budget %d, want %d", j.BudgetMicros, raised)
	}
}

func testHumanWait(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1), Status: lifecycle.InterventionRequired}); err != nil {
		t.Fatal(err)
	}
	j := job(t, s, "a")
	if j.Owner != "" || !j.LeaseUntil.IsZero() {
		t.Fatalf("a job waiting for a human holds a lease: %+v", j)
	}
	noClaim(t, s, "n2")
	fenced(t, s.Heartbeat(ctx, l, time.Minute), "heartbeat of a released lease")
	fenced(t, s.Commit(ctx, l, clusterstore.Unit{Status: lifecycle.Running}), "write after release")
	// The human answers: the job is runnable again, at a new epoch.
	j2, err := s.Steer(ctx, clusterstore.Steering{Job: "a", Key: "k1", From: lifecycle.InterventionRequired, To: lifecycle.Pending, Lines: seal(t, s, "a", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if j2.Status != lifecycle.Pending || j2.Epoch != l.Epoch+1 {
		t.Fatalf("after the answer: %+v", j2)
	}
	l2 := claim(t, s, "n2", time.Minute)
	if l2.Epoch != j2.Epoch+1 || l2.Rescued {
		t.Fatalf("claim after the answer: %+v", l2)
	}
}

func testContinuity(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	lines := seal(t, s, "a", 2)
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: lines}); err != nil {
		t.Fatal(err)
	}
	// The same records again (a retried commit whose first try landed)
	// do not continue the history.
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: lines, Status: lifecycle.Success}); !errors.Is(err, clusterstore.ErrConflict) {
		t.Fatalf("replayed records: %v, want ErrConflict", err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: [][]byte{[]byte("not a record\n")}}); !errors.Is(err, clusterstore.ErrConflict) {
		t.Fatalf("garbage record: %v, want ErrConflict", err)
	}
	j := job(t, s, "a")
	if j.NextSeq != 2 || j.Status != lifecycle.Pending {
		t.Fatalf("job after refused commits: %+v", j)
	}
	got, err := s.History(ctx, "a")
	if err != nil || len(got) != 2 {
		t.Fatalf("history: %d records, %v", len(got), err)
	}
	for i := range got {
		e, err := history.ParseLine(got[i])
		if err != nil || e.Seq != int64(i) {
			t.Fatalf("record %d: %+v %v", i, e, err)
		}
	}
}

func object(content string) (string, []byte) {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:]), []byte(content)
}

// bundleObject is an object holding a git bundle (as
// clusterstore.CheckBundle reads one), of its own for each label: a v2
// header naming one reference, whose object id is label's SHA-1, and an
// empty pack with its checksum.
func bundleObject(label string) (string, []byte) {
	oid := sha1.Sum([]byte(label)) //nolint:gosec // an object id, as git's
	b := fmt.Appendf(nil, "# v2 git bundle\n%x refs/heads/main\n\n", oid)
	b = append(b, packOf(0, "")...)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), b
}

// packOf is a pack of version 2 saying it holds n objects, data its
// body, with its SHA-1 checksum.
func packOf(n uint32, data string) []byte {
	p := append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte("PACK"), 2), n), data...)
	sum := sha1.Sum(p) //nolint:gosec // git's pack checksum
	return append(p, sum[:]...)
}

// testRecoveryPoint: a recovery point's listing and its objects are
// stored with the unit, content-addressed (stored once for every point and
// job that names them); an object that is not the content of its hash is
// refused with its whole unit; a point of the same id replaces the first.
func testRecoveryPoint(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	submit(t, s, "b", 0)
	l := claim(t, s, "n1", time.Minute)
	lb := claim(t, s, "n1", time.Minute)
	if l.Job != "a" {
		l, lb = lb, l
	}
	sum, b := object("print('hi')\n")
	p := clusterstore.RecoveryPoint{ID: "cp-start", Seq: 0, Snapshot: []byte(`{"entries":[]}`)}
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1), Point: &p, Objects: map[string][]byte{sum: b}}); err != nil {
		t.Fatal(err)
	}
	ps, err := s.Points(ctx, "a")
	if err != nil || len(ps) != 1 || ps[0].ID != "cp-start" || string(ps[0].Snapshot) != `{"entries":[]}` {
		t.Fatalf("points %+v %v", ps, err)
	}
	got, err := s.Objects(ctx, []string{sum})
	if err != nil || string(got[sum]) != string(b) {
		t.Fatalf("objects %q %v", got, err)
	}
	// The same content from another job: stored once, still readable.
	if err := s.Commit(ctx, lb, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "cp-start"}, Objects: map[string][]byte{sum: b}}); err != nil {
		t.Fatalf("the same object again: %v", err)
	}
	// A forged object refuses its unit.
	other, _ := object("other")
	before := job(t, s, "a")
	err = s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1), Point: &clusterstore.RecoveryPoint{ID: "cp-x", Seq: 1},
		Objects: map[string][]byte{other: []byte("not other")}})
	if err == nil {
		t.Fatal("an object not holding the content of its hash was stored")
	}
	if j := job(t, s, "a"); j.NextSeq != before.NextSeq {
		t.Fatal("a refused unit stored its records")
	}
	if _, err := s.Objects(ctx, []string{other}); !errors.Is(err, clusterstore.ErrNotFound) {
		t.Fatalf("forged object: %v, want ErrNotFound", err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Point: &clusterstore.RecoveryPoint{ID: "../x"}}); err == nil {
		t.Fatal("a point id that is a path was stored")
	}
	// The same point id again replaces the point.
	p2 := clusterstore.RecoveryPoint{ID: "cp-start", Seq: 0, Snapshot: []byte(`{"entries":[{}]}`)}
	if err := s.Commit(ctx, l, clusterstore.Unit{Point: &p2}); err != nil {
		t.Fatal(err)
	}
	if ps, _ := s.Points(ctx, "a"); len(ps) != 1 || string(ps[0].Snapshot) != `{"entries":[{}]}` {
		t.Fatalf("points after a replacement: %+v", ps)
	}
}

// testCommitFiles: a unit's files (the protocol's artifacts) are stored
// under the fence with its records; a fenced unit stores none.
func testCommitFiles(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1), Files: map[string][]byte{"artifacts/sha256/ab": []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Files: map[string][]byte{"/etc/passwd": nil}}); err == nil {
		t.Fatal("a file outside the job's folder was stored")
	}
	if _, err := s.Steer(ctx, clusterstore.Steering{Job: "a", Key: "k", From: lifecycle.Pending, To: lifecycle.Canceled, Lines: seal(t, s, "a", 1)}); err != nil {
		t.Fatal(err)
	}
	fenced(t, s.Commit(ctx, l, clusterstore.Unit{Files: map[string][]byte{"artifacts/sha256/cd": []byte("y")}}), "files after a halt")
	fs, err := s.Files(ctx, "a")
	if err != nil || len(fs) != 1 || string(fs["artifacts/sha256/ab"]) != "x" {
		t.Fatalf("files %v %v", fs, err)
	}
}

func testSteerIdempotent(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	// A steward halts the running job: the runner is fenced out.
	halt := seal(t, s, "a", 1)
	halt1 := clusterstore.Steering{Job: "a", Key: "halt-1", From: lifecycle.Pending, To: lifecycle.Canceled, Lines: halt}
	j1, err := s.Steer(ctx, halt1)
	if err != nil {
		t.Fatal(err)
	}
	fenced(t, s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1)}), "runner after a halt")
	// The same command again: the same outcome, nothing more stored.
	j2, err := s.Steer(ctx, halt1)
	if err != nil {
		t.Fatalf("repeated command: %v", err)
	}
	if j2.Epoch != j1.Epoch || j2.NextSeq != j1.NextSeq || j2.Status != lifecycle.Canceled {
		t.Fatalf("repeat changed the job: %+v vs %+v", j2, j1)
	}
	// Another command with the key is a conflict.
	if _, err := s.Steer(ctx, clusterstore.Steering{Job: "a", Key: "halt-1", From: lifecycle.Canceled, To: lifecycle.Pending}); !errors.Is(err, clusterstore.ErrIdempotency) {
		t.Fatalf("other command, same key: %v", err)
	}
	// A command that does not fit the status is refused.
	if _, err := s.Steer(ctx, clusterstore.Steering{Job: "a", Key: "resume-9", From: lifecycle.InterventionRequired, To: lifecycle.Pending}); !errors.Is(err, clusterstore.ErrConflict) {
		t.Fatalf("out-of-order command: %v", err)
	}
	// The key says what it was used for, and its outcome.
	use, err := s.SteerKey(ctx, "halt-1")
	if err != nil || use == nil || use.Job != "a" || use.Status != lifecycle.Canceled || use.Epoch != j1.Epoch || use.Command != clusterstore.SteerCommand(&halt1) {
		t.Fatalf("key use %+v %v", use, err)
	}
	if use, err := s.SteerKey(ctx, "resume-9"); err != nil || use != nil {
		t.Fatalf("a refused command's key is used: %+v %v", use, err)
	}
	// The same key for another job is another command.
	submit(t, s, "b", 0)
	if _, err := s.Steer(ctx, clusterstore.Steering{Job: "b", Key: "halt-1", Command: halt1.Command, From: lifecycle.Pending, To: lifecycle.Canceled}); !errors.Is(err, clusterstore.ErrIdempotency) {
		t.Fatalf("same key, another job: %v", err)
	}
}

// testSteerStale: a steward's change computed on a history that moved on
// meanwhile (the runner appended) is refused whole, so the steward reads
// again; its manifest and files go in with it.
func testSteerStale(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	stale := seal(t, s, "a", 1)
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1), Status: lifecycle.Running}); err != nil {
		t.Fatal(err)
	}
	st := clusterstore.Steering{Job: "a", Key: "k", Command: "halt a", From: lifecycle.Running, To: lifecycle.Canceled,
		Lines: stale, Manifest: []byte(`{"job_id":"a","status":"CANCELED"}`), Files: map[string][]byte{"replies/x.json": []byte("{}")}}
	if _, err := s.Steer(ctx, st); !errors.Is(err, clusterstore.ErrConflict) {
		t.Fatalf("stale steering: %v, want ErrConflict", err)
	}
	if use, _ := s.SteerKey(ctx, "k"); use != nil {
		t.Fatal("a refused steering used its key")
	}
	st.Lines = seal(t, s, "a", 1)
	j, err := s.Steer(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != lifecycle.Canceled || string(j.Manifest) != string(st.Manifest) || j.Owner != "" || j.Epoch != l.Epoch+1 {
		t.Fatalf("after the steering: %+v", j)
	}
	fs, err := s.Files(ctx, "a")
	if err != nil || len(fs) != 1 || string(fs["replies/x.json"]) != "{}" {
		t.Fatalf("files %v %v", fs, err)
	}
	fenced(t, s.Heartbeat(ctx, l, time.Minute), "runner after a halt")
	bad := clusterstore.Steering{Job: "a", Key: "k2", From: lifecycle.Canceled, To: lifecycle.Canceled, Files: map[string][]byte{"../x": nil}}
	if _, err := s.Steer(ctx, bad); err == nil {
		t.Fatal("a file outside the job's folder was accepted")
	}
}

// testTemplates: a schedule's template is never claimed; each of its
// ticks fires once, whoever fires it and however many try at once.
func testTemplates(t *testing.T, s clusterstore.Store) {
	if err := s.Submit(ctx, "tpl", lifecycle.Pending, []byte(`{"job_id":"tpl","schedule":{"cron":"* * * * *"}}`), 0); err != nil {
		t.Fatal(err)
	}
	if j := job(t, s, "tpl"); !j.Template {
		t.Fatalf("template not marked: %+v", j)
	}
	noClaim(t, s, "n1")
	tick := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	if last, err := s.LastTick(ctx, "tpl"); err != nil || !last.IsZero() {
		t.Fatalf("last tick before any: %v %v", last, err)
	}
	var fired atomic.Int64
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			ok, err := s.Fire(ctx, clusterstore.Tick{Template: "tpl", At: tick, Node: fmt.Sprint("n", i), Run: "tpl-run", Manifest: []byte(`{"job_id":"tpl-run"}`)})
			if err != nil {
				t.Error(err)
			}
			if ok {
				fired.Add(1)
			}
		})
	}
	wg.Wait()
	if fired.Load() != 1 {
		t.Fatalf("tick fired %d times", fired.Load())
	}
	if last, err := s.LastTick(ctx, "tpl"); err != nil || !last.Equal(tick) {
		t.Fatalf("last tick %v %v", last, err)
	}
	if j := job(t, s, "tpl-run"); j.Status != lifecycle.Pending || j.Template {
		t.Fatalf("run %+v", j)
	}
	l := claim(t, s, "n1", time.Minute)
	if l.Job != "tpl-run" {
		t.Fatalf("claimed %s", l.Job)
	}
	// A skipped tick (no run) is fired once too.
	next := tick.Add(time.Minute)
	if ok, err := s.Fire(ctx, clusterstore.Tick{Template: "tpl", At: next, Node: "n1"}); err != nil || !ok {
		t.Fatalf("skipped tick: %v %v", ok, err)
	}
	if ok, err := s.Fire(ctx, clusterstore.Tick{Template: "tpl", At: next, Node: "n2"}); err != nil || ok {
		t.Fatalf("skipped tick again: %v %v", ok, err)
	}
}

func testNodes(t *testing.T, s clusterstore.Store) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	pub2, _, _ := ed25519.GenerateKey(rand.Reader)
	if err := s.RegisterNode(ctx, "n1", pub); err != nil {
		t.Fatal(err)
	}
	if err := s.RegisterNode(ctx, "n1", pub); err != nil {
		t.Fatalf("re-register: %v", err)
	}
	if err := s.RegisterNode(ctx, "n1", pub2); err == nil {
		t.Fatal("a node re-registered with another key")
	}
	ns, err := s.Nodes(ctx)
	if err != nil || len(ns) != 1 || ns[0].KeyID != signing.KeyID(pub) || !ns[0].Public.Equal(pub) || ns[0].Steward {
		t.Fatalf("nodes %+v %v", ns, err)
	}
	// A steward's key is listed with the nodes', marked.
	if err := s.RegisterSteward(ctx, "steward-x", pub2); err != nil {
		t.Fatal(err)
	}
	ns, err = s.Nodes(ctx)
	if err != nil || len(ns) != 2 || ns[1].ID != "steward-x" || !ns[1].Steward || !ns[1].Public.Equal(pub2) {
		t.Fatalf("nodes with a steward %+v %v", ns, err)
	}
}

// testReleaseBackoff: a node that could not start a job gives it back
// with a backoff: no node claims it meanwhile (rather than every node in a
// loop), and once the backoff is over it is claimable, not as a rescue.
// A backoff is a release's only.
func testReleaseBackoff(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	if err := s.Commit(ctx, l, clusterstore.Unit{Backoff: time.Minute}); err == nil {
		t.Fatal("a backoff without a release was accepted")
	}
	if err := s.Commit(ctx, l, clusterstore.Unit{Release: true, Backoff: shortTTL}); err != nil {
		t.Fatal(err)
	}
	j := job(t, s, "a")
	if j.Owner != "" || !j.LeaseUntil.IsZero() || j.ClaimAfter.IsZero() {
		t.Fatalf("job given back with a backoff: %+v", j)
	}
	noClaim(t, s, "n1")
	noClaim(t, s, "n2")
	expire()
	again := claim(t, s, "n2", time.Minute)
	if again.Rescued || again.Epoch != l.Epoch+1 {
		t.Fatalf("claim after the backoff: %+v", again)
	}
	if j := job(t, s, "a"); j.Rescues != 0 || !j.ClaimAfter.IsZero() {
		t.Fatalf("job claimed after its backoff: %+v", j)
	}
	// A plain release is claimable at once.
	if err := s.Commit(ctx, again, clusterstore.Unit{Release: true}); err != nil {
		t.Fatal(err)
	}
	claim(t, s, "n1", time.Minute)
}

// testLeaseEnded: a lease its own holder ended (a commit to a status the
// daemon does not run, or a release) refuses every write as a fence does,
// but says so (ErrLeaseEnded): the holder logs no fence. A lease whose
// epoch another node or a steward moved on is a fence proper, never
// ErrLeaseEnded.
func testLeaseEnded(t *testing.T, s clusterstore.Store) {
	ended := func(err error, what string) {
		t.Helper()
		fenced(t, err, what)
		if !errors.Is(err, clusterstore.ErrLeaseEnded) {
			t.Fatalf("%s: got %v, want ErrLeaseEnded", what, err)
		}
	}
	proper := func(err error, what string) {
		t.Helper()
		fenced(t, err, what)
		if errors.Is(err, clusterstore.ErrLeaseEnded) {
			t.Fatalf("%s: got %v, want a fence proper", what, err)
		}
	}
	submit(t, s, "a", 0)
	l := claim(t, s, "n1", time.Minute)
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1), Status: lifecycle.Success}); err != nil {
		t.Fatal(err)
	}
	ended(s.Heartbeat(ctx, l, time.Minute), "heartbeat after the job ended")
	ended(s.Commit(ctx, l, clusterstore.Unit{Release: true}), "release after the job ended")

	submit(t, s, "b", 0)
	lb := claim(t, s, "n1", time.Minute)
	if err := s.Commit(ctx, lb, clusterstore.Unit{Release: true}); err != nil {
		t.Fatal(err)
	}
	ended(s.Heartbeat(ctx, lb, time.Minute), "heartbeat after a release")
	lb2 := claim(t, s, "n2", time.Minute)
	proper(s.Heartbeat(ctx, lb, time.Minute), "heartbeat after another node claimed the job")
	if _, err := s.Steer(ctx, clusterstore.Steering{Job: "b", Key: "k1", From: lifecycle.Pending, To: lifecycle.Canceled, Lines: seal(t, s, "b", 1)}); err != nil {
		t.Fatal(err)
	}
	proper(s.Heartbeat(ctx, lb2, time.Minute), "heartbeat after a steward's change")
}

// testTakeBack: a node started again (its previous process provably gone)
// takes back at once every runnable job whose unexpired lease names it,
// each at a new epoch (the previous process's writes fenced), and nothing
// else: not another node's lease, not a job it ended or that waits for a
// human.
func testTakeBack(t *testing.T, s clusterstore.Store) {
	for _, id := range []string{"a", "b", "c", "d"} {
		submit(t, s, id, 0)
	}
	var mine []*clusterstore.Lease
	for range 3 {
		mine = append(mine, claim(t, s, "n1", time.Hour))
	}
	other := claim(t, s, "n2", time.Hour)
	// One of n1's jobs waits for a human: it holds no lease.
	waits := mine[2]
	if err := s.Commit(ctx, waits, clusterstore.Unit{Lines: seal(t, s, waits.Job, 1), Status: lifecycle.InterventionRequired}); err != nil {
		t.Fatal(err)
	}
	noClaim(t, s, "n3")
	back, err := s.TakeBack(ctx, "n1", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != 2 {
		t.Fatalf("took back %d leases, want n1's two runnable jobs: %+v", len(back), back)
	}
	for i, l := range back {
		old := mine[0]
		if mine[1].Job == l.Job {
			old = mine[1]
		}
		if l.Job != old.Job || l.Node != "n1" || l.Epoch != old.Epoch+1 || (i == 1 && back[0].Job == l.Job) {
			t.Fatalf("taken back %+v for %+v", l, old)
		}
		fenced(t, s.Heartbeat(ctx, old, time.Minute), "the previous process's heartbeat")
		fenced(t, s.Commit(ctx, old, clusterstore.Unit{Lines: seal(t, s, old.Job, 1)}), "the previous process's append")
		if err := s.Heartbeat(ctx, l, time.Minute); err != nil {
			t.Fatalf("heartbeat of a lease taken back: %v", err)
		}
	}
	if err := s.Heartbeat(ctx, other, time.Minute); err != nil {
		t.Fatalf("another node's lease after a take-back: %v", err)
	}
	if j := job(t, s, waits.Job); j.Owner != "" || j.Status != lifecycle.InterventionRequired {
		t.Fatalf("a job waiting for a human after a take-back: %+v", j)
	}
	if again, err := s.TakeBack(ctx, "n9", time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("a node holding no lease took back %+v, %v", again, err)
	}
}

// testCommitWrite: a unit's Write (the engine's own write of its records
// into the folder it runs in: history.Options.Commit) is called once, after
// the store stored the unit, and never for a unit the store refuses (the
// fence, a history it does not continue, the budget): a folder is never
// ahead of its store. A unit whose Write fails is still stored (the
// store's record stands; the folder is the copy).
func testCommitWrite(t *testing.T, s clusterstore.Store) {
	submit(t, s, "a", 1_000_000)
	stale := claim(t, s, "n1", shortTTL)
	expire()
	l := claim(t, s, "n2", time.Minute)
	calls := 0
	var atWrite *clusterstore.Job
	write := func() error {
		calls++
		j, err := s.Job(ctx, "a")
		atWrite = j
		return err
	}
	lines := seal(t, s, "a", 1)
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: lines, Write: write}); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || atWrite == nil || atWrite.NextSeq != 1 {
		t.Fatalf("Write called %d times, the store at it: %+v; want once, after the unit was stored", calls, atWrite)
	}
	fenced(t, s.Commit(ctx, stale, clusterstore.Unit{Lines: seal(t, s, "a", 1), Write: write}), "stale node's unit")
	if err := s.Commit(ctx, l, clusterstore.Unit{Lines: lines, Write: write}); !errors.Is(err, clusterstore.ErrConflict) {
		t.Fatalf("replayed records: %v, want ErrConflict", err)
	}
	err := s.Commit(ctx, l, clusterstore.Unit{DebitMicros: 1_000_000, Lines: intentLines(t, s, "a"), Write: write})
	if !errors.Is(err, clusterstore.ErrBudget) {
		t.Fatalf("a call with the budget spent: %v, want ErrBudget", err)
	}
	if calls != 1 {
		t.Fatalf("Write called %d times; a refused unit must not be written", calls)
	}
	bad := errors.New("disk full")
	err = s.Commit(ctx, l, clusterstore.Unit{Lines: seal(t, s, "a", 1), Write: func() error { return bad }})
	if !errors.Is(err, bad) {
		t.Fatalf("a failed Write: %v, want its error", err)
	}
	if j := job(t, s, "a"); j.NextSeq != 2 {
		t.Fatalf("after a failed Write the store is at record %d, want 2 (its record stands)", j.NextSeq)
	}
}
