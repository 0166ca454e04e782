// Package pathguard keeps paths that come from agents and manifests inside
// their job folder: no absolute paths, no '..' that climbs out, no symlink
// that points outside.
package pathguard

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unicode/utf8"
)

// EscapeError says a path would leave its root.
type EscapeError struct {
	Path   string
	Reason string
}

func (e *EscapeError) Error() string {
	if e.Path == "" {
		return "path \"\" names no file in the workspace: " + e.Reason
	}
	return fmt.Sprintf("path %s escapes the workspace: %s", Shown(e.Path), e.Reason)
}

// shownMax is how many bytes of a path Shown quotes.
const shownMax = 160

// Shown quotes path p for a message, cut after shownMax bytes (at a rune)
// with its length: an agent's 2,000-byte path would otherwise fill the
// steward's status line, several times over.
func Shown(p string) string {
	if len(p) <= shownMax {
		return fmt.Sprintf("%q", p)
	}
	cut := shownMax
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return fmt.Sprintf("%q… (%d bytes)", p[:cut], len(p))
}

// Resolve returns the absolute path of rel inside root and whether it
// exists. It fails with *EscapeError when rel is absolute, climbs out with
// '..', or resolves through a symlink to a place outside root (root itself
// may be a symlink; what counts is where it really is).
func Resolve(root, rel string) (abs string, exists bool, err error) {
	if err := Lexical(rel); err != nil {
		return "", false, err
	}
	clean := filepath.Clean(rel)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", false, fmt.Errorf("workspace %s: %w", root, err)
	}
	full := filepath.Join(realRoot, clean)
	// The longest prefix that exists decides where the path really goes;
	// a missing tail cannot contain a symlink yet.
	p := full
	for {
		if _, err := os.Lstat(p); err == nil {
			break
		} else if errors.Is(err, syscall.ENAMETOOLONG) {
			return "", false, fmt.Errorf("path %s: %w", Shown(rel), syscall.ENAMETOOLONG)
		} else if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, os.ErrInvalid) && !errors.Is(err, syscall.ENOTDIR) {
			if pe := (*os.PathError)(nil); errors.As(err, &pe) {
				err = pe.Err // its path is the whole of full: rel is enough
			}
			return "", false, fmt.Errorf("stat %s: %w", Shown(rel), err)
		}
		if p == realRoot {
			break
		}
		p = filepath.Dir(p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		// A dangling symlink: where it points is unknowable, refuse it.
		return "", false, &EscapeError{Path: rel, Reason: "dangling symlink"}
	}
	if !Within(realRoot, real) {
		return "", false, &EscapeError{Path: rel, Reason: "symlink points outside"}
	}
	if p == full {
		return real, true, nil // EvalSymlinks returns it clean
	}
	return filepath.Join(real, strings.TrimPrefix(full, p)), false, nil
}

// Lexical is the part of Resolve that rel alone decides, without looking
// at any folder: it fails with *EscapeError when rel is empty, holds a NUL
// byte, is absolute, or climbs out with '..'. What it passes may still
// leave through a symlink, which only the folder as it is can tell.
func Lexical(rel string) error {
	if rel == "" {
		return &EscapeError{Path: rel, Reason: "empty path"}
	}
	if strings.ContainsRune(rel, 0) {
		return &EscapeError{Path: rel, Reason: "contains a NUL byte"}
	}
	if filepath.IsAbs(rel) {
		return &EscapeError{Path: rel, Reason: "absolute path"}
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return &EscapeError{Path: rel, Reason: "'..' leads outside"}
	}
	return nil
}

// Within reports whether path is root or below it (both clean, absolute).
func Within(root, path string) bool {
	if path == root {
		return true
	}
	return strings.HasPrefix(path, strings.TrimSuffix(root, string(filepath.Separator))+string(filepath.Separator))
}
