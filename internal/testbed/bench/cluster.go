package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/pgtest"
)

// Scenario 7, cluster mode (issue 23): jobs/s of 1 and 3 logistd nodes on
// one PostgreSQL against file mode on the same scripted jobs, the latency
// of a claim (one FOR UPDATE SKIP LOCKED transaction) with three claimers,
// and the time another node takes to resume a job after its node's
// SIGKILL (goal: within the lease plus 1 s). The database is a throwaway
// server of this run on the same machine, with its fsyncs on.

// clusterLease is the takeover measurement's lease.
const clusterLease = 2 * time.Second

func (h *harness) clusterScenario() error {
	ctx := context.Background()
	srv, err := pgtest.StartWith(ctx, pgtest.Options{Durable: true})
	if errors.Is(err, pgtest.ErrMissing) {
		h.note("7 cluster mode: not measured: PostgreSQL is not installed (scripts/postgres.sh)")
		return nil
	}
	if err != nil {
		return err
	}
	defer srv.Stop() //nolint:errcheck // the run's throwaway server
	dbs := 0
	newDB := func() (string, error) {
		dbs++
		return srv.NewDatabase(ctx, fmt.Sprintf("bench%d", dbs))
	}
	n := h.sz.ClusterJobs
	var file, one, three []float64
	for range h.sz.ClusterReps {
		r, err := h.fileRate(n)
		if err != nil {
			return err
		}
		file = append(file, r)
		for _, nodes := range []int{1, 3} {
			url, err := newDB()
			if err != nil {
				return err
			}
			r, err := h.clusterRate(url, nodes, n)
			if err != nil {
				return err
			}
			if nodes == 1 {
				one = append(one, r)
			} else {
				three = append(three, r)
			}
		}
	}
	h.raw("7.file_jobs_per_s", file...)
	h.raw("7.cluster1_jobs_per_s", one...)
	h.raw("7.cluster3_jobs_per_s", three...)
	fb := Summarize(file)
	h.add(Row{Scenario: "7", Name: fmt.Sprintf("cluster mode, 1 node: %d scripted jobs (--max-parallel 4)", n), Unit: "jobs/s", Stat: "median",
		Value: Summarize(one), BaseName: "file mode, same jobs", Baseline: &fb,
		Note: "PostgreSQL on the same machine, fsync on; each history unit is one transaction (row lock, fence, records) before the folder's own fsync'd append"})
	h.add(Row{Scenario: "7", Name: fmt.Sprintf("cluster mode, 3 nodes: %d scripted jobs (--max-parallel 4 each)", n), Unit: "jobs/s", Stat: "median",
		Value: Summarize(three), BaseName: "file mode, same jobs", Baseline: &fb,
		Note: fmt.Sprintf("three logistd processes and PostgreSQL share this machine's %d CPUs, so a third node adds contention, not capacity, here", machine().CPUs)})

	url, err := newDB()
	if err != nil {
		return err
	}
	lat, err := claimLatency(ctx, url, h.sz.ClaimJobs)
	if err != nil {
		return err
	}
	h.raw("7.claim_ms", lat...)
	h.add(Row{Scenario: "7", Name: fmt.Sprintf("claim latency (Store.Claim, 3 concurrent claimers, %d queued jobs)", h.sz.ClaimJobs), Unit: "ms", Stat: "p99",
		Value: Summarize(lat), Note: fmt.Sprintf("median %.2f ms; one transaction: SELECT … FOR UPDATE SKIP LOCKED of the oldest claimable job, epoch bumped, lease taken", Median(lat))})

	var take []float64
	for range h.sz.TakeoverReps {
		url, err := newDB()
		if err != nil {
			return err
		}
		d, err := h.takeover(url)
		if err != nil {
			return err
		}
		take = append(take, d)
	}
	h.raw("7.takeover_ms", take...)
	goal := ms(clusterLease + time.Second)
	h.add(Row{Scenario: "7", Name: fmt.Sprintf("takeover after a node's SIGKILL (--lease %s)", clusterLease), Unit: "ms", Stat: "median",
		Value: Summarize(take), Goal: Goal{"value<=", goal},
		Note: fmt.Sprintf("from the SIGKILL of the node running a job to another node's claim of it (a rescue: epoch bumped); max %.0f ms; goal: the lease + 1 s = %.0f ms. The lease was last renewed up to a third of it before the kill; the rescuer looks for work every 500 ms", Summarize(take).Max, goal)})
	return nil
}

// fileRate is file mode's rate on n scripted jobs (as scenario 3).
func (h *harness) fileRate(n int) (float64, error) {
	root, err := h.dir("cluster-file")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(root) //nolint:errcheck // scratch
	staging, jobs := filepath.Join(root, "staging"), filepath.Join(root, "jobs")
	list := ids("f", n)
	if err := stage(staging, list, func(id string) []byte { return scriptManifest(id, 0) }); err != nil {
		return 0, err
	}
	d, err := h.startDaemon(jobs)
	if err != nil {
		return 0, err
	}
	defer d.stop()
	t := time.Now()
	if err := moveAll(staging, jobs, list); err != nil {
		return 0, err
	}
	if err := d.waitFinished(float64(n), 8*time.Minute, 20*time.Millisecond); err != nil {
		return 0, err
	}
	return float64(n) / time.Since(t).Seconds(), nil
}

// startNodes starts k cluster nodes on url, ready (their /readyz reached
// the database).
func (h *harness) startNodes(url string, k int, lease time.Duration) ([]*daemon, error) {
	var out []*daemon
	for i := range k {
		dir, err := h.dir(fmt.Sprintf("node%d", i))
		if err != nil {
			return out, err
		}
		d, err := h.startDaemon(dir, "--database-url", url, "--node-id", fmt.Sprintf("n%d", i), "--lease", lease.String())
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// clusterRate is the rate of k nodes on n scripted jobs submitted at once
// (after the nodes are ready), until every one is SUCCESS in the database.
func (h *harness) clusterRate(url string, k, n int) (float64, error) {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, url)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	nodes, err := h.startNodes(url, k, 10*time.Second)
	defer func() {
		for _, d := range nodes {
			d.stop()
		}
	}()
	if err != nil {
		return 0, err
	}
	t := time.Now()
	for _, id := range ids("c", n) {
		if _, err := cluster.Submit(ctx, s, scriptManifest(id, 0)); err != nil {
			return 0, err
		}
	}
	deadline := time.Now().Add(8 * time.Minute)
	for {
		var done int
		if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM logist_jobs WHERE status = $1", string(lifecycle.Success)).Scan(&done); err != nil {
			return 0, err
		}
		if done == n {
			return float64(n) / time.Since(t).Seconds(), nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d nodes: only %d of %d jobs done within 8 minutes", k, done, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// claimLatency times every Store.Claim of three concurrent claimers
// draining n queued jobs, in ms.
func claimLatency(ctx context.Context, url string, n int) ([]float64, error) {
	s, err := pgstore.Open(ctx, url)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	for _, id := range ids("q", n) {
		if _, err := cluster.Submit(ctx, s, scriptManifest(id, 0)); err != nil {
			return nil, err
		}
	}
	var mu sync.Mutex
	var lat []float64
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			for {
				t := time.Now()
				l, err := s.Claim(ctx, fmt.Sprintf("claimer%d", i), time.Minute)
				d := ms(time.Since(t))
				if err != nil || l == nil {
					errs[i] = err
					return
				}
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(lat) != n {
		return nil, fmt.Errorf("%d claims of %d jobs", len(lat), n)
	}
	return lat, nil
}

// takeover starts node A with a long job, then node B; SIGKILLs A (its
// process group: the agent too) and times until B holds the job.
func (h *harness) takeover(url string) (float64, error) {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, url)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	a, err := h.startNodes(url, 1, clusterLease)
	if err != nil {
		return 0, err
	}
	defer a[0].stop()
	if _, err := cluster.Submit(ctx, s, scriptManifest("slow", 120_000)); err != nil {
		return 0, err
	}
	if _, err := waitJob(ctx, s, "slow", func(j *clusterstore.Job) bool { return j.Owner == "n0" && j.NextSeq >= 2 }); err != nil {
		return 0, err
	}
	dir, err := h.dir("node-b")
	if err != nil {
		return 0, err
	}
	b, err := h.startDaemon(dir, "--database-url", url, "--node-id", "b", "--lease", clusterLease.String())
	if err != nil {
		return 0, err
	}
	defer b.stop()
	t := time.Now()
	if err := syscall.Kill(-a[0].cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return 0, err
	}
	j, err := waitJob(ctx, s, "slow", func(j *clusterstore.Job) bool { return j.Owner == "b" })
	if err != nil {
		return 0, err
	}
	d := ms(time.Since(t))
	if j.Rescues != 1 {
		return 0, fmt.Errorf("takeover: job %+v was not a rescue", j)
	}
	return d, nil
}

// waitJob polls job id (every 5 ms, up to a minute) until ok.
func waitJob(ctx context.Context, s clusterstore.Store, id string, ok func(*clusterstore.Job) bool) (*clusterstore.Job, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		j, err := s.Job(ctx, id)
		if err == nil && ok(j) {
			return j, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("job %s: not as awaited within a minute (%+v, %v)", id, j, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
