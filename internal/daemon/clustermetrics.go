package daemon

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/lifecycle"
)

// clusterCollector exposes a node's counters and the cluster's gauges (read
// from the store at each scrape, with a deadline) to Prometheus. It lives
// here, not in internal/cluster, so that logist (which links the cluster
// for its cluster mode) does not link Prometheus, whose package init costs
// every command's start a few milliseconds.
type clusterCollector struct {
	Node *cluster.Node

	claims, rescues, fenced, lost, running *prometheus.Desc
	jobs, leases, heartbeatAge, storeUp    *prometheus.Desc
}

// newClusterCollector describes n's metrics.
func newClusterCollector(n *cluster.Node) *clusterCollector {
	node := prometheus.Labels{"node": n.ID}
	return &clusterCollector{Node: n,
		claims:       prometheus.NewDesc("logist_cluster_claims_total", "Jobs this node claimed (rescues included).", nil, node),
		rescues:      prometheus.NewDesc("logist_cluster_rescues_total", "Jobs this node claimed from a node whose lease had expired.", nil, node),
		fenced:       prometheus.NewDesc("logist_cluster_fenced_writes_total", "Runs of this node stopped because the store refused a write or heartbeat: the job's epoch had moved on.", nil, node),
		lost:         prometheus.NewDesc("logist_cluster_leases_lost_total", "Runs of this node stopped because their lease was lost (fenced, or not renewed in time).", nil, node),
		running:      prometheus.NewDesc("logist_cluster_running_jobs", "Jobs this node is running now.", nil, node),
		jobs:         prometheus.NewDesc("logist_cluster_jobs", "Jobs in the cluster by status.", []string{"status"}, nil),
		leases:       prometheus.NewDesc("logist_cluster_leases", "Jobs of the cluster held under a lease.", nil, nil),
		heartbeatAge: prometheus.NewDesc("logist_cluster_node_heartbeat_age_seconds", "Seconds since each registered node's last heartbeat.", []string{"peer"}, nil),
		storeUp:      prometheus.NewDesc("logist_cluster_store_up", "1 when the last scrape could read the cluster's store.", nil, node),
	}
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.claims, c.rescues, c.fenced, c.lost, c.running, c.jobs, c.leases, c.heartbeatAge, c.storeUp} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	claims, rescues, fenced, lost, running := c.Node.Stats.Snapshot()
	ch <- prometheus.MustNewConstMetric(c.claims, prometheus.CounterValue, float64(claims))
	ch <- prometheus.MustNewConstMetric(c.rescues, prometheus.CounterValue, float64(rescues))
	ch <- prometheus.MustNewConstMetric(c.fenced, prometheus.CounterValue, float64(fenced))
	ch <- prometheus.MustNewConstMetric(c.lost, prometheus.CounterValue, float64(lost))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(running))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	up := 1.0
	js, err := c.Node.Store.Jobs(ctx)
	if err == nil {
		by := map[lifecycle.Status]int{}
		leases := 0
		for _, j := range js {
			by[j.Status]++
			if j.Owner != "" {
				leases++
			}
		}
		for _, st := range lifecycle.All {
			ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(by[st]), string(st))
		}
		ch <- prometheus.MustNewConstMetric(c.leases, prometheus.GaugeValue, float64(leases))
	} else {
		up = 0
	}
	nodes, err := c.Node.Store.Nodes(ctx)
	if err == nil {
		for _, n := range nodes {
			if n.Steward {
				continue // a steward's key: no heartbeat to age
			}
			ch <- prometheus.MustNewConstMetric(c.heartbeatAge, prometheus.GaugeValue, time.Since(n.HeartbeatAt).Seconds(), n.ID)
		}
	} else {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(c.storeUp, prometheus.GaugeValue, up)
}
