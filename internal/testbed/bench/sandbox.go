package bench

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// sandboxLine is one line of internal/sandbox's BenchmarkCall.
var sandboxLine = regexp.MustCompile(`^BenchmarkCall/(\S+?)(-\d+)?\s+\d+\s+([\d.]+) ns/op`)

// sandboxRuns are BenchmarkCall's sub-benchmarks, as the rows name them.
var sandboxRuns = []struct{ key, name string }{
	{"bare-bwrap", "bare `bwrap ... true` (the namespaces and mounts every call uses)"},
	{"sandbox-none", "contained call, layer none (launcher, result file, no sandbox)"},
	{"sandbox-landlock", "contained call, Landlock alone"},
	{"sandbox-bwrap", "contained call, bwrap+landlock"},
	{"sandbox-bwrap-logistd", "contained call, bwrap+landlock, logistd as the helper"},
	{"sandbox-bwrap-logist-sandbox", "contained call, bwrap+landlock, logist-sandbox as the helper (as deployed)"},
	{"sandbox-bwrap-logist-sandbox-spare", "contained call, bwrap+landlock, logist-sandbox, served by a spare sandbox made ready 200 ms before (the daemon's way for a job's next call)"},
}

// 7. The sandbox's added time per call: internal/sandbox's BenchmarkCall
// (a call of /bin/true) against a bare exec, and a bare bwrap.
func (h *harness) sandbox() error {
	out, err := run(h.repo, "go", "test", "-run", "^$", "-bench", "BenchmarkCall", "-benchtime", "10x",
		"-count", strconv.Itoa(h.sz.BenchCount), "./internal/sandbox")
	if err != nil {
		return fmt.Errorf("BenchmarkCall: %v\n%s", err, out)
	}
	by := map[string][]float64{}
	for _, l := range strings.Split(out, "\n") {
		if m := sandboxLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			v, _ := strconv.ParseFloat(m[3], 64)
			by[m[1]] = append(by[m[1]], v/1e6)
		}
	}
	h.note("8: these rows time one contained call of /bin/true per layer, for information; issue 21's goals on the sandboxed path (pickup ratio ≤ 1, per call ≤ 1.2) are scenarios 1 and 2, whose logistd runs its default containment (--sandbox auto), named in their rows")
	bare := Summarize(by["bare-exec"])
	h.raw("7.call_ms.bare-exec", by["bare-exec"]...)
	for _, r := range sandboxRuns {
		if len(by[r.key]) == 0 {
			continue // a layer this host lacks
		}
		h.raw("7.call_ms."+r.key, by[r.key]...)
		h.add(Row{Scenario: "8", Name: r.name + " (BenchmarkCall)", Unit: "ms", Stat: "median",
			Value: Summarize(by[r.key]), BaseName: "bare exec of true", Baseline: &bare})
	}
	return nil
}
