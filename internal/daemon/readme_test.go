package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/logist/logist/internal/config"
)

// The README's flag table lists every flag logistd has (as its --help
// prints them): a flag added without a row fails here.
func TestReadmeListsEveryFlag(t *testing.T) {
	var out, errb bytes.Buffer
	Main(context.Background(), []string{"logistd", "--help"}, func(string) string { return "" }, &out, &errb)
	flags := regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z][a-z-]*)`).FindAllStringSubmatch(errb.String(), -1)
	if len(flags) < 10 {
		t.Fatalf("read %d flags from --help:\n%s", len(flags), errb.String())
	}
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "| flag | default | meaning |")
	if i < 0 {
		t.Fatal("README.md has no logistd flag table")
	}
	table, _, _ := strings.Cut(text[i:], "\n\n")
	for _, f := range flags {
		if !strings.Contains(table, "`--"+f[1]+"`") {
			t.Errorf("README.md's logistd flag table lacks --%s", f[1])
		}
	}
}

// docs/operations.md's settings table has a row for each of logistd's
// settings, with its variable, its config file key and its default as
// --print-config shows it: a flag added, renamed or given another default
// fails here until the table says so.
func TestOperationsSettingsTable(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty.json") // not the host's /etc/logist/logistd.json
	if err := os.WriteFile(empty, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	defaults := printConfig(t, "defaults", []string{"--config", empty}, nil)
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	i := strings.Index(text, "| flag | variable | config key | default |")
	if i < 0 {
		t.Fatal("docs/operations.md has no settings table")
	}
	table, _, _ := strings.Cut(text[i:], "\n\n")
	quoted := regexp.MustCompile("`([^`]*)`")
	rows := map[string]bool{}
	for _, line := range strings.Split(table, "\n")[2:] {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) != 4 {
			t.Errorf("row %q: want 4 cells", line)
			continue
		}
		var cols [3][]string // flags, variables, keys
		for c := range cols {
			for _, m := range quoted.FindAllStringSubmatch(cells[c], -1) {
				cols[c] = append(cols[c], m[1])
			}
		}
		if len(cols[0]) == 0 || len(cols[1]) != len(cols[0]) || len(cols[2]) != len(cols[0]) {
			t.Errorf("row %q: want as many variables and keys as flags", line)
			continue
		}
		// The default as written: its first word, out of its backticks, is
		// --print-config's value; a plain word (off, none, generated, the
		// host name) stands for no value.
		def := strings.TrimSpace(cells[3])
		first, _, _ := strings.Cut(def, " ")
		word := def != "" && !strings.HasPrefix(def, "`") && (def[0] < '0' || def[0] > '9')
		for k, f := range cols[0] {
			name := strings.TrimPrefix(f, "--")
			src, ok := defaults[name]
			if !ok {
				t.Errorf("row %q: %s is not one of logistd's settings", line, f)
				continue
			}
			rows[name] = true
			if cols[1][k] != config.EnvName(name) {
				t.Errorf("%s: the table says variable %s; logistd reads %s", f, cols[1][k], config.EnvName(name))
			}
			if key := strings.ReplaceAll(name, "-", "_"); cols[2][k] != key {
				t.Errorf("%s: the table says config key %s; logistd reads %s", f, cols[2][k], key)
			}
			none := src.Value == "" || src.Value == "false" || src.Value == "[]"
			if none && !word || !none && strings.Trim(first, "`") != src.Value {
				t.Errorf("%s: the table says default %q; --print-config shows %q", f, def, src.Value)
			}
		}
	}
	for name := range defaults {
		if !rows[name] {
			t.Errorf("docs/operations.md's settings table lacks --%s", name)
		}
	}
}
