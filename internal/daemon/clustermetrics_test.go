package daemon

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/logist/logist/internal/cluster"
)

var clusterMetric = regexp.MustCompile(`\blogist_cluster_[a-z0-9_]+`)

// TestDeployedClusterQueries: every cluster series the shipped alert rules
// and dashboard query is one a node exports, and every series a node
// exports is on the dashboard.
func TestDeployedClusterQueries(t *testing.T) {
	ch := make(chan *prometheus.Desc, 32)
	newClusterCollector(&cluster.Node{ID: "n"}).Describe(ch)
	close(ch)
	exported := map[string]bool{}
	name := regexp.MustCompile(`fqName: "([a-z0-9_]+)"`)
	for d := range ch {
		exported[name.FindStringSubmatch(d.String())[1]] = true
	}
	rules, err := os.ReadFile("../../deploy/prometheus/logistd-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	dash, err := os.ReadFile("../../deploy/grafana/logistd-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatal(err)
	}
	onDash := map[string]bool{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			for _, n := range clusterMetric.FindAllString(tg.Expr, -1) {
				onDash[n] = true
			}
		}
	}
	used := clusterMetric.FindAllString(string(rules), -1)
	for n := range onDash {
		used = append(used, n)
	}
	for _, n := range used {
		if !exported[n] {
			t.Errorf("queried but not exported: %s", n)
		}
	}
	for n := range exported {
		if !onDash[n] {
			t.Errorf("exported but on no dashboard panel: %s", n)
		}
	}
	if len(exported) < 9 || !slices.Contains(used, "logist_cluster_store_up") {
		t.Fatalf("exported %v, used %v", exported, used)
	}
}
