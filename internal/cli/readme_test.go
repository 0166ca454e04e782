package cli

import (
	"os"
	"regexp"
	"slices"
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

// Every command the README names (`logist NAME`, or an exception to what
// cluster mode covers) is one logist has, shown in its help: the README
// once named a checkpoints command that is only the hidden
// __checkpoints of shell completion. What it says of cluster mode holds:
// a command it names as without a cluster form has none, and one it does
// not name has one.
func TestReadmeNamesRealCommands(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	shown := map[string]*command{}
	for _, c := range commands {
		if !c.hidden {
			shown[c.name] = c
		}
	}
	words := map[string]bool{"help": true} // logist help [COMMAND]
	for _, m := range regexp.MustCompile("`logist ([a-z_][a-z_-]*)").FindAllStringSubmatch(readme, -1) {
		if _, ok := shown[m[1]]; !ok && !words[m[1]] {
			t.Errorf("README.md names logist %s, which is not a command of logist help", m[1])
		}
	}
	i := strings.Index(readme, "(or `LOGISTD_DATABASE_URL`: cluster mode) every command")
	if i < 0 {
		t.Fatal("README.md no longer says which commands cluster mode covers")
	}
	sentence, _, _ := strings.Cut(readme[i:], "reads and steers")
	var except []string
	if _, list, ok := strings.Cut(sentence, "every command but"); ok {
		for _, m := range regexp.MustCompile("`([a-z_-]+)`").FindAllStringSubmatch(list, -1) {
			except = append(except, m[1])
		}
	}
	for _, name := range except {
		if c, ok := shown[name]; !ok || c.cluster != nil {
			t.Errorf("README.md says cluster mode lacks %s, which is not a command without a cluster form", name)
		}
	}
	for name, c := range shown {
		if c.cluster == nil && !slices.Contains(except, name) {
			t.Errorf("logist %s has no cluster form, and README.md does not say so", name)
		}
	}
}

// Each command's synopsis in its help (logist CMD --help, and the usage
// line of its errors) is the one its row in the README's command table
// shows: reply's help offered a bare "-" for stdin, which reply refused
// ("expected one JOB argument, got 2"); --file - is the way.
func TestReadmeSynopsisIsHelps(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	synopsis := map[string]string{}
	row := regexp.MustCompile("^\\| `(logist ([a-z_-]+)(?:[^`\\\\]|\\\\.)*)`")
	for _, line := range strings.Split(string(b), "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			if _, dup := synopsis[m[2]]; !dup {
				synopsis[m[2]] = strings.ReplaceAll(m[1], `\|`, "|")
			}
		}
	}
	for _, c := range commands {
		want, ok := synopsis[c.name]
		if c.hidden || !ok {
			continue // TestReadmeListsEveryFlag reports a missing row
		}
		if got := strings.TrimSpace("logist " + c.name + " " + c.args); got != want {
			t.Errorf("logist %s --help shows %q; README.md's command table shows %q", c.name, got, want)
		}
	}
}
