package meter

// OpenAI Responses (POST /v1/responses), the API of Codex. A stream
// reports usage once, in response.completed (or response.incomplete or
// response.failed); until then input is estimated from the request's size
// and output from the *.delta events. A background response (answered
// later, fetched by id) cannot be followed and is refused.

import (
	"encoding/json"
	"net/url"
	"strings"
)

type responsesAPI struct{}

func (responsesAPI) name() string { return "openai-responses" }

func (responsesAPI) request(rt route, query url.Values, body []byte) (*exchange, error) {
	m, err := topLevel(body)
	if err != nil {
		return nil, err
	}
	model, err := modelOf(m)
	if err != nil {
		return nil, err
	}
	if boolOf(m, "background") {
		return nil, badRequest("background responses are not metered (the proxy can only meter a response it streams or waits for)")
	}
	out, err := encodeTopLevel(m)
	if err != nil {
		return nil, err
	}
	return &exchange{model: model, body: out, query: query, tally: newTally(len(body))}, nil
}

type responsesUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	InputTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
}

func (u *responsesUsage) report(t *tally) {
	cached := int64(0)
	if u.InputTokensDetails != nil {
		cached = u.InputTokensDetails.CachedTokens
	}
	t.reportInput(u.InputTokens, cached, 0)
	t.reportOutput(u.OutputTokens)
}

type responsesEvent struct {
	Type     string          `json:"type"`
	Seq      *int64          `json:"sequence_number"`
	Delta    json.RawMessage `json:"delta"`
	Response *struct {
		Usage *responsesUsage `json:"usage"`
	} `json:"response"`
}

func (responsesAPI) event(x *exchange, name string, data []byte) bool {
	var ev responsesEvent
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	if ev.Seq != nil {
		x.seq = *ev.Seq
	}
	if ev.Type == "" {
		ev.Type = name
	}
	switch ev.Type {
	case "response.completed", "response.incomplete", "response.failed":
		if ev.Response != nil && ev.Response.Usage != nil {
			ev.Response.Usage.report(x.tally)
			x.final = true
		}
	default:
		// Every streamed piece of output (text, tool arguments, reasoning
		// text and summaries, refusals) is a *.delta event with a string.
		var s string
		if strings.HasSuffix(ev.Type, ".delta") && json.Unmarshal(ev.Delta, &s) == nil {
			x.tally.addOutput(len(s))
		}
	}
	return false
}

func (responsesAPI) whole(x *exchange, body []byte) error {
	var resp struct {
		Usage *responsesUsage `json:"usage"`
	}
	if json.Unmarshal(body, &resp) != nil || resp.Usage == nil {
		return errNotJSON
	}
	resp.Usage.report(x.tally)
	return nil
}

// cut ends the stream the way the API ends a failed response: Codex reads
// response.failed, OpenAI's SDKs throw on the error event.
func (responsesAPI) cut(x *exchange, f framer, code, msg string) error {
	failed, _ := json.Marshal(map[string]any{"type": "response.failed", "sequence_number": x.seq + 1,
		"response": map[string]any{"object": "response", "status": "failed", "model": x.model,
			"error": map[string]any{"code": code, "message": msg}, "usage": nil}})
	if err := f.sse("response.failed", failed); err != nil {
		return err
	}
	e, _ := json.Marshal(map[string]any{"type": "error", "sequence_number": x.seq + 2, "code": code, "message": msg, "param": nil})
	return f.sse("error", e)
}
