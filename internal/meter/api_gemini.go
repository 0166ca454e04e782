package meter

// Gemini generateContent and streamGenerateContent
// (POST /{version}/models/{model}:method). Every response, and every chunk
// of a stream, may carry usageMetadata: early chunks often only the prompt
// count, the last one (with a finishReason) all of it. promptTokenCount
// includes the cached tokens; thoughts are billed as output but counted
// apart from candidatesTokenCount. A stream asked for without alt=sse is a
// JSON array: the proxy asks for SSE (which it can follow event by event)
// and gives the client the array back.

import (
	"encoding/json"
	"net/url"
)

type geminiAPI struct{}

func (geminiAPI) name() string { return "gemini" }

func (geminiAPI) request(rt route, query url.Values, body []byte) (*exchange, error) {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return nil, badRequest("the request body is not a JSON object")
	}
	x := &exchange{model: rt.model, body: body, query: query, tally: newTally(len(body))}
	if rt.stream && query.Get("alt") != "sse" {
		x.array = true
		query.Set("alt", "sse")
	}
	return x, nil
}

type geminiUsage struct {
	Prompt     *int64 `json:"promptTokenCount"`
	Cached     *int64 `json:"cachedContentTokenCount"`
	Candidates *int64 `json:"candidatesTokenCount"`
	Thoughts   *int64 `json:"thoughtsTokenCount"`
	ToolUse    *int64 `json:"toolUsePromptTokenCount"`
}

type geminiResponse struct {
	Candidates []struct {
		Content *struct {
			Parts []struct {
				Text         string          `json:"text"`
				FunctionCall json.RawMessage `json:"functionCall"`
			} `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	Usage *geminiUsage `json:"usageMetadata"`
}

func val(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// read counts one response (or chunk): its parts as output streamed, then
// its usage. final: the figures are complete (a whole response, or a
// chunk with a finishReason), so absent counts are zeros. It reports
// whether it read the final usage.
func (g *geminiResponse) read(t *tally, final bool) bool {
	for _, c := range g.Candidates {
		if c.FinishReason != "" {
			final = true
		}
		if c.Content == nil {
			continue
		}
		for _, p := range c.Content.Parts {
			t.addOutput(len(p.Text) + len(p.FunctionCall))
		}
	}
	u := g.Usage
	if u == nil {
		return false
	}
	if final || u.Prompt != nil || u.ToolUse != nil {
		t.reportInput(tokens(val(u.Prompt), val(u.ToolUse)), val(u.Cached), 0)
	}
	if final || u.Candidates != nil || u.Thoughts != nil {
		t.reportOutput(tokens(val(u.Candidates), val(u.Thoughts)))
	}
	return final
}

func (geminiAPI) event(x *exchange, name string, data []byte) bool {
	var g geminiResponse
	if json.Unmarshal(data, &g) == nil && g.read(x.tally, false) {
		x.final = true
	}
	return false
}

func (geminiAPI) whole(x *exchange, body []byte) error {
	var g geminiResponse
	if json.Unmarshal(body, &g) != nil || g.Usage == nil {
		return errNotJSON
	}
	g.read(x.tally, true)
	return nil
}

// cut sends the error object on its own: @google/genai parses each piece
// of a stream as JSON first and throws the error it holds (on an array
// stream it is the array's last element).
func (geminiAPI) cut(x *exchange, f framer, code, msg string) error {
	return f.object(errorBody(Gemini, 402, code, msg))
}
