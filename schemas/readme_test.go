package schemas

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// README.md's manifest table has a row for every field the manifest
// schema allows at the top level (a row may name several: `a`, `b`): an
// author reads the table, and a field added to the schema without it
// was one they could not find.
func TestReadmeDescribesEveryManifestField(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(readme), "| `schema_version` |")
	if start < 0 {
		t.Fatal("README.md has no manifest table (its schema_version row)")
	}
	named := map[string]bool{}
	cell := regexp.MustCompile("`([a-z_]+)`")
	for _, line := range strings.Split(string(readme[start:]), "\n") {
		if !strings.HasPrefix(line, "|") {
			break
		}
		first := strings.Split(line, "|")[1]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			named[m[1]] = true
		}
	}
	b, err := files.ReadFile(Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	for p := range s.Properties {
		if !named[p] {
			t.Errorf("README.md's manifest table has no row for %q", p)
		}
	}
}
