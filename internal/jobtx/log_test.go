package jobtx

import (
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/lifecycle"
)

// A transaction's log lines carry seed 004 §7's fields: its transitions,
// its errors, and its warnings at WARN (not as errors).
func TestTransactionLogLinesCarryTheSeedsFields(t *testing.T) {
	f := newFixture(t)
	f.log.Reset()
	tx := f.begin(t)
	f.unit(t, tx)
	tx.LogCode(codes.EvidenceMissing, "worker", 1, "evidence file notes.md does not exist")
	tx.LogCode(codes.SnapshotFailed, joblog.System, 0, "disk full")
	if err := tx.Transition(lifecycle.EvActivate, lifecycle.Pending, "", "STEWARD", ""); err == nil {
		t.Fatal("REVIEWING -(activate)-> PENDING was allowed")
	}
	if err := tx.Commit(); err != nil { // a transition is logged once committed
		t.Fatal(err)
	}
	tx.Close()

	seen := map[string]map[string]any{}
	for _, l := range joblog.Lines([]byte(f.log.String())) {
		if l["type"] == nil && l["error_code"] == nil {
			continue // not one of seed 004's lines ("uncommitted history records dropped")
		}
		if err := joblog.Check(l); err != nil {
			t.Errorf("%v: %v", err, l)
		}
		key, _ := l["error_code"].(string)
		if l["type"] == joblog.TypeTransition {
			key = l["event"].(string)
		}
		seen[key] = l
	}
	if l := seen[string(lifecycle.EvAdvance)]; l == nil || l["job_id"] != "j" || l["from"] != "RUNNING" || l["to"] != "REVIEWING" ||
		l["actor"] != "worker" || l["checkpoint_id"] != "cp-0000-work" {
		t.Errorf("transition line %v", l)
	}
	if l := seen[codes.EvidenceMissing]; l == nil || l["level"] != "WARN" || l["type"] != "warning" || l["status"] != "REVIEWING" ||
		l["attempt"] != 1.0 || l["phase"] != "review" {
		t.Errorf("warning line %v", l)
	}
	for _, code := range []string{codes.SnapshotFailed, codes.IllegalTransition} {
		if l := seen[code]; l == nil || l["level"] != "ERROR" || l["type"] != "error" {
			t.Errorf("error line %v", l)
		}
	}
}
