package schemas

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"testing"
)

// The JSON Schema library compiles its drafts' meta-schemas when a schema
// is first compiled, not when a program starts (third_party/jsonschema,
// PATCHED.md): a command that validates nothing (logist status) must not
// pay for them. Upstream's init made about 8,500 allocations; the patched
// one a handful. The test binary is run again with GODEBUG=inittrace=1,
// which reports each package's init.
func TestLibraryInitCompilesNothing(t *testing.T) {
	if os.Getenv("LOGIST_INITTRACE_CHILD") != "" {
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLibraryInitCompilesNothing$")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1", "LOGIST_INITTRACE_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m := regexp.MustCompile(`(?m)^init github\.com/santhosh-tekuri/jsonschema/v5 @.* (\d+) allocs$`).FindSubmatch(out)
	if m == nil {
		return // an init that allocates nothing is not reported
	}
	if n, _ := strconv.Atoi(string(m[1])); n > 200 {
		t.Fatalf("the jsonschema package's init made %d allocations: it compiles its meta-schemas at start-up again (%s)", n, m[0])
	}
}
