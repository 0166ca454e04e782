package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The README's command table names every flag of every command (its row
// for the command, synopsis or text): a flag added without it fails here.
// The global ones (--jobs-dir, --format, --help) are described once above
// the table.
func TestReadmeListsEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "| `logist "); ok {
			name, _, _ := strings.Cut(rest, " ")
			name = strings.TrimSuffix(name, "`")
			rows[name] += line
		}
	}
	for _, c := range commands {
		if c.hidden {
			continue
		}
		row, ok := rows[c.name]
		if !ok {
			t.Errorf("README.md's command table has no row for logist %s", c.name)
			continue
		}
		if c.flags == nil {
			continue
		}
		fs := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
		c.flags(fs)
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Deprecated != "" {
				return
			}
			if !strings.Contains(row, "--"+f.Name) && (f.Shorthand == "" || !strings.Contains(row, "`-"+f.Shorthand) && !strings.Contains(row, "[-"+f.Shorthand+"]")) {
				t.Errorf("README.md's row for logist %s lacks --%s", c.name, f.Name)
			}
		})
	}
}
