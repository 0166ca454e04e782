package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// quickly fails the test when f has not returned within 10 s: a read that
// blocks on a named pipe, or reads /dev/zero, never returns.
func quickly(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: still reading after 10 s", what)
	}
}

// plant makes rel under home what kind says: a named pipe, a symlink to
// /dev/zero, or a symlink to a file outside the home holding text.
func plant(t *testing.T, home, rel, kind, text string) {
	t.Helper()
	p := filepath.Join(home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(p)
	var err error
	switch kind {
	case "fifo":
		err = syscall.Mkfifo(p, 0o600)
	case "zero":
		err = os.Symlink("/dev/zero", p)
	case "outside":
		out := filepath.Join(t.TempDir(), "elsewhere")
		if err = os.WriteFile(out, []byte(text), 0o600); err == nil {
			err = os.Symlink(out, p)
		}
	case "file":
		err = os.WriteFile(p, []byte(text), 0o600)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// What logistd reads back of a preset's private home, whose files its agent
// writes from inside the sandbox: a named pipe, a symlink to /dev/zero or
// out of the home is not read (it blocked logistd in open(), or filled its
// memory), and a real record still is.
func TestHomeFilesAnAgentPlanted(t *testing.T) {
	const id = "ses_0123456789abcdef"
	for _, kind := range []string{"fifo", "zero", "outside"} {
		t.Run(kind, func(t *testing.T) {
			home := t.TempDir()
			db := ".local/share/opencode/opencode.db"
			plant(t, home, db, kind, "x "+id+" x")
			quickly(t, "opencode", func() {
				if opencodeSessionExists(home, id) {
					t.Error("opencode: a session found through a planted database")
				}
			})
			gem := ".gemini/tmp/p/chats/session-2026-" + id[:8] + ".json"
			plant(t, home, gem, kind, `{"sessionId": "`+id+`"}`+"\n")
			quickly(t, "gemini", func() {
				if geminiSessionExists(home, id) {
					t.Error("gemini: a session found through a planted record")
				}
			})
			cl := ".cline/data/sessions/" + id + "/" + id + ".json"
			plant(t, home, cl, kind, `{"session_id": "`+id+`", "started_at": "2026-01-01T00:00:00Z"}`)
			quickly(t, "cline session", func() {
				if got := clineSession(home, time.Time{}); got != "" {
					t.Errorf("cline: session %q found through a planted record", got)
				}
			})
			plant(t, home, ".cline/data/logs/cline.log", kind, `{"statusCode": 401}`+"\n")
			quickly(t, "cline log", func() { _ = clineLogError(home, time.Time{}) })
			codexHome := filepath.Join(home, ".codex")
			r := filepath.Join(codexHome, "sessions", "2026", "01", "01", "rollout-x-"+id+".jsonl")
			plant(t, home, strings.TrimPrefix(r, home+"/"), kind, `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1}}}}`+"\n")
			quickly(t, "codex", func() {
				if _, ok := codexRolloutTotals(codexHome, r); ok {
					t.Error("codex: totals read through a planted rollout")
				}
			})
		})
	}
}

// The real files are still read: a database whose id crosses a megabyte's
// boundary, a rollout whose token count follows a line too long to hold.
func TestHomeFilesAreStillRead(t *testing.T) {
	const id = "ses_0123456789abcdef"
	home := t.TempDir()
	pad := bytes.Repeat([]byte{'x'}, 1<<20-5)
	plant(t, home, ".local/share/opencode/opencode.db", "file", string(pad)+id+"tail")
	if !opencodeSessionExists(home, id) {
		t.Error("opencode: the session across a chunk's end was not found")
	}
	plant(t, home, ".gemini/tmp/p/chats/session-2026-"+id[:8]+".json", "file", `{"sessionId": "`+id+`"}`+"\n")
	if !geminiSessionExists(home, id) {
		t.Error("gemini: the session was not found")
	}
	plant(t, home, ".cline/data/sessions/"+id+"/"+id+".json", "file", `{"session_id": "`+id+`", "started_at": "2026-01-01T00:00:00Z"}`)
	if got := clineSession(home, time.Time{}); got != id {
		t.Errorf("cline: session %q, want %q", got, id)
	}
	codexHome := filepath.Join(home, ".codex")
	r := filepath.Join(codexHome, "r.jsonl")
	long := `{"type":"response_item","payload":{"text":"` + strings.Repeat("y", 3<<20) + `"}}` + "\n"
	count := `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":7,"output_tokens":2}}}}` + "\n"
	plant(t, home, ".codex/r.jsonl", "file", count+long+count)
	if u, ok := codexRolloutTotals(codexHome, r); !ok || u.Input != 7 || u.Output != 2 {
		t.Errorf("codex: totals %+v %v, want the count after the long line", u, ok)
	}
}

// eachLine hands over every line of at most max bytes and skips longer
// ones whole, whatever the buffer's size.
func TestEachLineSkipsLongLines(t *testing.T) {
	in := "a\n" + strings.Repeat("b", 200_000) + "\nc\n\n" + strings.Repeat("d", 10) + "\n" + strings.Repeat("e", 100_000) + "\nlast"
	var got []string
	if err := eachLine(strings.NewReader(in), 100_000, func(l []byte) { got = append(got, string(l)) }); err != nil {
		t.Fatal(err)
	}
	want := []string{"a", "c", "", "dddddddddd", strings.Repeat("e", 100_000), "last"}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %.20q, want %.20q", i, got[i], want[i])
		}
	}
}
