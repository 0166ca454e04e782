package parliament

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"

	"github.com/logist/logist/internal/deliberation"
)

// Governed files (game.files, and the files enacted amendments wrote)
// change only through an enacted vote: the enact tool's file_write. Their
// official text is the last such write, else the text the House was shown
// (the PAPER the Speaker shared). Before a governed file is shared, the
// Clerk compares the workspace with its official text; any other change (a
// member's CLI or command agent writing to the workspace) is refused: a
// GOVERNED_CHANGE_REFUSED message, seen by the Speaker and the steward,
// records it and restores the official text, so the tampered file is
// never shared, amended or enacted.
//
// Members cannot write these files at all where the sandbox can prevent
// it: Protected lists them (deliberation.Protector) and every turn's agent
// gets them mounted read-only (agent.Protected); this check is what holds
// where it cannot (Landlock alone, sandbox none).

// governedFiles are the governed files, configured ones first.
func (s *state) governedFiles() []string {
	files := append([]string(nil), s.cfg.Files...)
	for _, a := range s.amendments {
		if a.Enacted && !slices.Contains(files, a.File) {
			files = append(files, a.File)
		}
	}
	return files
}

func (s *state) isGoverned(f string) bool { return slices.Contains(s.governedFiles(), f) }

// official is a governed file's official text, once it has one.
func (s *state) official(f string) (string, bool) {
	if c, ok := s.files[f]; ok {
		return c, true
	}
	c, ok := s.shared[f]
	return c, ok
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// tampered is the first governed file whose workspace text differs from
// its official text, as the message that refuses the change; nil if none.
func (s *state) tampered() *deliberation.Message {
	if s.ws == "" {
		return nil
	}
	for _, f := range s.governedFiles() {
		want, ok := s.official(f)
		if !ok {
			continue
		}
		got, code, _ := s.readDisk(f, cleanPath(f))
		found := "sha256:" + sha(got)
		if code != exitOK {
			found = "missing or unreadable"
		} else if got == want {
			continue
		}
		line := fmt.Sprintf("The Clerk refuses a change to %s made outside an enacted vote (found %s); the official text is restored.", f, found)
		return &deliberation.Message{Type: tRefused, From: "clerk", Audience: []string{speakerID}, Content: map[string]any{
			"path": f, "expected_sha256": "sha256:" + sha(want), "found": found, "line": line,
			deliberation.FileWriteKey: map[string]any{"path": f, "content": want}}}
	}
	return nil
}

// Protected are the workspace files member agents must not write (the
// governed files): deliberation.Protector, read-only in their sandbox.
func (s *Session) Protected() []string { return s.replay().governedFiles() }
