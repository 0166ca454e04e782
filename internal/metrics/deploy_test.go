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

// Every metric the operator's documents name is one the daemon exports,
// with the labels (and label values) they give it: `logistd_jobs{status}`,
// `logistd_cron_runs_total{outcome="missed"}`; a name ending in _*
// (`logistd_history_*`) is a prefix some metric has.
func TestDocumentedMetricsAreExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := New(reg, "v", "r")
	m.Contained("none") // its series are made by the first start
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]map[string]map[string]bool{} // family, label, values
	for _, f := range fams {
		ls := map[string]map[string]bool{}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if ls[l.GetName()] == nil {
					ls[l.GetName()] = map[string]bool{}
				}
				ls[l.GetName()][l.GetValue()] = true
			}
		}
		labels[f.GetName()] = ls
	}
	named := regexp.MustCompile(`\blogistd_[a-z0-9_]+(\*|\{[^}]*\})?`)
	label := regexp.MustCompile(`^([a-z_]+)(?:="([^"]*)")?$`)
	seen := 0
	for _, doc := range []string{"../../README.md", "../../docs/operations.md", "../../docs/runbook.md", "../../docs/cluster.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range named.FindAllString(string(b), -1) {
			seen++
			name, sel, _ := strings.Cut(ref, "{")
			if prefix, ok := strings.CutSuffix(name, "*"); ok {
				found := false
				for f := range labels {
					found = found || strings.HasPrefix(f, prefix)
				}
				if !found {
					t.Errorf("%s names %s: no exported metric has that prefix", doc, ref)
				}
				continue
			}
			ls, ok := labels[name]
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if base, cut := strings.CutSuffix(name, suf); !ok && cut {
					ls, ok = labels[base]
				}
			}
			if !ok {
				t.Errorf("%s names %s: not exported", doc, ref)
				continue
			}
			for _, l := range strings.Split(strings.TrimSuffix(sel, "}"), ",") {
				mt := label.FindStringSubmatch(strings.TrimSpace(l))
				switch {
				case sel == "":
				case mt == nil:
					t.Errorf("%s names %s: cannot read the label %q", doc, ref, l)
				case ls[mt[1]] == nil:
					t.Errorf("%s names %s: %s has no label %s", doc, ref, name, mt[1])
				case mt[2] != "" && !ls[mt[1]][mt[2]]:
					t.Errorf("%s names %s: %s's %s is never %q", doc, ref, name, mt[1], mt[2])
				}
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d metrics named in the documents", seen)
	}
}
