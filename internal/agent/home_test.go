package agent

import (
	"bytes"
	"fmt"
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
			// The call's scratch folder (its TMPDIR) is the agent's too.
			callDir := t.TempDir()
			plant(t, callDir, codexUsageBefore, kind, `{"session": "`+id+`", "usage": {"input_tokens": 5}}`)
			quickly(t, "codex before", func() {
				if _, ok := codexBefore(&RunOutput{Inv: &Invocation{CallDir: callDir}}, id); ok {
					t.Error("codex: the total before read through a planted file")
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

// Every preset's Build writes its files into the agent's home and the
// call's scratch folder without following a link the agent planted there
// in an earlier call: for each file it writes, and each folder on the
// way, a symlink to a file or folder outside is replaced, and what it
// named is untouched.
func TestPresetBuildsDoNotWriteThroughPlantedLinks(t *testing.T) {
	for name, p := range presets {
		t.Run(name, func(t *testing.T) {
			inv := func(root string) *Invocation {
				return &Invocation{Program: "/bin/" + name, Model: "m", SystemPrompt: "the role's prompt",
					Prompt: strings.Repeat("long prompt ", 20_000), Workspace: filepath.Join(root, "ws"),
					Home: filepath.Join(root, "home"), CallDir: filepath.Join(root, "call"), BaseURL: "http://127.0.0.1:8788/v1",
					Schema: []byte(`{}`), SchemaFile: filepath.Join(root, "call", "answer-schema.json"), Env: map[string]string{}}
			}
			// What it writes, on a clean home.
			clean := t.TempDir()
			for _, d := range []string{"ws", "home", "call"} {
				if err := os.MkdirAll(filepath.Join(clean, d), 0o700); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Build(inv(clean)); err != nil {
				t.Skipf("%s's Build: %v", name, err)
			}
			var written []string
			for _, d := range []string{"home", "call"} {
				_ = filepath.WalkDir(filepath.Join(clean, d), func(path string, e os.DirEntry, err error) error {
					if err == nil && e.Type().IsRegular() {
						rel, _ := filepath.Rel(clean, path)
						written = append(written, rel)
					}
					return nil
				})
			}
			if len(written) == 0 {
				return
			}
			for _, how := range []string{"file", "folder"} {
				root := t.TempDir()
				out := t.TempDir()
				for _, d := range []string{"ws", "home", "call"} {
					if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
						t.Fatal(err)
					}
				}
				victims := map[string]string{}
				for i, rel := range written {
					victim := filepath.Join(out, fmt.Sprintf("victim-%d", i))
					if err := os.WriteFile(victim, []byte("the host's"), 0o600); err != nil {
						t.Fatal(err)
					}
					victims[victim] = "the host's"
					link := filepath.Join(root, rel)
					target := victim
					if how == "folder" && filepath.Dir(rel) != "home" && filepath.Dir(rel) != "call" {
						// The file's folder is a link to a folder outside
						// holding a file of that name.
						dir := filepath.Join(out, fmt.Sprintf("dir-%d", i))
						if err := os.MkdirAll(dir, 0o700); err != nil {
							t.Fatal(err)
						}
						v := filepath.Join(dir, filepath.Base(rel))
						if err := os.WriteFile(v, []byte("the host's"), 0o600); err != nil {
							t.Fatal(err)
						}
						victims[v] = "the host's"
						link, target = filepath.Dir(link), dir
					}
					if _, err := os.Lstat(link); err == nil {
						continue // its folder is linked already
					}
					if err := os.MkdirAll(filepath.Dir(link), 0o700); err != nil {
						t.Fatal(err)
					}
					if err := os.Symlink(target, link); err != nil {
						t.Fatal(err)
					}
				}
				if err := p.Build(inv(root)); err != nil {
					t.Fatalf("%s, links at each %s: %v", name, how, err)
				}
				for v, want := range victims {
					if b, _ := os.ReadFile(v); string(b) != want {
						t.Errorf("%s, links at each %s: %s outside was written: %.40q", name, how, v, b)
					}
				}
				for _, rel := range written {
					if fi, err := os.Lstat(filepath.Join(root, rel)); err != nil || !fi.Mode().IsRegular() {
						t.Errorf("%s, links at each %s: %s is not a file of the home's own: %v", name, how, rel, err)
					}
				}
			}
		})
	}
}
