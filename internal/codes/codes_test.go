package codes_test

import (
	"flag"
	"go/ast"
	"go/build"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/workflow"
)

var update = flag.Bool("update", false, "rewrite docs/codes.md from the catalogue")

const root = "../.."

func TestCatalogueEntriesAreComplete(t *testing.T) {
	name := regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)
	for _, c := range codes.All() {
		if !name.MatchString(c.Name) {
			t.Errorf("%q is not an UPPER_SNAKE code", c.Name)
		}
		if c.Kind != codes.Error && c.Kind != codes.Warning && c.Kind != codes.Info {
			t.Errorf("%s: kind %q", c.Name, c.Kind)
		}
		if c.Area == "" || strings.TrimSpace(c.Meaning) == "" {
			t.Errorf("%s: no area or meaning", c.Name)
		}
		if got, ok := codes.Lookup(c.Name); !ok || got != c {
			t.Errorf("Lookup(%s) = %+v, %v", c.Name, got, ok)
		}
	}
	if codes.KindOf("NO_SUCH_CODE") != codes.Error {
		t.Error("an unknown code must be logged as an error")
	}
}

// docs/codes.md is the catalogue; `go test ./internal/codes -run Docs
// -update` rewrites it after a change to the catalogue.
func TestDocsListTheCatalogue(t *testing.T) {
	p := filepath.Join(root, "docs", "codes.md")
	if *update {
		if err := os.WriteFile(p, []byte(codes.Markdown()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != codes.Markdown() {
		t.Errorf("docs/codes.md differs from the catalogue in internal/codes; run go test ./internal/codes -run Docs -update")
	}
}

// notCodes are the other upper-case words the docs quote: statuses,
// actions, verification classes, message types, environment variables…
// A quoted word that is neither a code nor one of these is a code the
// catalogue does not have (a stale or misspelt one).
var notCodes = []string{
	// a status no job has, in the console's refusals
	"BOGUS",
	// git's own files in .git
	"MERGE_HEAD",
	// job list and history words
	"INVALID", "ERROR", "TIMEOUT", "SYSTEM", "STEWARD", "CONTINUE", "SKIPPED",
	// logist verify's classes, the protocol verifier's
	"HASH_MISMATCH", "CHAIN_BREAK", "SEQUENCE_GAP", "SIGNATURE_INVALID", "SIGNATURE_MISSING", "REPLAY_DIVERGENCE",
	"UNREADABLE", "TAIL_MISSING", "ROLE_POLICY_VIOLATION", "MISSING_ARTIFACT", "ORDERING_VIOLATION", "FINALIZATION_VIOLATION",
	"CHECK_FAILED",
	// logist verify --all's word for a history that fails (beside OK, UNREADABLE)
	"FAILED",
	// the protocol's outcome names
	"REJECTED", "BLOCKED",
	// deliberation message types and outcomes
	"ROUND_START", "OPENING", "CONVERSATION_START", "MESSAGE", "INTERRUPTION", "CONVERSATION_END", "ISSUE_INTRO",
	"SPEAKER_CALL", "SPEECH", "PROPOSAL_BASIS", "PROPOSAL", "VOTE_CALL", "VOTE", "RESULT", "REVIEW",
	"STANCE_UPDATE", "HELPER_IGNORED", "IGNORED_RESULT", "GOVERNED_CHANGE_REFUSED",
	// a negotiation's statuses and transition events (docs/negotiation.md)
	"ROUND_1_OPENINGS", "ROUND_2_CONVO_2_FINALS", "ROUND_3_ISSUE_1_VOTING", "GAME_OVER", "ROUND_N_START",
	"CONVERSATION_ENDED_EARLY", "VOTE_START", "RESULT_ADOPTED", "RESULT_FAILED",
	// environment variables and settings
	"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "FUZZTIME", "ROOT", "GOMAXPROCS", "CRON_TZ",
	"HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY", "CLAUDE_CODE_MAX_RETRIES", "RETRY_MAX_RETRIES",
	// the kernel's and other programs' words
	"EROFS", "ENOSPC", "ENOENT", "EDQUOT", "EACCES", "EPERM", "O_APPEND", "CAP_SYS_PTRACE", "CONFIG_SECURITY_LANDLOCK", "PR_SET_DUMPABLE",
	"RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ECHILD", "F_OFD_GETLK", "IN_CLOSE_WRITE", "MNT_DETACH", "RENAME_NOREPLACE", "EXDEV", "EMLINK", "IN_DELETE", "IN_MOVED_FROM", "CGO_ENABLED", "FS_IOC_GETVERSION",
	// git's words (git workspaces)
	"HEAD", "GIT_INDEX_FILE",
	// examples of bad input in docs/hostile-inputs.md
	"PAUSED", "MERGED",
}

var envVar = regexp.MustCompile(`^(LOGIST|LOGISTD|OPENAI|ANTHROPIC|GEMINI|GOOGLE|OPENCODE)_|_(KEY|URL|BASE|TOKEN)$`)

// Every code the README and docs/ quote is in the catalogue.
func TestDocsQuoteOnlyKnownCodes(t *testing.T) {
	known := map[string]bool{}
	for _, w := range notCodes {
		known[w] = true
	}
	for _, s := range lifecycle.All {
		known[string(s)] = true
	}
	for _, a := range workflow.Actions {
		known[a] = true
	}
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append(files, filepath.Join(root, "README.md"))
	quoted := regexp.MustCompile("`([^`\n]+)`")
	word := regexp.MustCompile(`\b[A-Z][A-Z0-9]*(_[A-Z0-9]+)+\b|^[A-Z]{4,}$`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range quoted.FindAllStringSubmatch(string(b), -1) {
			for _, w := range word.FindAllString(q[1], -1) {
				if _, ok := codes.Lookup(w); ok || known[w] || envVar.MatchString(w) {
					continue
				}
				t.Errorf("%s quotes %s, which is no code in internal/codes (if it is not an error code, add it to notCodes here)", filepath.Base(f), w)
			}
		}
	}
}

// The packages the binaries are built from (and the metering proxy) name
// codes only by the catalogue's constants: a code's name as a string
// literal anywhere else is a second spelling of it.
func TestCodesAreNamedByTheirConstants(t *testing.T) {
	const module = "github.com/logist/logist/"
	seen := map[string]bool{}
	queue := []string{"cmd/logistd", "cmd/logist", "internal/meter"}
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		if seen[pkg] {
			continue
		}
		seen[pkg] = true
		dir := filepath.Join(root, filepath.FromSlash(pkg))
		bp, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", pkg, err)
		}
		for _, imp := range bp.Imports {
			if rel, ok := strings.CutPrefix(imp, module); ok {
				queue = append(queue, rel)
			}
		}
		if pkg == "internal/codes" {
			continue
		}
		fset := token.NewFileSet()
		for _, name := range bp.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				if s, err := strconv.Unquote(lit.Value); err == nil {
					if _, ok := codes.Lookup(s); ok {
						t.Errorf("%s: the code %s is spelt out; use its constant in internal/codes", fset.Position(lit.Pos()), s)
					}
				}
				return true
			})
		}
	}
	for _, want := range []string{"internal/runner", "internal/daemon", "internal/protocol/phases", "internal/deliberation/play"} {
		if !seen[want] {
			t.Errorf("the walk from the binaries does not reach %s", want)
		}
	}
}
