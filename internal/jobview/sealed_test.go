package jobview

import (
	"path/filepath"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/secrets"
)

// An Opener with the content key opens a sealed job's manifest text and
// records; without a readable key it leaves them sealed; Text opens one
// value without touching its source.
func TestOpener(t *testing.T) {
	key := filepath.Join(t.TempDir(), "content.key")
	c, err := secrets.LoadOrCreateCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	sealed := c.Seal("the plan", "j")
	mk := func() *manifest.Manifest {
		m := &manifest.Manifest{JobID: "j", EncryptHistory: true}
		m.Run.Reason = sealed
		return m
	}
	rec := func() history.Record {
		return history.Record{Response: &history.Response{Summary: sealed}}
	}
	op := NewOpener(key)
	if m := op.Manifest(mk()); m.Run.Reason != "the plan" {
		t.Errorf("opened reason %q", m.Run.Reason)
	}
	recs := []history.Record{rec()}
	op.Records("j", recs)
	if recs[0].Response.Summary != "the plan" {
		t.Errorf("opened summary %q", recs[0].Response.Summary)
	}
	if got := op.Text("j", sealed); got != "the plan" {
		t.Errorf("Text = %q", got)
	}
	if got := op.Text("other", sealed); got != sealed {
		t.Errorf("a value bound to another job opened: %q", got)
	}
	none := NewOpener(filepath.Join(t.TempDir(), "missing.key"))
	if m := none.Manifest(mk()); m.Run.Reason != sealed {
		t.Errorf("opened without the key: %q", m.Run.Reason)
	}
	if none.Reveal("j") != nil {
		t.Error("Reveal without the key is not nil")
	}
	var nilOp *Opener
	if m := nilOp.Manifest(mk()); m.Run.Reason != sealed || nilOp.Text("j", sealed) != sealed {
		t.Error("a nil Opener opened something")
	}
}
