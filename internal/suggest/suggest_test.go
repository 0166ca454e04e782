package suggest

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestNearest(t *testing.T) {
	words := []string{"status", "steer", "history", "list"}
	for _, c := range []struct{ word, want string }{
		{"stauts", "status"}, // a swap is one edit
		{"histroy", "history"},
		{"hist", "history"}, // a prefix of three or more
		{"lst", "list"},
		{"xyz", ""},
		{"st", ""}, // too short to guess from
	} {
		if got := Nearest(c.word, words); got != c.want {
			t.Errorf("Nearest(%q) = %q, want %q", c.word, got, c.want)
		}
	}
}

func TestFlagError(t *testing.T) {
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	fs.Int("max-parallel", 4, "")
	fs.String("hidden-one", "", "")
	if err := fs.MarkHidden("hidden-one"); err != nil {
		t.Fatal(err)
	}
	err := fs.Parse([]string{"--max-parallle=3"})
	if got := FlagError(fs, err); !strings.Contains(got, "unknown flag: --max-parallle") || !strings.HasSuffix(got, "did you mean --max-parallel?") {
		t.Errorf("unknown flag: %q", got)
	}
	err = fs.Parse([]string{"--hidden-on"})
	if got := FlagError(fs, err); strings.Contains(got, "did you mean") {
		t.Errorf("a hidden flag suggested: %q", got)
	}
	other := errors.New(`invalid argument "x" for "--max-parallel" flag`)
	if got := FlagError(fs, other); got != other.Error() {
		t.Errorf("another error changed: %q", got)
	}
}
