package jobview

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

func TestPoints(t *testing.T) {
	rp := func(id, desc string) history.Record {
		return history.Record{Type: history.TypeRecoveryPoint, RecoveryPoint: &history.RecoveryPoint{CheckpointID: id, Description: desc}}
	}
	recs := []history.Record{rp("cp-start", "first"), {Type: history.TypeTransition}, rp("cp-1", "one"), rp("cp-start", "again")}
	ps := Points(recs)
	if len(ps) != 2 || ps[0].CheckpointID != "cp-start" || ps[0].Description != "again" || ps[1].CheckpointID != "cp-1" {
		t.Fatalf("points %+v", ps)
	}
	if p, err := PointNamed("j", ps, "cp-1"); err != nil || p != ps[1] {
		t.Errorf("PointNamed cp-1: %v %v", p, err)
	}
	if _, err := PointNamed("j", ps, "cp-9"); !errors.Is(err, jobstore.ErrNotFound) {
		t.Errorf("PointNamed cp-9: %v", err)
	}
	if _, err := SnapshotChanges(t.TempDir(), ps[0], ps[1]); err == nil {
		t.Error("points without snapshots were compared")
	}
	if cps := Checkpoints(recs); len(cps) != 2 || cps[0].Restorable == "" {
		t.Errorf("checkpoints %+v", cps)
	}
}

func TestPMDecision(t *testing.T) {
	if in, err := PMDecision("veto", "r", "g"); err != nil || in.Content["decision"] != "veto" || in.From != "prime_minister" {
		t.Errorf("veto: %+v %v", in, err)
	}
	if _, err := PMDecision("shrug", "", ""); err == nil {
		t.Error("shrug taken")
	}
}

// A job whose files refuse the reader (permission denied) is listed as
// UNREADABLE, saying which file: not as an invalid manifest. The fast
// JSON item says the same as ListItem.
func TestUnreadableIsNotInvalid(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		err        error
		status     string
		noteHas    string
		noteHasNot string
	}{
		{&fs.PathError{Op: "open", Path: filepath.Join(dir, "j", jobstore.ManifestFile), Err: syscall.EACCES}, StatusUnreadable,
			"could not be read: permission denied on job.json", "invalid"},
		{fmt.Errorf("read: %w", &fs.PathError{Op: "open", Path: "/elsewhere/x", Err: syscall.EPERM}), StatusUnreadable,
			"permission denied on /elsewhere/x", "invalid"},
		{errors.New(filepath.Join(dir, "j", jobstore.ManifestFile) + ": /agents: missing properties"), StatusInvalid, "/agents: missing properties", "permission"},
	} {
		en := jobstore.Entry{ID: "j", Err: c.err}
		if got := LoadStatus(c.err); got != c.status {
			t.Errorf("LoadStatus(%v) = %s, want %s", c.err, got, c.status)
		}
		item := ListItem(dir, en)
		note, _ := item["error"].(string)
		if item["status"] != c.status || !strings.Contains(note, c.noteHas) || strings.Contains(note, c.noteHasNot) {
			t.Errorf("%v: item %v", c.err, item)
		}
		b, ok := AppendListItem(nil, dir, &en, nil, "")
		var fast map[string]any
		if !ok || json.Unmarshal(b, &fast) != nil || fast["status"] != item["status"] || fast["error"] != item["error"] {
			t.Errorf("%v: AppendListItem %s, ListItem %v", c.err, b, item)
		}
	}
}
