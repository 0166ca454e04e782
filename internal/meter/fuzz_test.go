package meter

import (
	"bytes"
	"errors"
	"io"
	"math"
	"net/url"
	"testing"

	"github.com/logist/logist/internal/manifest"
)

// FuzzSSEReader: whatever an upstream sends, the reader loses and adds no
// byte (the client sees what the upstream sent), returns no event over the
// bound (it stops with errEventTooLarge), and ends.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"event: message_start\ndata: {\"a\":1}\n\n",
		"data: [DONE]\n\n",
		"data: a\r\ndata: b\r\n\r\n: comment\n\nid: 1\nretry: 5\n\n",
		"\n\n\ndata: x",
		"data:no-space\n\nevent:e\n\n",
		"data: " + string(bytes.Repeat([]byte("z"), 300)) + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 256
		r := newSSEReader(bytes.NewReader(in), max)
		var out []byte
		for i := 0; ; i++ {
			if i > len(in)+1 {
				t.Fatal("the reader does not end")
			}
			raw, ev, err := r.next()
			out = append(out, raw...)
			if err == nil {
				if len(raw) > max {
					t.Fatalf("an event of %d bytes passed the bound", len(raw))
				}
				if len(ev.data) > len(raw) {
					t.Fatalf("data longer than its event")
				}
				continue
			}
			if errors.Is(err, errEventTooLarge) {
				if !bytes.HasPrefix(in, out) {
					t.Fatalf("bytes lost before the bound")
				}
				return
			}
			if err != io.EOF {
				t.Fatalf("error %v", err)
			}
			break
		}
		if !bytes.Equal(out, in) {
			t.Fatalf("framing changed the stream:\n%q\n%q", in, out)
		}
	})
}

// FuzzUsageDecoders: no event or body of any API makes a decoder panic or
// yields negative, overflowing or unpriceable usage.
func FuzzUsageDecoders(f *testing.F) {
	for _, s := range []string{
		`{"type":"message_start","message":{"usage":{"input_tokens":10,"cache_read_input_tokens":5,"output_tokens":1}}}`,
		`{"type":"message_delta","usage":{"output_tokens":-7,"input_tokens":9223372036854775807}}`,
		`{"type":"content_block_delta","delta":{"text":"hi","partial_json":"{}","thinking":"t"}}`,
		`{"choices":[{"delta":{"content":"x","tool_calls":[{"function":{"arguments":"{}"}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":9}}}`,
		`{"choices":[{"delta":{"content":[{"type":"text","text":"a"}]}}]}`,
		`{"type":"response.completed","sequence_number":4,"response":{"usage":{"input_tokens":1,"output_tokens":2}}}`,
		`{"type":"response.output_text.delta","delta":"abc"}`,
		`{"candidates":[{"content":{"parts":[{"text":"a"},{"functionCall":{"name":"f"}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":4,"cachedContentTokenCount":99}}`,
		`[DONE]`, `null`, `{}`, `{"usage":null}`,
	} {
		f.Add("", []byte(s))
	}
	price := manifest.Price{InputPerMTok: 3, OutputPerMTok: 15}
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		for _, a := range []api{anthropicAPI{}, chatAPI{}, responsesAPI{}, geminiAPI{}} {
			x := &exchange{api: a, model: "m", tally: newTally(len(data)), usageAdded: true}
			a.event(x, name, data)
			a.event(x, name, data)
			check(t, a, x, price)
			x = &exchange{api: a, model: "m", tally: newTally(len(data))}
			_ = a.whole(x, data) // refused or metered: check says whether consistently
			check(t, a, x, price)
			// A request body: read or refused, never a panic.
			_, _ = a.request(route{model: "m", stream: true}, url.Values{}, data)
		}
	})
}

func check(t *testing.T, a api, x *exchange, price manifest.Price) {
	t.Helper()
	u := x.tally.usage()
	if u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 || u.CacheRead+u.CacheWrite > u.Input ||
		u.Input > 2*maxTokens || u.Output > 2*maxTokens {
		t.Fatalf("%s: usage %+v", a.name(), u)
	}
	if c := Cost(u, price); c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		t.Fatalf("%s: cost %v", a.name(), c)
	}
}
