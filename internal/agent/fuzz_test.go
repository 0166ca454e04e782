package agent

import (
	"bytes"
	"testing"
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
