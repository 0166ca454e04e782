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
	if !strings.HasSuffix(got, auditCut) || !utf8.ValidString(got) || !strings.HasPrefix(long, strings.TrimSuffix(got, auditCut)) || len(got) > MaxAuditNote+len(auditCut) {
		t.Errorf("a long note kept as %d bytes %q...", len(got), got[:20])
	}
}
