package lifecycle

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the README's lifecycle diagram from the table")

const (
	readme      = "../../README.md"
	beginMarker = "<!-- BEGIN lifecycle diagram: generated from internal/lifecycle by go test ./internal/lifecycle -update -->\n"
	endMarker   = "<!-- END lifecycle diagram -->\n"
)

// The README's lifecycle diagram is the table's: a change to either that
// the other does not follow fails here.
func TestReadmeDiagramIsTheTable(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i, j := strings.Index(text, beginMarker), strings.Index(text, endMarker)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q ... %q", beginMarker, endMarker)
	}
	want := "```mermaid\n" + Mermaid() + "```\n"
	got := text[i+len(beginMarker) : j]
	if got == want {
		return
	}
	if *update {
		text = text[:i+len(beginMarker)] + want + text[j:]
		if err := os.WriteFile(readme, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README.md's lifecycle diagram differs from the table (go test ./internal/lifecycle -update rewrites it):\n--- README\n%s--- table\n%s", got, want)
}

// Every move of the table is drawn, and only those.
func TestMermaidDrawsEveryTransition(t *testing.T) {
	d := Mermaid()
	for _, tr := range Table() {
		found := false
		for _, line := range strings.Split(d, "\n") {
			head, evs, ok := strings.Cut(strings.TrimSpace(line), ": ")
			if ok && head == string(tr.From)+" --> "+string(tr.To) {
				for _, ev := range strings.Split(evs, ", ") {
					found = found || ev == string(tr.Event)
				}
			}
		}
		if !found {
			t.Errorf("diagram lacks %s", show(tr))
		}
	}
	if !strings.Contains(d, "SUCCESS --> PENDING: steward_rollback") || !strings.Contains(d, "REVIEWING --> HALTED_COST: cost_exceeded") {
		t.Errorf("diagram:\n%s", d)
	}
	if !strings.Contains(d, "CANCELED --> [*]") || strings.Contains(d, "SUCCESS --> [*]") {
		t.Errorf("final statuses wrong (CANCELED is final, SUCCESS can be rolled back):\n%s", d)
	}
}
