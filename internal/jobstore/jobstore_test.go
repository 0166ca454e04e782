package jobstore

import (
	"os"
	"strings"
	"testing"
)

// While the daemon saves a manifest in place, over and over, a reader gets
// one of the saved manifests whole every time, never an error.
func TestLoadDuringInPlaceSaves(t *testing.T) {
	dir := t.TempDir()
	w := New(dir)
	w.InPlace = true
	r := New(dir)
	os.MkdirAll(w.JobDir("j"), 0o700)
	const agents = `"agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "s"}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "s"}]}}`
	a := []byte(`{"task_description": "short", ` + agents + `}` + "\n")
	b := []byte(`{"task_description": "a much longer description than the other one, to change the size", ` + agents + `}` + "\n")
	if err := w.WriteManifest("j", a); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			data := a
			if i%2 == 1 {
				data = b
			}
			if err := w.WriteManifestCopy("j", data); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 2000; i++ {
		m, err := r.Load("j")
		if err != nil {
			t.Fatalf("load %d: %v", i, err)
		}
		if d := m.TaskDescription; d != "short" && !strings.HasPrefix(d, "a much longer") {
			t.Fatalf("load %d: a manifest never saved: %q", i, d)
		}
	}
	close(stop)
	<-done
}
