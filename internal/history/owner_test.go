package history

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// namesHistoryFile matches a string that names one of the history's files
// or the archives' pattern: "history.jsonl", "history-index.json",
// "history-" followed by a digit, a glob or a format verb (or nothing: a
// prefix to match), ".jsonl.gz". ("history-max-bytes", a flag, is not a
// file. jobHistory.json, the seed's format that logist history --format
// json prints, is named in help texts and messages: it is matched only
// through history.JobHistoryFile.)
var namesHistoryFile = regexp.MustCompile(`history\.jsonl|history-index|history-head|history-(?:[0-9\[%*?]|$)|\.jsonl\.gz`)

// ownedNames are this package's exported file names, which code outside
// it does not use either (tests may, to damage a file on purpose).
var ownedNames = map[string]bool{"FileName": true, "IndexFile": true, "JobHistoryFile": true, "HeadFile": true}

const historyImport = "github.com/logist/logist/internal/history"

// historyFileNames returns where the Go source src (parsed as file) builds
// a history file's path or matches its name: a string literal naming one,
// or one of ownedNames used through an import of this package.
func historyFileNames(fset *token.FileSet, file string, src []byte) ([]string, error) {
	f, err := parser.ParseFile(fset, file, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	local := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == historyImport {
			local = "history"
			if im.Name != nil {
				local = im.Name.Name
			}
		}
	}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.BasicLit:
			if n.Kind != token.STRING {
				return true
			}
			if s, err := strconv.Unquote(n.Value); err == nil && namesHistoryFile.MatchString(s) {
				found = append(found, fset.Position(n.Pos()).String()+": "+n.Value)
			}
		case *ast.SelectorExpr:
			if x, ok := n.X.(*ast.Ident); ok && local != "" && x.Name == local && ownedNames[n.Sel.Name] {
				found = append(found, fset.Position(n.Pos()).String()+": "+local+"."+n.Sel.Name)
			}
		}
		return true
	})
	return found, nil
}

// TestOnlyHistoryNamesItsFiles keeps the rule this package's files.go
// states: outside internal/history, no Go code (tests aside) builds the
// path of a history file or matches its name; it asks this package
// (Path, Present, Files, IsFile, Follower). Comments may name the files.
func TestOnlyHistoryNamesItsFiles(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	own := filepath.Join(root, "internal", "history")
	fset := token.NewFileSet()
	var offenders []string
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p == own || (p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		found, err := historyFileNames(fset, p, src)
		offenders = append(offenders, found...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 50 {
		t.Fatalf("only %d Go files found under %s: the walk is wrong", files, root)
	}
	for _, o := range offenders {
		t.Errorf("%s: names a history file; use internal/history's API (Path, Present, Files, IsFile, Follower)", o)
	}
}

// The check finds what it looks for (and lets the rest be).
func TestHistoryFileNamesCheck(t *testing.T) {
	src := `package x

import (
	"path/filepath"

	h "github.com/logist/logist/internal/history"
)

// Comments may name history.jsonl and history-index.json.
var (
	a = filepath.Join("d", "history.jsonl")
	b = "history-index.json"
	c = "history-[0-9]*.jsonl"
	d = "history-%06d.jsonl"
	e = "history-"
	f = "x.jsonl.gz"
	i = h.FileName
	j = h.IndexFile
	fine1 = "history-max-bytes"
	fine2 = "history"
	fine3 = h.Path("d")
	fine4 = "jobHistory.json not written"
	k     = h.JobHistoryFile
)
`
	found, err := historyFileNames(token.NewFileSet(), "x.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 9 {
		t.Fatalf("found %d, want 9:\n%s", len(found), strings.Join(found, "\n"))
	}
	for _, f := range found {
		if strings.Contains(f, "fine") || strings.Contains(f, "max-bytes") || strings.Contains(f, "Path") {
			t.Errorf("flagged %s", f)
		}
	}
}
