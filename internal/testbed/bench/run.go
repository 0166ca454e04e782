// Package bench is logist-bench: whole-process benchmarks of logistd and
// logist against baselines measured in the same run, written to
// docs/benchmarks.md (generated) and docs/benchmarks.json (raw numbers).
package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sizes are a run's scenario sizes; Quick reduces them for a smoke test.
type Sizes struct {
	PickupDrops     int // scenario 1: drops each for Logist and the baseline
	CallJobs        int // scenario 2: jobs per round (2 calls each)
	CallRounds      int
	ThroughputJobs  int // scenario 3
	ThroughputReps  int
	FsyncSeconds    float64
	BenchCount      int    // scenario 4: go test -count
	BenchTime       string // scenario 4: go test -benchtime
	HistoryRecords  int    // scenario 4: records of the big job
	CLIReps         int
	ScaleJobs       int // scenario 5
	ScaleReps       int
	ConcJobs        int // scenario 6
	ConcParallel    int
	ConcRounds      int
	ConcAgentMillis int
	ClusterJobs     int // scenario 7
	ClusterReps     int
	ClaimJobs       int
	TakeoverReps    int
}

// The scales issue 21 states its goals at. A row measured at a smaller one
// (-quick, -scale-jobs) says so beside its result (Row.OffScale).
const (
	goalHistoryRecords = 50000 // goal 4: opening a history, logist status
	goalScaleJobs      = 50000 // goal 5
	goalConcJobs       = 1000  // goal 6: 1,000 agents of 1 s ...
	goalConcParallel   = 200   // ... at --max-parallel 200
)

// offScale is a row's OffScale: "" when got is the goal's scale, else
// what the goal's scale is and what this run measured.
func offScale(got, goal int, unit string) string {
	if got >= goal {
		return ""
	}
	return fmt.Sprintf("%d %s; this run: %d", goal, unit, got)
}

// FullSizes are the issues' sizes: `make bench` runs every goal at the
// scale issue 21 states it at.
var FullSizes = Sizes{PickupDrops: 100, CallJobs: 100, CallRounds: 3, ThroughputJobs: 1000, ThroughputReps: 3, FsyncSeconds: 1.5,
	BenchCount: 5, BenchTime: "200x", HistoryRecords: goalHistoryRecords, CLIReps: 15, ScaleJobs: goalScaleJobs, ScaleReps: 5,
	ConcJobs: goalConcJobs, ConcParallel: goalConcParallel, ConcRounds: 3, ConcAgentMillis: 1000,
	ClusterJobs: 200, ClusterReps: 3, ClaimJobs: 500, TakeoverReps: 5}

// QuickSizes are a smoke test's: its goal rows say they are not at the
// goal's scale.
var QuickSizes = Sizes{PickupDrops: 10, CallJobs: 10, CallRounds: 2, ThroughputJobs: 50, ThroughputReps: 2, FsyncSeconds: 0.3,
	BenchCount: 2, BenchTime: "20x", HistoryRecords: 1000, CLIReps: 3, ScaleJobs: 500, ScaleReps: 2,
	ConcJobs: 20, ConcParallel: 10, ConcRounds: 1, ConcAgentMillis: 1000,
	ClusterJobs: 20, ClusterReps: 1, ClaimJobs: 30, TakeoverReps: 1}

type harness struct {
	sz      Sizes
	keep    bool // -keep: no scenario removes its folders either
	repo    string
	logistd string
	logist  string
	agent   string
	floor   string // benchfloor: scenario 1's floor
	tmp     string
	log     io.Writer
	rep     *Report
	// fsyncFloors is scenario 1's fsync probe, for scenario 2's note.
	fsyncFloors *floors
}

// Main runs the harness; it returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("logist-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", os.Getenv("LOGIST_BENCH_QUICK") != "", "reduced sizes: a smoke test (also LOGIST_BENCH_QUICK=1)")
	repo := fs.String("repo", ".", "repository root (bin/logistd, bin/logist, docs/)")
	out := fs.String("out", "", "folder for benchmarks.md and benchmarks.json (default: REPO/docs; with -quick a temporary folder)")
	only := fs.String("only", "", "comma-separated scenarios to run (1-8); default all")
	scaleJobs := fs.Int("scale-jobs", 0, "scenario 5's jobs (0: the size's own; for one figure at a chosen scale)")
	scaleReps := fs.Int("scale-reps", 0, "scenario 5's start-ups per folder (0: the size's own; the first has no manifest index)")
	historyRecords := fs.Int("history-records", 0, "scenario 4's records of the big job (0: the size's own; with -quick, to measure the CLI at the goal's scale)")
	keep := fs.Bool("keep", false, "keep the run's scratch folder (job folders, logistd logs) for a look or a profile afterwards")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	h := &harness{sz: FullSizes, log: stderr}
	if *quick {
		h.sz = QuickSizes
	}
	if *scaleJobs > 0 {
		h.sz.ScaleJobs = *scaleJobs
	}
	if *historyRecords > 0 {
		h.sz.HistoryRecords = *historyRecords
	}
	if *scaleReps > 0 {
		h.sz.ScaleReps = *scaleReps
	}
	var err error
	if h.repo, err = filepath.Abs(*repo); err != nil {
		fmt.Fprintln(stderr, "logist-bench:", err)
		return 1
	}
	outDir := *out
	if outDir == "" {
		outDir = filepath.Join(h.repo, "docs")
		if *quick {
			outDir = filepath.Join(os.TempDir(), "logist-bench-quick")
		}
	}
	start := time.Now()
	if err := h.setup(); err != nil {
		fmt.Fprintln(stderr, "logist-bench:", err)
		return 1
	}
	h.keep = *keep
	if *keep {
		h.logf("scratch folder kept: %s", h.tmp)
	} else {
		defer os.RemoveAll(h.tmp) //nolint:errcheck // the run's scratch folder in the temp folder
	}
	h.rep = &Report{Generator: "logist-bench", Quick: *quick, Date: start.UTC().Format(time.RFC3339), Commit: h.commit(),
		Machine: machine(), Raw: map[string][]float64{}}
	scenarios := []struct {
		id string
		f  func() error
	}{{"1", h.pickup}, {"2", h.perCall}, {"3", h.throughput}, {"4", h.historyGrowth}, {"5", h.scale}, {"6", h.concurrency}, {"7", h.clusterScenario}, {"8", h.sandbox}}
	for _, s := range scenarios {
		if *only != "" && !strings.Contains(","+*only+",", ","+s.id+",") {
			continue
		}
		t := time.Now()
		h.logf("scenario %s ...", s.id)
		if err := s.f(); err != nil {
			h.logf("scenario %s failed: %v", s.id, err)
			h.rep.Notes = append(h.rep.Notes, fmt.Sprintf("scenario %s did not complete: %v", s.id, err))
		}
		h.logf("scenario %s done in %.1f s", s.id, time.Since(t).Seconds())
	}
	h.rep.Seconds = time.Since(start).Seconds()
	for i := range h.rep.Rows {
		h.rep.Rows[i].Evaluate()
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		fmt.Fprintln(stderr, "logist-bench:", err)
		return 1
	}
	js, err := h.rep.JSON()
	if err != nil {
		fmt.Fprintln(stderr, "logist-bench:", err)
		return 1
	}
	md := h.rep.Markdown()
	if err := os.WriteFile(filepath.Join(outDir, "benchmarks.json"), append(js, '\n'), 0o644); err != nil {
		fmt.Fprintln(stderr, "logist-bench:", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(outDir, "benchmarks.md"), []byte(md), 0o644); err != nil {
		fmt.Fprintln(stderr, "logist-bench:", err)
		return 1
	}
	fmt.Fprint(stdout, md)
	fmt.Fprintf(stdout, "\nwrote %s and %s (%.0f s)\n", filepath.Join(outDir, "benchmarks.md"), filepath.Join(outDir, "benchmarks.json"), h.rep.Seconds)
	return 0
}

func (h *harness) logf(format string, a ...any) {
	fmt.Fprintf(h.log, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, a...))
}

func (h *harness) add(r Row)                      { h.rep.Rows = append(h.rep.Rows, r) }
func (h *harness) raw(name string, xs ...float64) { h.rep.Raw[name] = append(h.rep.Raw[name], xs...) }
func (h *harness) note(format string, a ...any) {
	h.rep.Notes = append(h.rep.Notes, fmt.Sprintf(format, a...))
}

// dir makes a scenario's folder. It first flushes what is waiting to be
// written back (the bench agent's build, the previous scenario's files and
// their removal): left to the kernel's writeback, those writes land in the
// middle of the measured run, 30 s after they were made, and queue the
// fsyncs being measured behind them.
func (h *harness) dir(name string) (string, error) {
	syscall.Sync()
	return os.MkdirTemp(h.tmp, name+"-")
}

// setup finds the binaries (building them with make build when missing)
// and builds the bench agent.
func (h *harness) setup() error {
	var err error
	if h.tmp, err = os.MkdirTemp("", "logist-bench-"); err != nil {
		return err
	}
	h.logistd = filepath.Join(h.repo, "bin", "logistd")
	h.logist = filepath.Join(h.repo, "bin", "logist")
	if _, err := os.Stat(h.logistd); err != nil {
		if out, err := run(h.repo, "make", "build"); err != nil {
			return fmt.Errorf("make build: %v\n%s", err, out)
		}
	}
	h.agent, h.floor = filepath.Join(h.tmp, "benchagent"), filepath.Join(h.tmp, "benchfloor")
	if out, err := run(h.repo, "go", "build", "-o", h.tmp, "./internal/testbed/bench/benchagent", "./internal/testbed/bench/benchfloor"); err != nil {
		return fmt.Errorf("build bench agent and floor: %v\n%s", err, out)
	}
	return nil
}

func run(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (h *harness) commit() string {
	out, err := run(h.repo, "git", "rev-parse", "--short", "HEAD")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(out)
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), TempDir: os.TempDir()}
	if out, err := exec.Command("nproc").Output(); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil {
			m.CPUs = n
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "MemTotal:") {
				f := strings.Fields(l)
				if len(f) >= 2 {
					kb, _ := strconv.ParseFloat(f[1], 64)
					m.MemTotal = fmt.Sprintf("%.1f GiB", kb/(1<<20))
				}
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("go", "env", "GOVERSION").Output(); err == nil {
		m.GoVersion = strings.TrimSpace(string(out))
	} else {
		m.GoVersion = runtime.Version()
	}
	return m
}

// daemon is a logistd started by the harness.
type daemon struct {
	cmd     *exec.Cmd
	addr    string
	started time.Time
	ready   time.Duration
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close() //nolint:errcheck // a listener, only to find a free port
	return ln.Addr().String(), nil
}

// startDaemon starts logistd on dir and waits until /readyz answers 200.
func (h *harness) startDaemon(dir string, extra ...string) (*daemon, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(filepath.Dir(dir), filepath.Base(dir)+".logistd.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close() //nolint:errcheck // handed to logistd, which writes it; ours writes nothing
	args := append([]string{"--jobs-dir", dir, "--listen", addr, "--log-level", "warn", "--grace", "5s"}, extra...)
	cmd := exec.Command(h.logistd, args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	d := &daemon{cmd: cmd, addr: addr, started: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(60 * time.Second)
	client := &http.Client{Timeout: 2 * time.Second}
	for time.Now().Before(deadline) {
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			_ = resp.Body.Close() // empty of interest: the status is the answer
			if resp.StatusCode == 200 {
				d.ready = time.Since(d.started)
				return d, nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	d.stop()
	return nil, fmt.Errorf("logistd on %s not ready after 60 s (log: %s)", dir, logf.Name())
}

// childrenCPU is the CPU time, in ms, of the daemon's children it has
// reaped so far, and of theirs that they reaped (cutime + cstime of
// /proc/PID/stat): a contained call's launcher, bwrap, helper and agent,
// a spare's too; an uncontained call's agent.
func (d *daemon) childrenCPU() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", d.cmd.Process.Pid, len(f))
	}
	cu, err1 := strconv.ParseFloat(f[13], 64)
	cs, err2 := strconv.ParseFloat(f[14], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: cutime %q cstime %q", d.cmd.Process.Pid, f[13], f[14])
	}
	return (cu + cs) * 1000 / clockTicks, nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// 100 on every Linux architecture Go runs on.
const clockTicks = 100

func (d *daemon) stop() {
	if d == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }() // stopped on purpose: the status says nothing
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// metric sums the samples of /metrics whose line starts with prefix (a
// name, or a name with its labels).
func (d *daemon) metric(prefix string) (float64, error) {
	resp, err := http.Get("http://" + d.addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close() //nolint:errcheck // a response body, read only
	return sumMetric(resp.Body, prefix), nil
}

func sumMetric(r io.Reader, prefix string) float64 {
	sum := 0.0
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, prefix) {
			continue
		}
		rest := l[len(prefix):]
		if rest == "" || (rest[0] != ' ' && rest[0] != '{') {
			continue
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// waitFinished polls the daemon until n jobs finished (any outcome).
func (d *daemon) waitFinished(n float64, timeout time.Duration, poll time.Duration) error {
	deadline := time.Now().Add(timeout)
	var got float64
	for time.Now().Before(deadline) {
		v, err := d.metric("logistd_jobs_finished_total")
		if err == nil {
			got = v
			if v >= n {
				return nil
			}
		}
		time.Sleep(poll)
	}
	return fmt.Errorf("only %.0f of %.0f jobs finished within %s", got, n, timeout)
}

// rss reads a process's resident memory (VmRSS) in MiB.
// peakRSS is the process's resident memory at its peak so far (VmHWM).
func peakRSS(pid int) (float64, error) { return procMiB(pid, "VmHWM") }

func procMiB(pid int, field string) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, field+":") {
			f := strings.Fields(l)
			kb, err := strconv.ParseFloat(f[1], 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no " + field)
}

// waitScanned waits until the daemon's start-up scan has ended (it is
// ready before: /readyz says it watches and picks up new work) and returns
// the time from its start.
func (d *daemon) waitScanned(timeout time.Duration) (time.Duration, error) {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Timeout: 5 * time.Second}
	for time.Now().Before(deadline) {
		resp, err := client.Get("http://" + d.addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close() // read whole
			if strings.Contains(string(b), "\nlogistd_startup_scan_complete 1") {
				return time.Since(d.started), nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return 0, fmt.Errorf("logistd's start-up scan not over after %s", timeout)
}

// timeCmd runs a command and returns its wall time in ms.
func timeCmd(ctx context.Context, name string, args ...string) (float64, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	t := time.Now()
	err := cmd.Run()
	return float64(time.Since(t).Nanoseconds()) / 1e6, err
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
