package builtins

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The package map in docs/design.md stays true: every package of the module
// has a paragraph, and every package imports only what its paragraph
// allows.
func TestPackageMap(t *testing.T) {
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Package map\n")
	if !ok {
		t.Fatal("docs/design.md has no ## Package map section")
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}
	allowed := map[string][]string{}
	para := regexp.MustCompile("(?s)\\*\\*`([^`]+)`\\*\\*(.*?)May import:\\s+([^.]*)\\.")
	for _, m := range para.FindAllStringSubmatch(section, -1) {
		pkg, list := m[1], strings.TrimSpace(m[3])
		if _, dup := allowed[pkg]; dup {
			t.Errorf("%s has two paragraphs", pkg)
		}
		allowed[pkg] = []string{}
		if list == "none" {
			continue
		}
		for _, imp := range strings.Split(list, ",") {
			allowed[pkg] = append(allowed[pkg], strings.Trim(strings.TrimSpace(imp), "`"))
		}
	}

	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		seen[pkg] = true
		may, ok := allowed[pkg]
		if !ok {
			t.Errorf("%s has no paragraph in docs/design.md's package map", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			rel, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if !slices.Contains(may, rel) {
				t.Errorf("%s imports %s, which its paragraph in docs/design.md's package map does not allow", pkg, rel)
			}
		}
	}
	for pkg := range allowed {
		if !seen[pkg] {
			t.Errorf("docs/design.md's package map describes %s, which is not a package of the module", pkg)
		}
	}
}
