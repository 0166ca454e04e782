package manifest

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// TestAuditNoteIsAnExcerpt: an audit entry keeps a note of MaxAuditNote
// bytes whole and cuts a longer one at a character's start (a steward's
// text is in the manifest once, not again in each of 50 entries).
func TestAuditNoteIsAnExcerpt(t *testing.T) {
	var m Manifest
	whole := strings.Repeat("a", MaxAuditNote)
	m.Audit(time.Now(), "Steward", "HALT", whole, nil)
	long := "a" + strings.Repeat("é", MaxAuditNote) // the cut falls inside an é
	m.Audit(time.Now(), "Steward", "RESUME", long, nil)
	if got := m.History[0].Note; got != whole {
		t.Errorf("a note of the limit: %d bytes kept", len(got))
	}
	got := m.History[1].Note
	if !strings.HasSuffix(got, excerptCut) || !utf8.ValidString(got) || !strings.HasPrefix(long, strings.TrimSuffix(got, excerptCut)) || len(got) > MaxAuditNote+len(excerptCut) {
		t.Errorf("a long note kept as %d bytes %q...", len(got), got[:20])
	}
}

// Excerpt is the engine's cut too (stderr, stdout, summaries): at every
// length around a multi-byte character it keeps valid UTF-8.
func TestExcerptNeverSplitsACharacter(t *testing.T) {
	s := strings.Repeat("ab€", 10) // € is 3 bytes
	for n := 0; n < len(s); n++ {
		got := Excerpt(s, n)
		if !utf8.ValidString(got) || !strings.HasSuffix(got, excerptCut) || len(got) > n+len(excerptCut) {
			t.Errorf("Excerpt(%d) = %q", n, got)
		}
	}
	if Excerpt(s, len(s)) != s {
		t.Error("a text of the limit is not kept whole")
	}
}
