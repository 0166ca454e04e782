package daemon

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
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
