package builtins

import (
	"go/build"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/logist/logist/"

// concrete are the packages of concrete workflows: only the composition
// (this package, and the daemon and the CLI through it) may reach them.
var concrete = []string{
	"internal/protocol/phases",
	"internal/deliberation/play",
	"internal/deliberation/parliament",
	"internal/deliberation/negotiation",
	"internal/builtins",
}

// deps walks the module's non-test imports from pkg (a path inside the
// module), directly or not, and returns for each the chain that reaches it.
func deps(t *testing.T, pkg string) map[string][]string {
	t.Helper()
	root := filepath.Join("..", "..")
	chains := map[string][]string{pkg: {pkg}}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		bp, err := build.Default.ImportDir(filepath.Join(root, filepath.FromSlash(p)), 0)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, imp := range bp.Imports {
			rel, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if _, seen := chains[rel]; seen {
				continue
			}
			chains[rel] = append(slices.Clone(chains[p]), rel)
			queue = append(queue, rel)
		}
	}
	return chains
}

func TestEngineAndStewardImportNoConcreteWorkflow(t *testing.T) {
	for _, pkg := range []string{"internal/runner", "internal/steward", "internal/schedule", "internal/effect"} {
		chains := deps(t, pkg)
		for _, c := range concrete {
			if chain, ok := chains[c]; ok {
				t.Errorf("%s depends on the concrete workflow %s (%s): hand it the effects instead (internal/effect)",
					pkg, c, strings.Join(chain, " → "))
			}
		}
	}
}

// The walk finds what it is meant to find: this package reaches every
// concrete workflow.
func TestDepsSeesTheConcreteWorkflows(t *testing.T) {
	chains := deps(t, "internal/builtins")
	for _, c := range concrete {
		if _, ok := chains[c]; !ok {
			t.Errorf("internal/builtins does not reach %s: the import walk is broken", c)
		}
	}
}
