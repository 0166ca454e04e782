// Package cluster runs Logist jobs from a shared system of record
// (clusterstore.Store: PostgreSQL in production) on one node of many. A
// node claims a job (a lease at a new epoch), writes the job in folder form
// into its own working folder from the store, and runs the unchanged engine
// on it; every history unit the engine appends is first committed to the
// store under the lease's fence (history.Options.Commit), with the
// manifest it commits, its status and the cost it adds, so the store is
// always at least as far as the folder and a node whose lease moved on
// writes nothing more. A heartbeat keeps the lease; losing it (fenced, or
// the store unreachable for a lease's time) kills the agent in flight.
// Another node rescues an expired lease and resumes from the store: an
// intent without a response is asked again, as after a crash. File mode's
// logistd commits its units through the same seam, as the owner of its
// jobs folder's store (OwnCommit).
package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/protocol"
	"github.com/logist/logist/internal/runner"
	"github.com/logist/logist/internal/schedule"
	"github.com/logist/logist/internal/signing"
)

// errLeaseLost ends a run whose lease this node no longer holds.
var errLeaseLost = errors.New("lease lost")

// Node runs cluster jobs on this machine.
type Node struct {
	ID    string
	Store clusterstore.Store
	// Dir is the node's working folder: a jobs folder holding the jobs it
	// runs in folder form, and its signing key in Dir/.logist.
	Dir string
	// IntakeDir, if set, is a folder whose dropped manifests the node
	// submits to the cluster (intake.go).
	IntakeDir string
	// TTL is the lease; Poll how often an idle node looks for work (and
	// at its intake folder).
	TTL, Poll   time.Duration
	MaxParallel int
	Logger      *slog.Logger
	Effects     effect.Registry
	// Budgets, if set, are the default budgets of jobs whose manifest
	// sets none (else the engine's built-in ones).
	Budgets *manifest.Budgets
	// Contain and Meter are the engine's containment of every job's
	// processes and its metering proxy (runner.Engine's fields of the
	// same names): the composition root (logistd) gives a node the very
	// ones file mode uses, so a cluster job is contained and metered as
	// a job of a jobs folder is. Nil runs uncontained and unmetered (the
	// package's own tests of leases and fences).
	Contain runner.Containment
	Meter   agent.Meter
	// Obs hears what the engine does (logistd's metrics); nil: nothing.
	Obs jobtx.Observer
	// Cron counts the outcomes of the ticks this node fired or decided
	// (created, skipped, replaced, missed, failed), as file mode's
	// scheduler counts them (logistd_cron_runs_total); nil: nothing.
	Cron schedule.Observer
	// Getenv reads the environment (nil: os.Getenv): the content key's
	// path (secrets.KeyPath) and the secrets jobs name.
	Getenv func(string) string
	// Grace is how long, once Run's ctx ends (SIGTERM), the calls in
	// flight may go on to their answers before they are killed (file
	// mode's --grace); 0 kills them at once. See Run.
	Grace time.Duration
	// Stats counts what the node did (metrics read it).
	Stats Stats

	// lock is the working folder's lock, held from Start to the end of
	// Run: the proof that no other process runs this node (Start).
	lock   *jobstore.Lock
	key    *signing.Key
	env    *jobtx.Env
	engine *runner.Engine
	mu     sync.Mutex
	runs   map[string]*run
	// folders serialises a claim's preparation of a job's folder with
	// the sweep of orphaned calls (adopt.go).
	folders sync.Mutex
	// seen is when the cron loop first saw each template (cron.go).
	seen map[string]time.Time
}

// Stats are a node's counters.
type Stats struct {
	mu                                 sync.Mutex
	Claims, Rescues, Fenced, LostLease int64
	Running                            int64
}

func (s *Stats) add(f func(*Stats)) {
	s.mu.Lock()
	f(s)
	s.mu.Unlock()
}

// Snapshot returns a copy of the counters.
func (s *Stats) Snapshot() (claims, rescues, fenced, lost, running int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Claims, s.Rescues, s.Fenced, s.LostLease, s.Running
}

type run struct {
	lease  *clusterstore.Lease
	cancel context.CancelCauseFunc
	// costMicros is the job's cost as the store last committed it.
	costMicros int64
	// known are the snapshot objects the store holds (restored at the
	// claim, or committed since): not sent again.
	known map[string]bool
	// fenced: the store refused the lease, or a newer run of the job on
	// this node replaced this one; the run may write nothing more.
	fenced bool
	done   chan struct{}
	// shipped are the folder's files (shippedDirs) the store holds.
	shipped map[string]bool
}

func (n *Node) defaults() {
	if n.TTL == 0 {
		n.TTL = 10 * time.Second
	}
	if n.Poll == 0 {
		n.Poll = 500 * time.Millisecond
	}
	if n.MaxParallel == 0 {
		n.MaxParallel = 4
	}
	if n.Logger == nil {
		n.Logger = slog.New(slog.DiscardHandler)
	}
}

// Start locks the node's working folder, registers the node's key and
// prepares its engine.
//
// One node, one process. The working folder's lock (file mode's daemon
// lock, jobstore.LockDaemon: an flock held for the process's life, which
// the kernel drops when the process dies) refuses a second process on the
// folder, and the store refuses the node's id with another key than the
// folder's (RegisterNode). So a node that holds the lock and registered
// knows that no other live process runs its id: the leases that still
// name it are its previous process's, which is gone, and Run takes them
// back at once instead of waiting for them to expire (takeBack). A paused
// previous process (SIGSTOP) still holds the lock: the new one is refused.
func (n *Node) Start(ctx context.Context) error {
	n.defaults()
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return err
	}
	lock, err := jobstore.New(n.Dir).LockDaemon()
	if err != nil {
		return fmt.Errorf("node %s: working folder %s: %w (one process per node)", n.ID, n.Dir, err)
	}
	key, err := signing.LoadOrCreate(n.Dir)
	if err == nil {
		err = n.Store.RegisterNode(ctx, n.ID, key.Public())
	}
	if err != nil {
		_ = lock.Unlock()
		return err
	}
	n.lock, n.key = lock, key
	n.runs = map[string]*run{}
	n.env = &jobtx.Env{Store: jobstore.New(n.Dir), Logger: n.Logger, Obs: n.Obs, Getenv: n.Getenv,
		History: history.Options{Signer: key, MaxBytes: -1, Commit: n.commit}}
	n.engine = runner.NewEngine(n.env, n.Effects)
	n.engine.Contain, n.engine.Meter = n.Contain, n.Meter
	if n.Budgets != nil && *n.Budgets != (manifest.Budgets{}) {
		n.engine.Defaults = *n.Budgets
	}
	return nil
}

// Run claims and runs jobs until ctx ends, then stops as RunUntil does,
// never at once.
func (n *Node) Run(ctx context.Context) error { return n.RunUntil(ctx, nil) }

// RunUntil takes back the leases the node's previous process left
// (Start), then claims and runs jobs until ctx ends. Then it stops
// gracefully, as file mode's logistd does on SIGTERM: it claims nothing
// more and starts no other call (the engine drains), lets the calls in
// flight go on to their answers for the grace, each answer committed
// under the fence with its lease heartbeating as before, and gives each
// job's lease back as its run ends, so another node claims it at once.
// When the grace is over, or now is closed (a second SIGTERM: nil never
// is), the calls still in flight are killed: their runs are interrupted
// (runner.ErrShutdown), nothing of the call is recorded, and the lease is
// given back; the job's next node asks the call again. It returns once
// every run has ended, and releases the working folder's lock.
func (n *Node) RunUntil(ctx context.Context, now <-chan struct{}) error {
	if n.engine == nil {
		if err := n.Start(ctx); err != nil {
			return err
		}
	}
	defer func() { _ = n.lock.Unlock() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	// kill ends when the runs must stop: the grace is over, or at once.
	kill, stopRuns := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRuns()
	var runs sync.WaitGroup
	defer n.drain(ctx, &runs, stopRuns, now)
	// The node's own heartbeat (registration refreshed), which the
	// cluster's heartbeat-age gauge and its alert watch.
	wg.Go(func() {
		t := time.NewTicker(n.TTL / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				_ = n.Store.RegisterNode(ctx, n.ID, n.key.Public())
			}
		}
	})
	wg.Go(func() { n.cron(ctx) }) // schedules' ticks (cron.go)
	// Calls a previous life of the node left (adopt.go).
	wg.Go(func() {
		t := time.NewTicker(n.TTL)
		defer t.Stop()
		for {
			n.sweepCalls(ctx)
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	if n.IntakeDir != "" {
		wg.Go(func() {
			problems := map[string]string{}
			t := time.NewTicker(n.Poll)
			defer t.Stop()
			for {
				n.intake(ctx, problems)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
	slots := make(chan struct{}, n.MaxParallel)
	start := func(l *clusterstore.Lease) {
		n.Stats.add(func(s *Stats) {
			s.Claims++
			s.Running++
			if l.Rescued {
				s.Rescues++
			}
		})
		runs.Go(func() {
			defer func() { <-slots }()
			defer n.Stats.add(func(s *Stats) { s.Running-- })
			if err := n.runJob(ctx, kill, l); err != nil && kill.Err() == nil {
				attrs := []any{"node", n.ID, "epoch", l.Epoch, "error", err.Error()}
				if stack, ok := runner.FaultStack(err); ok {
					attrs = append(attrs, "stack", string(stack))
				}
				joblog.Log(n.Logger, "cluster run ended", joblog.Problem{Job: l.Job, Code: codes.ClusterRun}, attrs...)
			}
		})
	}
	n.takeBack(ctx, slots, start)
	for {
		select {
		case <-ctx.Done():
			return nil
		case slots <- struct{}{}:
		}
		l, err := n.Store.Claim(ctx, n.ID, n.TTL)
		if err != nil || l == nil {
			<-slots
			if err != nil && ctx.Err() == nil {
				joblog.Log(n.Logger, "claim failed", joblog.Problem{Code: codes.ClusterClaim}, "node", n.ID, "error", err.Error())
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(n.Poll):
			}
			continue
		}
		start(l)
	}
}

// takeBack claims again at once the jobs whose leases still name this
// node: its previous process's, which is gone (Start proved it). Each is
// started as a claim is, its kept call adopted (prepare); leases beyond
// the node's slots are given back for any node to claim.
func (n *Node) takeBack(ctx context.Context, slots chan struct{}, start func(*clusterstore.Lease)) {
	back, err := n.Store.TakeBack(ctx, n.ID, n.TTL)
	if err != nil {
		if ctx.Err() == nil {
			joblog.Log(n.Logger, "leases of the previous process not taken back (they expire)", joblog.Problem{Code: codes.ClusterClaim}, "node", n.ID, "error", err.Error())
		}
		return
	}
	for _, l := range back {
		select {
		case slots <- struct{}{}:
			n.Logger.Info("lease taken back: the node's previous process is gone", "job_id", l.Job, "node", n.ID, "epoch", l.Epoch)
			start(l)
		default:
			n.release(l, 0)
		}
	}
}

// drain is Run's graceful stop (RunUntil): no call starts any more; the
// runs end on their own within the grace, else stopRuns kills their calls.
func (n *Node) drain(ctx context.Context, runs *sync.WaitGroup, stopRuns context.CancelFunc, now <-chan struct{}) {
	n.engine.Draining.Store(true)
	done := make(chan struct{})
	go func() { runs.Wait(); close(done) }()
	if ctx.Err() != nil && n.Grace > 0 {
		_, _, _, _, running := n.Stats.Snapshot()
		if running > 0 {
			n.Logger.Info("shutting down: no new claims; waiting for calls in flight", "node", n.ID, "grace", n.Grace.String(), "running", running)
		}
		t := time.NewTimer(n.Grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			n.Logger.Warn("grace period over; killing calls in flight (the jobs' next nodes ask them again)", "node", n.ID)
		case <-now:
			n.Logger.Warn("stopping at once; killing calls in flight (the jobs' next nodes ask them again)", "node", n.ID)
		}
	}
	stopRuns()
	<-done
}

// runJob runs one claimed job until it stops, the lease is lost or kill
// ends (the node stopping: ctx's end only drains, the engine starting no
// other call).
func (n *Node) runJob(ctx, kill context.Context, l *clusterstore.Lease) error {
	// This node may claim again a job it still runs (its own lease
	// expired while it was paused): the old run is fenced off and ends
	// before the folder is rewritten.
	n.mu.Lock()
	old := n.runs[l.Job]
	lost := old != nil && !old.fenced
	if old != nil {
		old.fenced = true
	}
	n.mu.Unlock()
	if lost {
		// Its lease ended before its run noticed (the renewal's own
		// check, which counts it, had not come round yet): counted and
		// said as that check would.
		n.Stats.add(func(s *Stats) { s.LostLease++ })
		joblog.Log(n.Logger, "lease expired while the job ran here; this node claimed it again: stopping the old run", joblog.Problem{Job: l.Job, Code: codes.ClusterLeaseLost},
			"node", n.ID, "epoch", old.lease.Epoch)
	}
	if old != nil {
		old.cancel(errLeaseLost)
		<-old.done
	}
	// A job whose folder cannot be made from the store (a recovery
	// point naming an object the store lacks, …) is given back with a
	// backoff: no node claims it again for a lease's time, rather than
	// every node at once in a loop.
	j, known, shipped, err := n.prepare(kill, l.Job)
	if err != nil {
		if kill.Err() != nil {
			n.release(l, 0) // the node stopped, not the job's fault
			return err
		}
		n.release(l, n.TTL)
		return fmt.Errorf("job %s not started (claimable again in %s): %w", l.Job, n.TTL, err)
	}
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancel(nil)
	r := &run{lease: l, cancel: cancel, costMicros: clusterstore.CostMicros(j.Manifest), known: known, done: make(chan struct{}), shipped: shipped}
	if err := n.checkContentKey(filepath.Join(n.Dir, l.Job), j.Manifest); err != nil {
		// Given back before anything is written; the slot is held a
		// poll's time, so that the node does not claim it again at once.
		n.release(l, 0)
		if errors.Is(err, errContentKey) {
			joblog.Log(n.Logger, "job given back: "+err.Error(), joblog.Problem{Job: l.Job, Code: codes.ContentKeyMismatch}, "node", n.ID)
			err = nil
		}
		select {
		case <-ctx.Done():
		case <-time.After(n.Poll):
		}
		return err
	}
	defer close(r.done)
	n.mu.Lock()
	n.runs[l.Job] = r
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		if n.runs[l.Job] == r {
			delete(n.runs, l.Job)
		}
		n.mu.Unlock()
	}()
	stop := make(chan struct{})
	beat := make(chan struct{})
	go func() { defer close(beat); n.heartbeat(r, stop) }()
	go func() {
		select {
		case <-kill.Done():
			cancel(runner.ErrShutdown)
		case <-stop:
		}
	}()
	err = n.engine.Run(runCtx, l.Job)
	close(stop)
	<-beat
	n.mu.Lock()
	fenced := r.fenced
	n.mu.Unlock()
	_, fault := runner.FaultStack(err)
	if !fenced {
		// A run that ended on a fault of Logist's would meet it again on
		// whichever node claimed it next: given back with a backoff, as a
		// folder that cannot be made is, not to every node in a loop.
		var backoff time.Duration
		if fault {
			backoff = n.TTL
		}
		n.release(l, backoff)
	}
	if errors.Is(context.Cause(runCtx), errLeaseLost) {
		return fmt.Errorf("job %s: %w", l.Job, errLeaseLost)
	}
	if fault {
		return fmt.Errorf("%w (claimable again in %s)", err, n.TTL)
	}
	return err
}

// prepare makes the folder of job id, just claimed, ready to run: kept
// as this node left it when its history is the store's (its calls are
// adopted: adopt.go), else its kept calls stopped and the folder written
// from the store. It returns the job as the store holds it, the snapshot
// objects and the shipped files (shippedDirs) the store is known to hold.
func (n *Node) prepare(ctx context.Context, id string) (*clusterstore.Job, map[string]bool, map[string]bool, error) {
	n.folders.Lock()
	defer n.folders.Unlock()
	dir := filepath.Join(n.Dir, id)
	j, err := n.Store.Job(ctx, id)
	if err != nil {
		return nil, nil, nil, err
	}
	kept, err := keptFolder(n.Dir, j)
	if err != nil {
		return nil, nil, nil, err
	}
	if kept {
		files, err := n.Store.Files(ctx, id)
		if err != nil {
			return nil, nil, nil, err
		}
		shipped := map[string]bool{}
		for p := range files {
			shipped[p] = true
		}
		n.Logger.Info("adopting the job's kept call: its folder is as this node left it", "job_id", id, "node", n.ID)
		// The objects the store holds are not listed: the next point
		// sends its objects again (the store keeps one copy of each).
		return j, map[string]bool{}, shipped, nil
	}
	if err := stopCalls(dir); err != nil {
		// The folder goes anyway: the job is not held back by a call
		// that could not be stopped (it runs on to its own timeout).
		joblog.Log(n.Logger, "orphaned call not stopped: "+err.Error(), joblog.Problem{Job: id, Code: codes.ClusterRun}, "node", n.ID)
	}
	j, w, err := writeFolder(ctx, n.Store, n.Dir, id, nil, true)
	if err != nil {
		return nil, nil, nil, err
	}
	known := w.known
	if err := restoreGit(ctx, n.Store, dir, id, known, w.parked); err != nil {
		return nil, nil, nil, err
	}
	shipped := map[string]bool{}
	r := &run{shipped: shipped}
	if err := n.newFiles(dir, r, func(p string) { shipped[p] = true }); err != nil {
		return nil, nil, nil, err
	}
	return j, known, shipped, nil
}

// release gives up a lease the node still holds on a job that is still
// runnable (interrupted, or stopped by an error): another node may take
// it at once, or after backoff (clusterstore.Unit.Backoff). A job that
// stopped has no lease left to give up.
func (n *Node) release(l *clusterstore.Lease, backoff time.Duration) {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Store.Commit(c, l, clusterstore.Unit{Release: true, Backoff: backoff}); err != nil && !errors.Is(err, clusterstore.ErrFenced) {
		joblog.Log(n.Logger, "lease not released (it expires)", joblog.Problem{Job: l.Job, Code: codes.ClusterRun}, "node", n.ID, "error", err.Error())
	}
}

// heartbeat extends r's lease every third of its time; when the store
// says the epoch moved on, or no heartbeat succeeded for two thirds of a
// lease (the node may have been paused or cut off: another node may take
// the job once the lease runs out), the run is cancelled, which kills its
// agent. A lease renewed by a heartbeat sent at t lasts at least until
// t + TTL on the store's clock, so the node stops with a third of the
// lease to spare (clock rates assumed alike, not clocks).
func (n *Node) heartbeat(r *run, stop <-chan struct{}) {
	t := time.NewTicker(n.TTL / 3)
	defer t.Stop()
	renewed := time.Now() // the claim's time, a little later than the store's
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		deadline := renewed.Add(n.TTL * 2 / 3)
		sent := time.Now()
		c, cancel := context.WithDeadline(context.Background(), deadline)
		err := n.Store.Heartbeat(c, r.lease, n.TTL)
		cancel()
		switch {
		case err == nil:
			renewed = sent
			continue
		case errors.Is(err, clusterstore.ErrLeaseEnded):
			// The run's own last commit ended the lease (the job
			// stopped, or waits for a human): the engine is returning;
			// nothing to stop, nobody took the job.
			n.fence(r, err)
			return
		case errors.Is(err, clusterstore.ErrFenced):
			n.fence(r, err)
		case !time.Now().Before(deadline):
			joblog.Log(n.Logger, "lease not renewed in time: stopping the job", joblog.Problem{Job: r.lease.Job, Code: codes.ClusterLeaseLost},
				"node", n.ID, "epoch", r.lease.Epoch, "error", err.Error())
			n.Stats.add(func(s *Stats) { s.LostLease++ })
			r.cancel(errLeaseLost)
		default:
			continue
		}
		return
	}
}

// fence marks r as writing nothing more, after the store refused its
// lease with err (ErrFenced). A fence proper — the epoch moved on: another
// node claimed the job or a steward changed it — is counted, logged
// (CLUSTER_FENCED) and stops the run. A lease that ended at its own epoch
// (clusterstore.ErrLeaseEnded: the run's own commit stopped the job, or
// the node released it) is no fence: nothing is logged or counted, and
// the run, which is ending, is left to end.
func (n *Node) fence(r *run, err error) {
	n.mu.Lock()
	already := r.fenced
	r.fenced = true
	n.mu.Unlock()
	if errors.Is(err, clusterstore.ErrLeaseEnded) {
		return
	}
	if !already {
		n.Stats.add(func(s *Stats) { s.Fenced++; s.LostLease++ })
		joblog.Log(n.Logger, "fenced: the job's epoch moved on (another node claimed it, or a steward changed it); stopping it here", joblog.Problem{Job: r.lease.Job, Code: codes.ClusterFenced},
			"node", n.ID, "epoch", r.lease.Epoch)
	}
	r.cancel(errLeaseLost)
}

// commit commits a history unit the engine is appending to the store,
// under the fence of the job's lease; the store writes it into the folder
// once it stored it (history.Options.Commit, Unit.Write). A unit ending
// in a commit carries the manifest it wrote: its status and its added
// cost go with it.
func (n *Node) commit(hu history.Unit) error {
	dir, lines := hu.Dir, hu.Lines
	id := filepath.Base(dir)
	n.mu.Lock()
	r := n.runs[id]
	n.mu.Unlock()
	if r == nil {
		return fmt.Errorf("job %s is not leased by node %s", id, n.ID)
	}
	n.mu.Lock()
	fenced := r.fenced
	n.mu.Unlock()
	if fenced {
		return fmt.Errorf("job %s: this run's lease was lost: %w", id, clusterstore.ErrFenced)
	}
	// stored: the store holds the unit (it writes the folder's copy after
	// its own), whatever that write gives.
	stored := false
	u := clusterstore.Unit{Lines: lines, Links: hu.Links, Files: map[string][]byte{}, Write: func() error {
		stored = true
		return hu.Write()
	}}
	if err := n.newFiles(dir, r, func(p string) {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err == nil {
			u.Files[p] = b
		}
	}); err != nil {
		return err
	}
	// A recovery point's snapshot goes with its record: the listing and
	// the objects the store may lack.
	point, objects, err := pointOf(dir, hu.Records, r.known)
	if err != nil {
		return fmt.Errorf("job %s: recovery point: %w", id, err)
	}
	u.Point, u.Objects = point, objects
	// The bundles u's files name, carried or not (sent again below).
	bundles := map[string][]byte{}
	if point != nil {
		if err := bundlePoint(context.Background(), dir, r.known, &u, bundles); err != nil {
			return fmt.Errorf("job %s: recovery point: %w", id, err)
		}
	}
	if err := committed(n.env, id, hu.Records, &u); err != nil {
		return err
	}
	if u.Point == nil && u.Status.Waiting() {
		// The run stops for a steward: its workspace goes with the stop
		// (park), a git job's repository as the worker left it with it
		// (bundleParked). Without them (a snapshot over its cap) the
		// job is still stopped; its next node starts from its current
		// checkpoint: the stop stores unparkedPoint, after which an
		// earlier stop's parked workspace, older than the work lost
		// here, no longer counts.
		last := hu.Records[len(hu.Records)-1]
		if u.Point, u.Objects, err = park(dir, last, snapshotCap(u.Manifest), r.known); err == nil {
			var unkept string
			if unkept, err = bundleParked(context.Background(), dir, r.known, &u, bundles); err == nil && unkept != "" {
				joblog.Log(n.Logger, "the stopped git job's staged changes do not go with it staged: "+unkept, joblog.Problem{Job: id, Code: codes.ClusterIndex}, "node", n.ID)
			}
		}
		if err != nil {
			joblog.Log(n.Logger, "the stopped run's workspace does not go with the job, and an earlier stop's no longer counts: the job's next run starts from its current checkpoint: "+err.Error(),
				joblog.Problem{Job: id, Code: codes.SnapshotFailed}, "node", n.ID, "point", unparkedPoint)
			u.Point, u.Objects = &clusterstore.RecoveryPoint{ID: unparkedPoint, Seq: last.Seq}, nil
			delete(u.Files, parkedBundleFile)
			delete(u.Files, parkedHeadFile)
		}
	}
	newCost := r.costMicros
	if u.Manifest != nil {
		newCost = clusterstore.CostMicros(u.Manifest)
		if newCost > r.costMicros {
			u.DebitMicros = newCost - r.costMicros
		}
	}
	c, cancel := context.WithTimeout(context.Background(), n.TTL)
	defer cancel()
	err = sendNamed(dir, u.Point, u.Files, u.Objects, bundles, func(objects map[string][]byte) error {
		u.Objects = objects
		return n.Store.Commit(c, r.lease, u)
	})
	if errors.Is(err, clusterstore.ErrFenced) {
		n.fence(r, err)
	}
	if stored {
		r.costMicros = newCost
		for p := range u.Files {
			r.shipped[p] = true
		}
		for sum := range u.Objects {
			r.known[sum] = true
		}
	}
	if err != nil {
		return fmt.Errorf("cluster store: %w", err)
	}
	return nil
}

// sendNamed sends a change (a node's unit, a steward's steering) of the
// job in folder dir that names point p and files and carries objects:
// send stores it with the objects it is given. The one rule of a refusal
// for a missing object (clusterstore.ErrMissingObject: an object the
// sender took as stored was collected meanwhile — its point was
// replaced, or the bundle a git job's file names no longer named) is to
// send the change once more with every object it names
// (clusterstore.NamedObjects): its point's listing's, read from the
// folder's snapshot, and the bundles its files name (bundles, whatever
// the sender took as stored: bundleInto's), with those it carried.
func sendNamed(dir string, p *clusterstore.RecoveryPoint, files, objects, bundles map[string][]byte, send func(objects map[string][]byte) error) error {
	err := send(objects)
	if !errors.Is(err, clusterstore.ErrMissingObject) {
		return err
	}
	all := map[string][]byte{}
	if p != nil && p.Snapshot != nil {
		if all, err = withListing(dir, p, nil); err != nil {
			return err
		}
	}
	for _, name := range clusterstore.BundleFiles {
		if sum, ok := clusterstore.FileObject(name, files[name]); ok && bundles[sum] != nil {
			all[sum] = bundles[sum]
		}
	}
	maps.Copy(all, objects)
	return send(all)
}

// shippedDirs are the folders of a job's folder, outside its workspace,
// that its records depend on: the protocol's content-addressed artifacts
// and its role keys (created once per job; a role's later events must be
// signed with the same key). Each unit carries the files the store does
// not hold yet, so the job's next node, and an export, has them.
// The content key's fingerprint of a sealed job (contentkey.go) is
// shipped the same way.
var shippedDirs = []string{protocol.ArtifactsDir, filepath.FromSlash(protocol.KeysDir), fingerprintFile}

// newFiles calls f with each file of shippedDirs in the job folder dir
// that r has not shipped, by path relative to dir.
func (n *Node) newFiles(dir string, r *run, f func(rel string)) error {
	for _, d := range shippedDirs {
		err := filepath.WalkDir(filepath.Join(dir, d), func(p string, e fs.DirEntry, err error) error {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil || !e.Type().IsRegular() {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err == nil && !r.shipped[rel] {
				f(rel)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}
