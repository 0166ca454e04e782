package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The server-sent event stream of an HTTP agent is outside input: the
// parser must never panic, and whatever it makes of the bytes, an answer
// is only offered together with a finish reason.
func FuzzStreamRead(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"{\\\"a\\\":1}\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"ac\"}}]}}]}\n\ndata: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"tion\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n"))
	f.Add([]byte("data: {\"error\":{\"message\":\"overloaded\"}}\n\n"))
	f.Add([]byte("data: {not json\n\n"))
	f.Add([]byte(": keep-alive\n\nevent: ping\ndata: {}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"half"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var s stream
		err := s.read(bytes.NewReader(data))
		if err == nil && s.finish == "" {
			t.Fatalf("stream accepted without a finish reason: %q", data)
		}
		var w stream
		_ = w.readWhole(bytes.NewReader(data))
	})
}

// FuzzPresetParse feeds every preset's parser arbitrary program output
// (seeded with the captured samples): agent CLIs are outside programs, and
// no output of theirs may crash the daemon.
func FuzzPresetParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "presets", "*", "*"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, 0)
			f.Add(b, 1)
		}
	}
	home := f.TempDir() // empty: parsers that look for session files find none
	f.Fuzz(func(t *testing.T, out []byte, exit int) {
		for _, name := range PresetNames() {
			p, _ := LookupPreset(name)
			inv := &Invocation{Home: home, Env: map[string]string{}}
			start := time.Now()
			parsed, err := p.Parse(&RunOutput{Stdout: out, Stderr: out, ExitCode: exit, Inv: inv})
			if d := time.Since(start); d > 10*time.Second { // a hang, not a benchmark
				t.Fatalf("%s: parsing %d bytes took %s", name, len(out), d)
			}
			if err == nil && parsed == nil {
				t.Fatalf("%s: nil result without an error", name)
			}
		}
	})
}
