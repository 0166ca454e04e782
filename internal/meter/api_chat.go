package meter

// OpenAI Chat Completions (POST /v1/chat/completions), also the API of
// OpenAI-compatible servers. A stream reports usage only in an extra last
// chunk (choices empty) when the request says
// stream_options.include_usage; the proxy asks for it when the client did
// not, and then keeps that chunk from the client. Input is therefore known
// only at the end of a stream: until then it is estimated from the
// request's size.

import (
	"encoding/json"
	"net/url"
)

type chatAPI struct{}

func (chatAPI) name() string { return "openai-chat" }

func (chatAPI) request(rt route, query url.Values, body []byte) (*exchange, error) {
	m, err := topLevel(body)
	if err != nil {
		return nil, err
	}
	model, err := modelOf(m)
	if err != nil {
		return nil, err
	}
	x := &exchange{model: model, query: query, tally: newTally(len(body))}
	if boolOf(m, "stream") {
		opts := map[string]json.RawMessage{}
		if raw, ok := m["stream_options"]; ok && string(raw) != "null" {
			if json.Unmarshal(raw, &opts) != nil || opts == nil {
				return nil, badRequest("stream_options is not an object")
			}
		}
		if !boolOf(opts, "include_usage") {
			opts["include_usage"] = json.RawMessage("true")
			b, err := encodeTopLevel(opts)
			if err != nil {
				return nil, err
			}
			m["stream_options"] = b
			x.usageAdded = true
		}
	}
	if x.body, err = encodeTopLevel(m); err != nil {
		return nil, err
	}
	return x, nil
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func (u *chatUsage) report(t *tally) {
	cached := int64(0)
	if u.PromptTokensDetails != nil {
		cached = u.PromptTokensDetails.CachedTokens
	}
	t.reportInput(u.PromptTokens, cached, 0)
	t.reportOutput(u.CompletionTokens)
}

// chatMessage is a delta (streaming) or a message (whole): the text the
// model produced, in whichever members it came.
type chatMessage struct {
	Content          json.RawMessage `json:"content"`
	ReasoningContent string          `json:"reasoning_content"`
	Reasoning        string          `json:"reasoning"`
	Refusal          string          `json:"refusal"`
	ToolCalls        []struct {
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

func (m *chatMessage) bytes() int {
	if m == nil {
		return 0
	}
	n := len(m.ReasoningContent) + len(m.Reasoning) + len(m.Refusal)
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		n += len(s)
	} else if string(m.Content) != "null" {
		n += len(m.Content) // parts: their JSON
	}
	for _, tc := range m.ToolCalls {
		n += len(tc.Function.Name) + len(tc.Function.Arguments)
	}
	return n
}

type chatChunk struct {
	Choices []struct {
		Delta   *chatMessage `json:"delta"`
		Message *chatMessage `json:"message"`
	} `json:"choices"`
	Usage *chatUsage `json:"usage"`
}

func (chatAPI) event(x *exchange, name string, data []byte) bool {
	var ch chatChunk
	if json.Unmarshal(data, &ch) != nil { // [DONE], or not JSON
		return false
	}
	for _, c := range ch.Choices {
		x.tally.addOutput(c.Delta.bytes())
	}
	if ch.Usage == nil {
		return false
	}
	ch.Usage.report(x.tally)
	// The usage chunk comes last (a server that reports usage on every
	// chunk keeps it final only once the choices are done).
	x.final = len(ch.Choices) == 0
	return x.usageAdded && len(ch.Choices) == 0
}

func (chatAPI) whole(x *exchange, body []byte) error {
	var ch chatChunk
	if json.Unmarshal(body, &ch) != nil || ch.Usage == nil {
		return errNotJSON
	}
	ch.Usage.report(x.tally)
	return nil
}

// cut sends a chunk holding an error: OpenAI's SDKs throw it.
func (chatAPI) cut(x *exchange, f framer, code, msg string) error {
	return f.sse("", errorBody(OpenAI, 402, code, msg))
}
