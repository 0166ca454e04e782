package pathguard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"
)

// realTemp returns a temp dir with symlinks resolved (macOS /var -> /private/var).
func realTemp(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func write(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
}

func wantEscape(t *testing.T, root, rel, reasonPart string) {
	t.Helper()
	abs, exists, err := Resolve(root, rel)
	var esc *EscapeError
	if !errors.As(err, &esc) {
		t.Fatalf("Resolve(%q) = (%q, %v, %v), want *EscapeError", rel, abs, exists, err)
	}
	if esc.Path != rel {
		t.Errorf("EscapeError.Path = %q, want %q", esc.Path, rel)
	}
	if reasonPart != "" && !strings.Contains(esc.Reason, reasonPart) {
		t.Errorf("EscapeError.Reason = %q, want it to mention %q", esc.Reason, reasonPart)
	}
	if rel != "" && !strings.Contains(esc.Error(), "escapes the workspace") {
		t.Errorf("Error() = %q", esc.Error())
	}
	if abs != "" || exists {
		t.Errorf("refused path returned abs=%q exists=%v", abs, exists)
	}
}

func wantInside(t *testing.T, root, rel, wantAbs string, wantExists bool) {
	t.Helper()
	abs, exists, err := Resolve(root, rel)
	if err != nil {
		t.Fatalf("Resolve(%q) error %v", rel, err)
	}
	if abs != wantAbs {
		t.Errorf("Resolve(%q) abs = %q, want %q", rel, abs, wantAbs)
	}
	if exists != wantExists {
		t.Errorf("Resolve(%q) exists = %v, want %v", rel, exists, wantExists)
	}
}

func TestResolveLexicalRefusals(t *testing.T) {
	root := realTemp(t)
	for _, c := range []struct{ rel, reason string }{
		{"", "empty"},
		{"a\x00b", "NUL"},
		{"\x00", "NUL"},
		{"/etc/passwd", "absolute"},
		{"/", "absolute"},
		{"..", "'..'"},
		{"../x", "'..'"},
		{"a/../../b", "'..'"},
		{"./../b", "'..'"},
		{"a/b/../../../c", "'..'"},
	} {
		t.Run(c.rel, func(t *testing.T) { wantEscape(t, root, c.rel, c.reason) })
	}
}

func TestResolveInside(t *testing.T) {
	root := realTemp(t)
	write(t, filepath.Join(root, "b"), "x")
	write(t, filepath.Join(root, "dir", "nested", "f.txt"), "x")

	wantInside(t, root, "b", filepath.Join(root, "b"), true)
	wantInside(t, root, "a/../b", filepath.Join(root, "b"), true)
	wantInside(t, root, "./b", filepath.Join(root, "b"), true)
	wantInside(t, root, "dir/nested/f.txt", filepath.Join(root, "dir", "nested", "f.txt"), true)
	wantInside(t, root, "dir//nested/./f.txt", filepath.Join(root, "dir", "nested", "f.txt"), true)
	wantInside(t, root, "dir", filepath.Join(root, "dir"), true)
	// Missing paths resolve inside the root but do not exist.
	wantInside(t, root, "missing.txt", filepath.Join(root, "missing.txt"), false)
	wantInside(t, root, "dir/missing/deeper.txt", filepath.Join(root, "dir", "missing", "deeper.txt"), false)
	wantInside(t, root, "..foo", filepath.Join(root, "..foo"), false)
	wantInside(t, root, "a..b/c", filepath.Join(root, "a..b", "c"), false)
}

// A path through a regular file cannot exist; it is a missing file, not an
// escape (seed 002: an invalid evidence path is a warning, not STUCK).
func TestResolveThroughRegularFileIsMissing(t *testing.T) {
	root := realTemp(t)
	write(t, filepath.Join(root, "file.txt"), "x")
	wantInside(t, root, "file.txt/sub", filepath.Join(root, "file.txt", "sub"), false)
}

func TestResolveRootIsSymlink(t *testing.T) {
	base := realTemp(t)
	real := filepath.Join(base, "real")
	write(t, filepath.Join(real, "f.txt"), "x")
	link := filepath.Join(base, "link")
	symlink(t, real, link)

	// What counts is where the root really is; abs is under the real root.
	wantInside(t, link, "f.txt", filepath.Join(real, "f.txt"), true)
	wantInside(t, link, "new.txt", filepath.Join(real, "new.txt"), false)
	wantEscape(t, link, "../real/f.txt", "'..'")
}

func TestResolveSymlinks(t *testing.T) {
	base := realTemp(t)
	root := filepath.Join(base, "ws")
	outside := filepath.Join(base, "outside")
	write(t, filepath.Join(root, "in.txt"), "x")
	write(t, filepath.Join(outside, "secret.txt"), "s")
	symlink(t, filepath.Join(outside, "secret.txt"), filepath.Join(root, "leak.txt"))
	symlink(t, outside, filepath.Join(root, "outdir"))
	symlink(t, filepath.Join(base, "nowhere"), filepath.Join(root, "dangling"))
	symlink(t, "in.txt", filepath.Join(root, "alias.txt"))
	if err := os.MkdirAll(filepath.Join(root, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "..", filepath.Join(root, "sub", "up"))
	symlink(t, "../..", filepath.Join(root, "sub", "upup"))
	symlink(t, "loop", filepath.Join(root, "loop"))

	wantEscape(t, root, "leak.txt", "outside")
	wantEscape(t, root, "outdir/secret.txt", "outside")
	// Even a missing file below an outside-pointing directory is refused.
	wantEscape(t, root, "outdir/not-there.txt", "outside")
	wantEscape(t, root, "outdir", "outside")
	// A path "below" a file symlink pointing outside is refused, not missing.
	wantEscape(t, root, "leak.txt/sub", "outside")
	wantEscape(t, root, "dangling", "dangling")
	wantEscape(t, root, "sub/upup/outside/secret.txt", "outside")
	wantEscape(t, root, "loop", "")

	// A symlink that stays inside is fine; abs is the real target.
	wantInside(t, root, "alias.txt", filepath.Join(root, "in.txt"), true)
	wantInside(t, root, "sub/up/in.txt", filepath.Join(root, "in.txt"), true)
}

func TestResolveMissingRoot(t *testing.T) {
	root := filepath.Join(realTemp(t), "does-not-exist")
	_, _, err := Resolve(root, "x")
	if err == nil {
		t.Fatal("Resolve under a missing root succeeded")
	}
	var esc *EscapeError
	if errors.As(err, &esc) {
		t.Fatalf("missing root reported as escape: %v", err)
	}
}

func TestWithin(t *testing.T) {
	for _, c := range []struct {
		root, path string
		want       bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b", "/a/b/c", true},
		{"/a/b", "/a/b/c/d", true},
		{"/a/b", "/a/bc", false},
		{"/a/b", "/a", false},
		{"/a/b", "/", false},
		{"/a/b/", "/a/b/c", true},
		{"/", "/anything", true},
		{"/a/b", "/x/a/b", false},
	} {
		if got := Within(c.root, c.path); got != c.want {
			t.Errorf("Within(%q, %q) = %v, want %v", c.root, c.path, got, c.want)
		}
	}
}

// An agent's path is quoted, not copied whole, into what a steward reads:
// a 2,000-byte evidence path once filled the status line three times over.
func TestLongAndEmptyPathsAreShownShort(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("a", 2000)
	_, _, err := Resolve(root, long)
	if err == nil || !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Fatalf("Resolve(2,000 bytes) = %v, want ENAMETOOLONG", err)
	}
	if len(err.Error()) > 400 || !strings.Contains(err.Error(), "(2000 bytes)") {
		t.Errorf("the error is %d bytes: %.300s", len(err.Error()), err)
	}
	esc := &EscapeError{Path: "/" + long, Reason: "absolute path"}
	if len(esc.Error()) > 400 || !strings.Contains(esc.Error(), "(2001 bytes)") {
		t.Errorf("EscapeError of a long path: %.300s", esc.Error())
	}
	if got := Shown("ü" + strings.Repeat("é", 200)); !utf8.ValidString(got) {
		t.Errorf("Shown cut a rune: %q", got)
	}
	if err := Lexical(""); err == nil || strings.Contains(err.Error(), "escapes") || !strings.Contains(err.Error(), "names no file") {
		t.Errorf("the empty path: %v", err)
	}
}
