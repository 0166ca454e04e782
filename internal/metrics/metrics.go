// Package metrics exposes the daemon's Prometheus metrics on a registry the
// caller passes in.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/logist/logist/internal/lifecycle"
)

// Metrics implements jobtx.Observer.
type Metrics struct {
	jobs          *prometheus.GaugeVec
	agentCalls    *prometheus.CounterVec
	agentDuration *prometheus.HistogramVec
	costUSD       *prometheus.CounterVec
	violations    *prometheus.CounterVec
	retries       *prometheus.CounterVec
	halts         *prometheus.CounterVec
	appendSeconds prometheus.Histogram
	writeFailures prometheus.Counter
	invalid       prometheus.Gauge

	mu     sync.Mutex
	status map[string]lifecycle.Status
}

// Outcomes of agent calls.
var Outcomes = []string{"ok", "invalid", "error", "timeout", "canceled", "interrupted"}

// New registers the metrics, the Go and process collectors, and
// logistd_build_info on reg.
func New(reg prometheus.Registerer, version, revision string) *Metrics {
	f := promauto.With(reg)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	f.NewGaugeVec(prometheus.GaugeOpts{Name: "logistd_build_info", Help: "Build information; always 1."},
		[]string{"version", "revision"}).WithLabelValues(version, revision).Set(1)
	m := &Metrics{
		jobs: f.NewGaugeVec(prometheus.GaugeOpts{Name: "logistd_jobs", Help: "Jobs in the jobs folder by status."}, []string{"status"}),
		agentCalls: f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_agent_calls_total", Help: "Agent calls by role, provider and outcome."},
			[]string{"role", "provider", "outcome"}),
		agentDuration: f.NewHistogramVec(prometheus.HistogramOpts{Name: "logistd_agent_call_duration_seconds", Help: "Agent call duration.",
			Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400}}, []string{"role", "provider"}),
		costUSD:    f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_agent_cost_usd_total", Help: "Agent cost in USD by provider."}, []string{"provider"}),
		violations: f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_response_violations_total", Help: "Invalid agent answers by code."}, []string{"code"}),
		retries:    f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_retries_total", Help: "Retries by cause."}, []string{"cause"}),
		halts:      f.NewCounterVec(prometheus.CounterOpts{Name: "logistd_halts_total", Help: "Budget halts by reason."}, []string{"reason"}),
		appendSeconds: f.NewHistogram(prometheus.HistogramOpts{Name: "logistd_history_append_duration_seconds", Help: "Durable history append latency (write+fsync).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10)}),
		writeFailures: f.NewCounter(prometheus.CounterOpts{Name: "logistd_history_write_failures_total", Help: "Failed history appends."}),
		invalid:       f.NewGauge(prometheus.GaugeOpts{Name: "logistd_invalid_manifests", Help: "Job folders whose manifest is invalid."}),
		status:        map[string]lifecycle.Status{},
	}
	for _, s := range lifecycle.All {
		m.jobs.WithLabelValues(string(s))
	}
	for _, c := range []string{"api_error", "agent_retry"} {
		m.retries.WithLabelValues(c)
	}
	for _, r := range []string{"cost", "time"} {
		m.halts.WithLabelValues(r)
	}
	return m
}

// JobStatus moves a job between status gauges.
func (m *Metrics) JobStatus(id string, from, to lifecycle.Status) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.status[id]; ok {
		m.jobs.WithLabelValues(string(old)).Dec()
	}
	m.status[id] = to
	m.jobs.WithLabelValues(string(to)).Inc()
}

// SetInvalid sets the number of invalid manifests.
func (m *Metrics) SetInvalid(n int) { m.invalid.Set(float64(n)) }

// AgentCall counts a call.
func (m *Metrics) AgentCall(role, provider, outcome string, d time.Duration, costUSD float64) {
	m.agentCalls.WithLabelValues(role, provider, outcome).Inc()
	m.agentDuration.WithLabelValues(role, provider).Observe(d.Seconds())
	m.costUSD.WithLabelValues(provider).Add(costUSD)
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
