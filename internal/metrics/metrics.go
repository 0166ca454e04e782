// Package metrics exposes the daemon's Prometheus metrics on a registry the
// caller passes in. Names follow Prometheus conventions: prefix logistd_,
// base units (seconds, bytes, USD), _total for counters, no job ids or free
// text as labels, and every known label value present from the start. A
// label fed from a job or a steward (a role, a steward command) is held to
// a fixed set of values by Bound: jobs are anyone's input, and a series per
// name they make up would grow the daemon's and Prometheus's memory without
// end.
package metrics

import (
	"container/heap"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/workflow"
	"github.com/logist/logist/schemas"
)

// Known label values, initialised to 0 so that rates and alerts work before
// the first event. Steward commands are steward.Commands, and violation
// codes response.Codes: the lists their owners keep.
var (
	Outcomes  = []string{"ok", "invalid", "error", "timeout", "canceled", "interrupted"}
	Roles     = []string{"worker", "supervisor"}
	Providers = []string{"script", "command"}
	// MeteredProviders are the providers whose calls report cost and
	// tokens: besides Providers, an OpenAI-compatible endpoint (http),
	// the main source of tokens. A human's answers cost nothing.
	MeteredProviders = []string{"script", "command", "http"}
	RetryCauses      = []string{"api_error", "agent_retry"}
	HaltReasons      = []string{"cost", "time"}
	FinishOutcomes   = []string{"success", "canceled", "intervention_required", "halted_cost", "halted_time"}
	TokenKinds       = []string{"input", "output", "cache"}
	StewardResults   = []string{"ok", "out_of_order", "not_found", "invalid", "permission_denied", "error"}
	CronOutcomes     = []string{"created", "skipped", "replaced", "missed", "failed"}
)

// Other is the value a bounded label takes for any value outside its set.
const Other = "other"

// KnownRoles are the values the role label keeps: the roles the built-in
// workflows define, Logist's own included. A role an inline workflow or a
// game's agents name is the job's own word, counted as Other.
var KnownRoles = builtinRoles()

func builtinRoles() []string {
	out := []string{workflow.RoleLogist}
	for _, name := range workflow.BuiltinNames() {
		if wf, err := workflow.Builtin(name); err == nil {
			out = append(out, wf.Roles()...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Bound is the one rule for labels fed from input: v if it is one of
// known, else Other. Every such label goes through it, so no input makes
// more than len(known)+1 series.
func Bound(v string, known []string) string {
	if slices.Contains(known, v) {
		return v
	}
	return Other
}

// Metrics implements the engine's and the daemon's observers.
type Metrics struct {
	jobs          *prometheus.GaugeVec
	started       prometheus.Counter
	contained     *prometheus.CounterVec
	finished      *prometheus.CounterVec
	agentCalls    *prometheus.CounterVec
	agentDuration *prometheus.HistogramVec
	pickup        prometheus.Histogram
	intake        prometheus.Histogram
	phase         *prometheus.HistogramVec
	costUSD       *prometheus.CounterVec
	tokens        *prometheus.CounterVec
	violations    *prometheus.CounterVec
	retries       *prometheus.CounterVec
	halts         *prometheus.CounterVec
	waiting       prometheus.Gauge
	oldestWaiting prometheus.Gauge
	appendSeconds prometheus.Histogram
	fsyncSeconds  prometheus.Histogram
	appendBytes   prometheus.Counter
	writeFailures prometheus.Counter
	tornTails     prometheus.Counter
	steward       *prometheus.CounterVec
	cron          *prometheus.CounterVec
	invalid       prometheus.Gauge
	schedules     prometheus.Gauge
	stalled       prometheus.Gauge
	scanComplete  prometheus.Gauge

	mu sync.Mutex
	// stalledJobs are the jobs stalled on their storage (Stalled).
	stalledJobs map[string]bool
	status      map[string]lifecycle.Status
	// templates are the schedule templates: kept out of the job gauges
	// and counters (a template never runs itself), counted by schedules.
	templates map[string]bool
	waitTS    waitHeap // waiting jobs' since-times; the oldest on top
	nowFunc   func() time.Time

	spares atomic.Pointer[func() SpareCounts] // CountSpares
	// runFaults counts the runs ended on a fault (RunFault).
	runFaults atomic.Int64
}

// Durations from 100 ms to hours.
var callBuckets = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400}

// New registers the metrics, the Go and process collectors, and
// logistd_build_info on reg.
func New(reg prometheus.Registerer, version, revision string) *Metrics {
	f := promauto.With(reg)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f.NewGaugeVec(prometheus.GaugeOpts{Name: "logistd_build_info", Help: "Build information; always 1."},
		[]string{"version", "revision"}).WithLabelValues(version, revision).Set(1)
	m := &Metrics{
		jobs: f.NewGaugeVec(prometheus.GaugeOpts{Name: "logistd_jobs",
			Help: "Jobs in the jobs folder by status (schedule templates and invalid manifests are not jobs: logistd_schedules, logistd_invalid_manifests)."}, []string{"status"}),
		started: f.NewCounter(prometheus.CounterOpts{Name: "logistd_jobs_started_total",
			Help: "Jobs that entered their first phase (a job's first start only; a resume or rollback is not a start)."}),
		contained: f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_job_starts_by_sandbox_total",
			Help: "Job starts and restarts by the containment their processes run under (bwrap+landlock, landlock; none is the steward's explicit opt-out)."}, []string{"sandbox"}),
		finished: f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_jobs_finished_total",
			Help: "Times a job stopped, by the status it went to: finished (success, canceled) or waiting for a steward (intervention_required, halted_cost, halted_time). A job resumed and stopped again counts again; a waiting job or a draft that a steward halts counts as canceled."}, []string{"outcome"}),
		agentCalls: f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_agent_calls_total", Help: "Agent calls by role, provider and outcome. role is one of the built-in workflows' roles, or other (an inline workflow's or a game's own role names)."},
			[]string{"role", "provider", "outcome"}),
		agentDuration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "logistd_agent_call_duration_seconds", Help: "Agent call duration, by role (the built-in workflows' roles, or other) and provider.",
			Buckets: callBuckets}, []string{"role", "provider"}),
		pickup: f.NewHistogram(prometheus.HistogramOpts{Name: "logistd_pickup_latency_seconds", Help: "From a manifest seen by the daemon to its first agent call starting.",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}}),
		intake: f.NewHistogram(prometheus.HistogramOpts{Name: "logistd_intake_latency_seconds",
			Help:    "From a job folder or manifest file arriving in the jobs folder (its change time) to its run beginning, before the run waits for a free slot (--max-parallel).",
			Buckets: []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}}),
		phase: f.NewHistogramVec(prometheus.HistogramOpts{Name: "logistd_phase_duration_seconds", Help: "Time from entering a phase to leaving it, by the role that plays it: one of the built-in workflows' roles, or other.",
			Buckets: callBuckets}, []string{"role"}),
		costUSD:    f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_agent_cost_usd_total", Help: "Agent cost in USD by provider."}, []string{"provider"}),
		tokens:     f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_agent_tokens_total", Help: "Model tokens by provider and kind."}, []string{"provider", "kind"}),
		violations: f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_response_violations_total", Help: "Invalid agent answers (schema and protocol violations) by code."}, []string{"code"}),
		retries:    f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_retries_total", Help: "Retries by cause."}, []string{"cause"}),
		halts:      f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_halts_total", Help: "Budget halts by reason."}, []string{"reason"}),
		waiting:    f.NewGauge(prometheus.GaugeOpts{Name: "logistd_jobs_waiting_for_steward", Help: "Jobs in INTERVENTION_REQUIRED, HALTED_COST or HALTED_TIME."}),
		oldestWaiting: f.NewGauge(prometheus.GaugeOpts{Name: "logistd_oldest_waiting_job_timestamp_seconds",
			Help: "Unix time since which the longest-waiting job has waited for a steward; 0 when none waits."}),
		appendSeconds: f.NewHistogram(prometheus.HistogramOpts{Name: "logistd_history_append_duration_seconds", Help: "Durable history append latency (write and fsync).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		fsyncSeconds: f.NewHistogram(prometheus.HistogramOpts{Name: "logistd_history_fsync_duration_seconds", Help: "History fsync latency.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		appendBytes:   f.NewCounter(prometheus.CounterOpts{Name: "logistd_history_appended_bytes_total", Help: "Bytes appended to histories."}),
		writeFailures: f.NewCounter(prometheus.CounterOpts{Name: "logistd_history_write_failures_total", Help: "Failed history appends."}),
		tornTails:     f.NewCounter(prometheus.CounterOpts{Name: "logistd_history_torn_tails_total", Help: "Incomplete last records cut off a history when it was opened."}),
		steward:       f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_steward_commands_total", Help: "Steward commands seen by the daemon, by command and result (a command or result this logistd does not know: other)."}, []string{"command", "result"}),
		cron:          f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_cron_runs_total", Help: "Scheduled runs by outcome."}, []string{"outcome"}),
		invalid: f.NewGauge(prometheus.GaugeOpts{Name: "logistd_invalid_manifests",
			Help: "Job folders whose manifest is invalid, and manifest files in the jobs folder that cannot be placed (logist list: INVALID)."}),
		schedules: f.NewGauge(prometheus.GaugeOpts{Name: "logistd_schedules",
			Help: "Schedule templates in the jobs folder (manifests with a schedule; not counted in logistd_jobs)."}),
		stalled: f.NewGauge(prometheus.GaugeOpts{Name: "logistd_jobs_stalled",
			Help: "Jobs the daemon retries with backoff because their storage refused them (disk full, access denied); logist status shows why."}),
		scanComplete: f.NewGauge(prometheus.GaugeOpts{Name: "logistd_startup_scan_complete",
			Help: "1 once the start-up scan of the jobs folder has ended; until then logistd_jobs, logistd_schedules, logistd_invalid_manifests and the waiting gauges count only the jobs seen so far."}),
		stalledJobs: map[string]bool{},
		status:      map[string]lifecycle.Status{},
		templates:   map[string]bool{},
		waitTS:      waitHeap{at: map[string]int{}},
		nowFunc:     time.Now,
	}
	reg.MustRegister(fsyncCollector{}, spareCollector{m}, faultCollector{m})
	for _, s := range lifecycle.All {
		m.jobs.WithLabelValues(string(s))
	}
	for _, r := range Roles {
		for _, p := range Providers {
			m.agentDuration.WithLabelValues(r, p)
			for _, o := range Outcomes {
				m.agentCalls.WithLabelValues(r, p, o)
			}
		}
		m.phase.WithLabelValues(r)
	}
	for _, p := range MeteredProviders {
		m.costUSD.WithLabelValues(p)
		for _, k := range TokenKinds {
			m.tokens.WithLabelValues(p, k)
		}
	}
	init1 := func(v *prometheus.CounterVec, vals []string) {
		for _, x := range vals {
			v.WithLabelValues(x)
		}
	}
	init1(m.retries, RetryCauses)
	init1(m.halts, HaltReasons)
	init1(m.finished, FinishOutcomes)
	init1(m.violations, response.Codes)
	init1(m.cron, CronOutcomes)
	for _, c := range steward.Commands {
		for _, r := range StewardResults {
			m.steward.WithLabelValues(c, r)
		}
	}
	return m
}

// ScanComplete says the job gauges now cover the whole jobs folder.
func (m *Metrics) ScanComplete() { m.scanComplete.Set(1) }

// Stalled notes that job id is stalled on its storage (code, its error
// code) or, with code "", that it no longer is.
func (m *Metrics) Stalled(id, code string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if code == "" {
		delete(m.stalledJobs, id)
	} else {
		m.stalledJobs[id] = true
	}
	m.stalled.Set(float64(len(m.stalledJobs)))
}

// JobStatus moves a job between status gauges (from "": the status as
// read, not a transition); a transition into a status that is not active
// counts as finished, by that status. Schedule templates are left out.
func (m *Metrics) JobStatus(id string, from, to lifecycle.Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.templates[id] {
		return
	}
	if from != "" && !to.Active() { // a real transition, not a (re)scan
		m.finished.WithLabelValues(finishOutcome(to)).Inc()
	}
	m.setStatus(id, to)
}

// Seen counts a job the daemon has read, if it does not count it yet: once
// counted, a job's status changes reach the gauges as transitions, in
// order, and a read that raced one must not undo it. A schedule template
// is counted as a template only.
func (m *Metrics) Seen(id string, status lifecycle.Status, template bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if template != m.templates[id] {
		m.forget(id)
	}
	if template {
		m.templates[id] = true
		m.schedules.Set(float64(len(m.templates)))
		return
	}
	if _, known := m.status[id]; !known {
		m.setStatus(id, status)
	}
}

// FirstStart counts a job's first start (the engine knows which start is
// the first: a resumed or rolled back job starts again).
func (m *Metrics) FirstStart() { m.started.Inc() }

// Contained counts a job's start under a containment layer.
func (m *Metrics) Contained(layer string) { m.contained.WithLabelValues(layer).Inc() }

// Jobs lists the jobs and templates counted.
func (m *Metrics) Jobs() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.status)+len(m.templates))
	for id := range m.status {
		out = append(out, id)
	}
	for id := range m.templates {
		out = append(out, id)
	}
	return out
}

func (m *Metrics) setStatus(id string, to lifecycle.Status) {
	old, known := m.status[id]
	if known {
		m.jobs.WithLabelValues(string(old)).Dec()
	}
	m.status[id] = to
	m.jobs.WithLabelValues(string(to)).Inc()
	if to.Waiting() {
		if _, ok := m.waitTS.at[id]; !ok {
			m.waitTS.set(id, m.nowFunc())
		}
	} else {
		m.waitTS.remove(id)
	}
	m.updateWaiting()
}

// Forget drops a job (or template) that left the folder or whose manifest
// is no longer valid.
func (m *Metrics) Forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.forget(id)
}

func (m *Metrics) forget(id string) {
	if old, ok := m.status[id]; ok {
		m.jobs.WithLabelValues(string(old)).Dec()
		delete(m.status, id)
	}
	if m.templates[id] {
		delete(m.templates, id)
		m.schedules.Set(float64(len(m.templates)))
	}
	m.waitTS.remove(id)
	m.updateWaiting()
}

// WaitingSince sets when a job started waiting, for jobs found waiting at
// start-up (their manifest's updated_at).
func (m *Metrics) WaitingSince(id string, t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.waitTS.at[id]; ok && !t.IsZero() {
		m.waitTS.set(id, t)
		m.updateWaiting()
	}
}

// updateWaiting reads the oldest since-time off the heap's top: a scan of
// every waiting job here made a start-up with many jobs quadratic.
func (m *Metrics) updateWaiting() {
	m.waiting.Set(float64(len(m.waitTS.items)))
	if len(m.waitTS.items) == 0 || m.waitTS.items[0].since.IsZero() {
		m.oldestWaiting.Set(0)
		return
	}
	m.oldestWaiting.Set(float64(m.waitTS.items[0].since.UnixNano()) / 1e9)
}

// waitHeap is a min-heap of waiting jobs by since-time, indexed by job id so
// that a job's time can be changed or removed in O(log n).
type waitHeap struct {
	items []waitItem
	at    map[string]int // job id -> index in items
}

type waitItem struct {
	id    string
	since time.Time
}

func (h *waitHeap) Len() int           { return len(h.items) }
func (h *waitHeap) Less(i, j int) bool { return h.items[i].since.Before(h.items[j].since) }
func (h *waitHeap) Swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.at[h.items[i].id] = i
	h.at[h.items[j].id] = j
}
func (h *waitHeap) Push(x any) {
	it := x.(waitItem)
	h.at[it.id] = len(h.items)
	h.items = append(h.items, it)
}
func (h *waitHeap) Pop() any {
	it := h.items[len(h.items)-1]
	h.items = h.items[:len(h.items)-1]
	delete(h.at, it.id)
	return it
}

// set adds a job or changes its since-time.
func (h *waitHeap) set(id string, t time.Time) {
	if i, ok := h.at[id]; ok {
		h.items[i].since = t
		heap.Fix(h, i)
		return
	}
	heap.Push(h, waitItem{id: id, since: t})
}

// remove drops a job if it waits.
func (h *waitHeap) remove(id string) {
	if i, ok := h.at[id]; ok {
		heap.Remove(h, i)
	}
}

func finishOutcome(s lifecycle.Status) string {
	switch s {
	case lifecycle.Success:
		return "success"
	case lifecycle.Canceled:
		return "canceled"
	case lifecycle.HaltedCost:
		return "halted_cost"
	case lifecycle.HaltedTime:
		return "halted_time"
	}
	return "intervention_required"
}

// SetInvalid sets the number of invalid manifests.
func (m *Metrics) SetInvalid(n int) { m.invalid.Set(float64(n)) }

// AgentCall counts a call.
func (m *Metrics) AgentCall(role, provider, outcome string, d time.Duration, costUSD float64) {
	role = Bound(role, KnownRoles)
	m.agentCalls.WithLabelValues(role, provider, outcome).Inc()
	m.agentDuration.WithLabelValues(role, provider).Observe(d.Seconds())
	m.costUSD.WithLabelValues(provider).Add(costUSD)
}

// Tokens counts model tokens.
func (m *Metrics) Tokens(provider string, input, output, cache int64) {
	m.tokens.WithLabelValues(provider, "input").Add(float64(input))
	m.tokens.WithLabelValues(provider, "output").Add(float64(output))
	m.tokens.WithLabelValues(provider, "cache").Add(float64(cache))
}

// Pickup observes the time from a manifest seen to its first agent call.
func (m *Metrics) Pickup(d time.Duration) { m.pickup.Observe(d.Seconds()) }

// Intake observes the time from a job's arrival in the jobs folder to its
// run beginning: the daemon's own part of a pickup (the event's way to the
// event loop, the manifest read and checked, the run's goroutine started),
// without the wait for a slot.
func (m *Metrics) Intake(d time.Duration) { m.intake.Observe(max(d, 0).Seconds()) }

// Phase observes how long a phase took.
func (m *Metrics) Phase(role string, d time.Duration) {
	m.phase.WithLabelValues(Bound(role, KnownRoles)).Observe(d.Seconds())
}

// Violation counts an invalid answer.
func (m *Metrics) Violation(code string) { m.violations.WithLabelValues(code).Inc() }

// Retry counts a retry.
func (m *Metrics) Retry(cause string) { m.retries.WithLabelValues(cause).Inc() }

// Halt counts a budget halt.
func (m *Metrics) Halt(reason string) { m.halts.WithLabelValues(reason).Inc() }

// HistoryAppend observes an append.
func (m *Metrics) HistoryAppend(d time.Duration, err error) {
	if err != nil {
		m.writeFailures.Inc()
		return
	}
	m.appendSeconds.Observe(d.Seconds())
}

// HistoryWrite observes the bytes and fsync time of one append.
func (m *Metrics) HistoryWrite(bytes int, fsync time.Duration) {
	m.appendBytes.Add(float64(bytes))
	m.fsyncSeconds.Observe(fsync.Seconds())
}

// TornTail counts a repaired torn history tail.
func (m *Metrics) TornTail() { m.tornTails.Inc() }

// RunFault counts a job's run ended on a fault of Logist's.
func (m *Metrics) RunFault() { m.runFaults.Add(1) }

// Steward counts a steward command the daemon saw applied or refused: read
// from the steward events file, which any steward's logist writes.
func (m *Metrics) Steward(command, result string) {
	m.steward.WithLabelValues(Bound(command, steward.Commands), Bound(result, StewardResults)).Inc()
}

// Cron counts a scheduled run outcome.
func (m *Metrics) Cron(outcome string) { m.cron.WithLabelValues(outcome).Inc() }

// SpareCounts is how the spare sandboxes of the daemon's executor have
// fared (sandbox.Local.SpareCounts): started, served by a call whose
// sandbox they were, and discarded unused.
type SpareCounts struct{ Started, Served, Discarded int }

// CountSpares makes f the source of logistd_spare_sandboxes_total (read
// at each scrape; zeros until it is set).
func (m *Metrics) CountSpares(f func() SpareCounts) { m.spares.Store(&f) }

// spareCollector exposes the spare sandboxes' counts: a discarded spare
// cost its CPU (about 13 ms for bwrap) for nothing, so the share of
// discarded to started says what the predictions waste.
type spareCollector struct{ m *Metrics }

var spareDesc = prometheus.NewDesc("logistd_spare_sandboxes_total",
	"Sandboxes started ahead of a job's expected next call, by outcome: started, served (the call's sandbox was that one), discarded (unused: another sandbox was needed, or the run ended).",
	[]string{"outcome"}, nil)

func (c spareCollector) Describe(ch chan<- *prometheus.Desc) { ch <- spareDesc }

func (c spareCollector) Collect(ch chan<- prometheus.Metric) {
	var s SpareCounts
	if f := c.m.spares.Load(); f != nil {
		s = (*f)()
	}
	for _, o := range []struct {
		name string
		n    int
	}{{"started", s.Started}, {"served", s.Served}, {"discarded", s.Discarded}} {
		ch <- prometheus.MustNewConstMetric(spareDesc, prometheus.CounterValue, float64(o.n), o.name)
	}
}

// fsyncCollector exposes the process's fsyncs outside the history (atomic
// file replaces, snapshot objects, folders): with the history's fsync count
// they say how much of a job's latency the disk's flushes must take.
type fsyncCollector struct{}

var fsyncDesc = prometheus.NewDesc("logistd_fsyncs_total",
	"fsyncs other than history appends (counted by logistd_history_fsync_duration_seconds), by kind: file contents or folder entries.",
	[]string{"kind"}, nil)

func (fsyncCollector) Describe(ch chan<- *prometheus.Desc) { ch <- fsyncDesc }

func (fsyncCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(fsyncDesc, prometheus.CounterValue, float64(atomicfile.FileSyncs.Load()), "file")
	ch <- prometheus.MustNewConstMetric(fsyncDesc, prometheus.CounterValue, float64(atomicfile.DirSyncs.Load()), "folder")
}

// faultCollector exposes the faults of Logist's that were kept to what
// met them instead of stopping the daemon: a document whose check panicked
// (schemas.Faults: refused) and a job's run that panicked (RunFault: the
// job refused). Each is a bug to report, and before, each stopped logistd.
type faultCollector struct{ m *Metrics }

var faultDesc = prometheus.NewDesc("logistd_faults_total",
	"Faults of Logist's kept to what met them, by where: check (a manifest or an agent's answer whose check panicked: refused with the fault as its reason) or run (a job's run that panicked: the job refused, RUN_FAILED). The daemon carried on; each is a bug of Logist's to report.",
	[]string{"in"}, nil)

func (faultCollector) Describe(ch chan<- *prometheus.Desc) { ch <- faultDesc }

func (c faultCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(faultDesc, prometheus.CounterValue, float64(schemas.Faults.Load()), "check")
	ch <- prometheus.MustNewConstMetric(faultDesc, prometheus.CounterValue, float64(c.m.runFaults.Load()), "run")
}
