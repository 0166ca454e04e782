package meter

// Anthropic Messages (POST /v1/messages). Usage comes in message_start
// (input, cache reads and writes, and an output count that is only a
// start) and in message_delta (the cumulative output count; lately also
// the input counts), or in the message object when it does not stream.
// input_tokens there are the uncached ones: the cache's are counted apart.

import (
	"encoding/json"
	"net/url"
)

type anthropicAPI struct{}

func (anthropicAPI) name() string { return "anthropic-messages" }

func (anthropicAPI) request(rt route, query url.Values, body []byte) (*exchange, error) {
	m, err := topLevel(body)
	if err != nil {
		return nil, err
	}
	model, err := modelOf(m)
	if err != nil {
		return nil, err
	}
	out, err := encodeTopLevel(m)
	if err != nil {
		return nil, err
	}
	return &exchange{model: model, body: out, query: query, tally: newTally(len(body))}, nil
}

// anthropicUsage is a usage object; absent members are nil.
type anthropicUsage struct {
	InputTokens   *int64 `json:"input_tokens"`
	OutputTokens  *int64 `json:"output_tokens"`
	CacheCreation *int64 `json:"cache_creation_input_tokens"`
	CacheRead     *int64 `json:"cache_read_input_tokens"`
}

// anthropicInput is the input counts seen so far: message_delta may
// repeat some of them and leave others out.
type anthropicInput struct{ uncached, cacheRead, cacheWrite int64 }

func (u *anthropicUsage) report(x *exchange) {
	if u == nil {
		return
	}
	in := &x.anthropicIn
	if u.InputTokens != nil || u.CacheCreation != nil || u.CacheRead != nil {
		set := func(dst *int64, v *int64) {
			if v != nil {
				*dst = tokens(*v)
			}
		}
		set(&in.uncached, u.InputTokens)
		set(&in.cacheRead, u.CacheRead)
		set(&in.cacheWrite, u.CacheCreation)
		x.tally.reportInput(tokens(in.uncached, in.cacheRead, in.cacheWrite), in.cacheRead, in.cacheWrite)
	}
	if u.OutputTokens != nil {
		x.tally.reportOutput(*u.OutputTokens)
	}
}

type anthropicEvent struct {
	Type    string `json:"type"`
	Message *struct {
		Usage *anthropicUsage `json:"usage"`
	} `json:"message"`
	Delta *struct {
		Text        string `json:"text"`
		PartialJSON string `json:"partial_json"`
		Thinking    string `json:"thinking"`
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"`
}

func (anthropicAPI) event(x *exchange, name string, data []byte) bool {
	var ev anthropicEvent
	if json.Unmarshal(data, &ev) != nil {
		return false
	}
	switch ev.Type {
	case "message_start":
		if ev.Message != nil {
			ev.Message.Usage.report(x)
		}
	case "content_block_delta":
		if d := ev.Delta; d != nil {
			x.tally.addOutput(len(d.Text) + len(d.PartialJSON) + len(d.Thinking))
		}
	case "message_delta":
		ev.Usage.report(x)
		x.final = x.final || ev.Usage != nil && ev.Usage.OutputTokens != nil
	}
	return false
}

func (anthropicAPI) whole(x *exchange, body []byte) error {
	var msg struct {
		Usage *anthropicUsage `json:"usage"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Usage == nil {
		return errNotJSON
	}
	zero := int64(0)
	if msg.Usage.OutputTokens == nil {
		msg.Usage.OutputTokens = &zero
	}
	if msg.Usage.InputTokens == nil {
		msg.Usage.InputTokens = &zero
	}
	msg.Usage.report(x)
	return nil
}

// cut sends an error event: the SDK throws the error it carries.
func (anthropicAPI) cut(x *exchange, f framer, code, msg string) error {
	return f.sse("error", errorBody(Anthropic, 402, code, msg))
}
