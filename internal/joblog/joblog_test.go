package joblog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
)

func TestProblemLevelAndTypeComeFromTheCodesKind(t *testing.T) {
	for _, c := range []struct {
		code, level, typ string
	}{
		{codes.AgentTimeout, "ERROR", "error"},
		{codes.EvidenceMissing, "WARN", "warning"},
		{codes.HistoryTornTail, "WARN", "warning"},
		{codes.AwaitingReply, "INFO", "info"},
		{"NOT_A_CODE", "ERROR", "error"},
	} {
		var buf bytes.Buffer
		Log(slog.New(slog.NewJSONHandler(&buf, nil)), "something", Problem{Job: "j", Status: "RUNNING", Code: c.code,
			Attempt: 2, Checkpoint: "cp-start", Phase: "work"}, "extra", 1)
		ls := Lines(buf.Bytes())
		if len(ls) != 1 {
			t.Fatalf("%s: %d lines", c.code, len(ls))
		}
		l := ls[0]
		if l["level"] != c.level || l["type"] != c.typ || l["actor"] != System || l["phase"] != "work" || l["extra"] != 1.0 {
			t.Errorf("%s: %v", c.code, l)
		}
		err := Check(l)
		if c.code == "NOT_A_CODE" {
			if err == nil || !strings.Contains(err.Error(), "not in the catalogue") {
				t.Errorf("an unknown code passes Check: %v", err)
			}
		} else if err != nil {
			t.Errorf("%s: %v", c.code, err)
		}
	}
}

func TestTransitionLine(t *testing.T) {
	var buf bytes.Buffer
	LogTransition(slog.New(slog.NewJSONHandler(&buf, nil)), Transition{Job: "j", From: "RUNNING", To: "REVIEWING",
		Event: "phase_advance", Actor: "worker", Checkpoint: "cp-0001-work", FromPhase: "work", ToPhase: "review"})
	l := Lines(buf.Bytes())[0]
	if err := Check(l); err != nil || l["level"] != "INFO" || l["from"] != "RUNNING" || l["to_phase"] != "review" {
		t.Errorf("%v: %v", err, l)
	}
}

func TestCheckFindsWhatIsMissing(t *testing.T) {
	good := map[string]any{"level": "WARN", "type": "warning", "job_id": "j", "status": "", "actor": "SYSTEM",
		"error_code": codes.EvidenceMissing, "attempt": 0.0, "checkpoint_id": ""}
	if err := Check(good); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(map[string]any){
		"no checkpoint": func(m map[string]any) { delete(m, "checkpoint_id") },
		"no actor":      func(m map[string]any) { m["actor"] = "" },
		"as an error":   func(m map[string]any) { m["type"], m["level"] = "error", "ERROR" },
		"at ERROR":      func(m map[string]any) { m["level"] = "ERROR" },
		"no type":       func(m map[string]any) { delete(m, "type") },
	} {
		m := map[string]any{}
		for k, v := range good {
			m[k] = v
		}
		change(m)
		if Check(m) == nil {
			t.Errorf("%s: passes Check", name)
		}
	}
}
