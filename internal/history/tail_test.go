package history

import (
	"os"
	"testing"
)

// LastResponse finds the newest answer (or the newest with warnings:
// status shows them) at the end of the history, past the records that follow it, and never one of a
// unit a writer has not finished.
func TestLastResponse(t *testing.T) {
	dir := t.TempDir()
	if _, ok := LastResponse(dir); ok {
		t.Fatal("LastResponse found an answer in a folder without history")
	}
	l := open(t, dir)
	first := response(0, "worker", "COMPLETED")
	second := response(1, "supervisor", "RETRY")
	second.Response.Warnings = []string{`evidence file "gone.txt" does not exist in the workspace`}
	appendAll(t, l, intent(0, "worker"), first, intent(1, "supervisor"), second,
		&Record{Type: TypeTransition, Transition: &Transition{From: "REVIEWING", To: "RUNNING", Event: "phase_retry", Actor: "supervisor"}})
	r, ok := LastResponse(dir)
	if !ok || r.Role != "supervisor" || len(r.Response.Warnings) != 1 || r.Response.Warnings[0] != second.Response.Warnings[0] {
		t.Fatalf("LastResponse = %+v, %v; want the supervisor's answer with its warning", r, ok)
	}
	// The newest answer that had warnings, past one that had none.
	appendAll(t, l, intent(2, "worker"), response(2, "worker", "COMPLETED"))
	if r, ok := LastWarned(dir); !ok || r.Role != "supervisor" {
		t.Fatalf("LastWarned = %+v, %v; want the supervisor's answer", r, ok)
	}
	if r, ok := LastResponse(dir); !ok || r.Role != "worker" {
		t.Fatalf("LastResponse = %+v, %v; want the worker's last answer", r, ok)
	}

	// A unit cut short (its records say more follow) does not count.
	unfinished := response(3, "worker", "COMPLETED")
	unfinished.More, unfinished.V, unfinished.Seq = true, RecordVersion, 7
	line, _, err := encodeLine(unfinished, nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(Path(dir), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(line); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if r, ok := LastResponse(dir); !ok || r.Interaction == nil || *r.Interaction != 2 {
		t.Fatalf("LastResponse = %+v, %v; want interaction 2, not the unfinished unit's", r, ok)
	}
}
