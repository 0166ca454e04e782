package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/history"
)

// TestProcArgv: the probe finds an agent by its exact argv, not by a
// process whose argv merely contains it (the sandbox helper that starts
// it) or begins like it.
func TestProcArgv(t *testing.T) {
	proc := t.TempDir()
	for pid, argv := range map[string]string{
		"10":   "/bin/agent\x00-\x00f-1\x00worker\x00300\x00",
		"11":   "/run/helper\x00__sandbox-exec\x00--\x00/bin/agent\x00-\x00f-2\x00worker\x00300\x00",
		"12":   "/bin/agent\x00-\x00f-3\x00worker\x00300\x00x\x00",
		"self": "/bin/agent\x00-\x00f-4\x00worker\x00300\x00",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "cmdline"), []byte(argv), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		id   string
		want bool
	}{{"f-1", true}, {"f-2", false}, {"f-3", false}, {"f-4", false}, {"f-5", false}} {
		if got := procArgv(proc, []string{"/bin/agent", "-", c.id, "worker", "300"}); got != c.want {
			t.Errorf("procArgv(%s) = %v, want %v", c.id, got, c.want)
		}
	}
}

// TestWaitStart: a call has started once a process runs with its argv
// (this host's /proc), or once the job's history holds its intent; not
// before.
func TestWaitStart(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tag := fmt.Sprintf("probe-test-%d", os.Getpid())
	argv := []string{sh, "-c", "sleep 60; :", tag}
	if err := waitStart(dir, 0, argv, 10*time.Millisecond); err == nil {
		t.Fatal("waitStart saw a call start that did not")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := waitStart(dir, 0, argv, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// No such process, but the history: the intent of call 1, whole.
	other := []string{sh, "-c", "sleep 60; :", tag + "-other"}
	l, _, err := history.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if historyIntent(dir, 0) { // a history without records, and no head yet
		t.Fatal("historyIntent saw an intent in an empty history")
	}
	zero, one := 0, 1
	if err := l.Append(&history.Record{Type: history.TypeIntent, Interaction: &zero, Request: &history.Request{}}); err != nil {
		t.Fatal(err)
	}
	if err := waitStart(dir, 1, other, 10*time.Millisecond); err == nil {
		t.Fatal("waitStart took call 0's intent for call 1's")
	}
	if err := l.Append(&history.Record{Type: history.TypeIntent, Interaction: &one, Request: &history.Request{}}); err != nil {
		t.Fatal(err)
	}
	if err := waitStart(dir, 1, other, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// The line is in the file before its fsync, the head only after:
	// an intent the head does not name yet is not a started call.
	h, err := history.ReadHead(dir)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(history.Head{Seq: h.Seq - 1, Hash: h.Hash})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, history.HeadFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if historyIntent(dir, 1) {
		t.Error("historyIntent took an intent the head does not name for a durable one")
	}
}
