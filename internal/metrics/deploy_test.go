package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

var metricName = regexp.MustCompile(`\blogistd_[a-z0-9_]+`)

// Every metric the shipped alert rules and dashboard query is one the
// daemon exports (histogram series by their family name).
func TestDeployedQueriesUseExportedMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, "v", "r")
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	exported := map[string]bool{}
	for _, f := range fams {
		exported[f.GetName()] = true
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
		UID    string `json:"uid"`
		Panels []struct {
			Title       string `json:"title"`
			Description string `json:"description"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(dash, &d); err != nil {
		t.Fatalf("dashboard: %v", err)
	}
	if d.UID != "logistd-overview" {
		t.Errorf("dashboard uid %q changed; links to it would break", d.UID)
	}
	var exprs []string
	for _, p := range d.Panels {
		if p.Description == "" || p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q lacks a description or unit", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
			if strings.Contains(tg.Expr, "rate(") && !strings.Contains(tg.Expr, "$__rate_interval") {
				t.Errorf("panel %q: rate without $__rate_interval: %s", p.Title, tg.Expr)
			}
		}
	}
	used := map[string]bool{}
	for _, src := range append(exprs, string(rules)) {
		for _, n := range metricName.FindAllString(src, -1) {
			used[n] = true
		}
	}
	var missing []string
	for n := range used {
		base := n
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if strings.HasSuffix(n, suf) && exported[strings.TrimSuffix(n, suf)] {
				base = strings.TrimSuffix(n, suf)
			}
		}
		if !exported[base] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("queried but not exported: %v", missing)
	}
	if len(used) < 15 {
		t.Fatalf("only %d metrics found in rules and dashboard", len(used))
	}
}
