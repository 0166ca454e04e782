package meter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"github.com/logist/logist/internal/manifest"
)

// api is one metered wire API. Each implementation (api_*.go) knows its
// request fields, its usage fields, and how its clients are told of a
// failure in the middle of a stream.
type api interface {
	// name is the API's name in logs.
	name() string
	// request reads a request body: the model (Gemini names it in the
	// path: rt.model) and the body and query to send upstream.
	request(rt route, query url.Values, body []byte) (*exchange, error)
	// event reads one server-sent event of a streamed response into
	// x.tally (and sets x.final when it holds the response's final
	// usage); drop is true for an event the client must not see.
	event(x *exchange, name string, data []byte) (drop bool)
	// whole reads a whole (not streamed) response body into x.tally.
	whole(x *exchange, body []byte) error
	// cut ends a stream with an error its clients treat as a failure.
	cut(x *exchange, f framer, code, msg string) error
}

// exchange is one metered request and its response.
type exchange struct {
	api    api
	family Family
	model  string
	// body and query go upstream.
	body  []byte
	query url.Values
	// usageAdded: the proxy asked for the usage a client did not (OpenAI
	// chat's stream_options.include_usage), so the usage chunk is not
	// shown to the client.
	usageAdded bool
	// array: the client asked Gemini for a stream without alt=sse, a JSON
	// array; the proxy asks for SSE and turns it back into the array.
	array bool
	// seq is the last sequence_number of a Responses stream.
	seq int64
	// anthropicIn is the input counts an Anthropic stream reported.
	anthropicIn anthropicInput
	tally       *tally
	// final: the provider reported the response's final usage; the rest
	// of the stream costs nothing more.
	final bool

	// What was charged to the call so far, and the budget's last word.
	charged    Usage
	chargedUSD float64
	remaining  float64
	spent      bool
}

// settle charges the call what the tally's usage adds to what was charged
// before (a correction may give some back) and reports whether the job
// may go on spending.
func (x *exchange) settle(c *call, price manifest.Price) bool {
	u := x.tally.usage()
	cost := Cost(u, price)
	if u == x.charged && cost == x.chargedUSD {
		return !x.spent
	}
	remaining, ok := c.charge(u.sub(x.charged), cost-x.chargedUSD)
	x.charged, x.chargedUSD, x.remaining, x.spent = u, cost, remaining, !ok
	return ok
}

// errRequest is a request the proxy cannot meter as it is (400).
type errRequest struct{ msg string }

func (e *errRequest) Error() string { return e.msg }

func badRequest(format string, a ...any) error { return &errRequest{msg: fmt.Sprintf(format, a...)} }

// topLevel decodes a JSON object's members. Duplicate members keep the
// last value, and the body sent upstream is re-encoded from these members,
// so the upstream reads the very model the proxy priced.
func topLevel(body []byte) (map[string]json.RawMessage, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, badRequest("the request body is not a JSON object")
	}
	return m, nil
}

// encodeTopLevel re-encodes members decoded by topLevel.
func encodeTopLevel(m map[string]json.RawMessage) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// modelOf reads the "model" member of a request.
func modelOf(m map[string]json.RawMessage) (string, error) {
	var model string
	if err := json.Unmarshal(m["model"], &model); err != nil || model == "" {
		return "", badRequest("the request names no model")
	}
	if len(model) > 256 {
		return "", badRequest("the model name is longer than 256 bytes")
	}
	return model, nil
}

// boolOf reads a boolean member (false when absent or not a boolean).
func boolOf(m map[string]json.RawMessage, k string) bool {
	var b bool
	_ = json.Unmarshal(m[k], &b) // absent or not a boolean: false
	return b
}

// errorBody is an error in the shape of a family's API, which its SDKs
// turn into an error with the message (and, for Anthropic and OpenAI, the
// code or type).
func errorBody(f Family, status int, code, msg string) []byte {
	msg = proxyMessage(code, msg)
	var v any
	switch f {
	case Anthropic:
		v = map[string]any{"type": "error", "error": map[string]any{"type": anthropicErrorType(status), "message": msg}}
	case Gemini:
		v = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}}
	default:
		v = map[string]any{"error": map[string]any{"message": msg, "type": openAIErrorType(status), "code": code, "param": nil}}
	}
	b, _ := json.Marshal(v)
	return b
}

// proxyMessage is how the proxy words an error: who says it, the code,
// what happened.
func proxyMessage(code, msg string) string { return "logist metering proxy: " + code + ": " + msg }

func anthropicErrorType(status int) string {
	switch status {
	case 400, 413:
		return "invalid_request_error"
	case 401:
		return "authentication_error"
	case 402:
		return "billing_error"
	case 403:
		return "permission_error"
	case 404:
		return "not_found_error"
	}
	return "api_error"
}

func openAIErrorType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 402:
		return "insufficient_budget"
	case status == 403:
		return "permission_error"
	case status < 500:
		return "invalid_request_error"
	}
	return "server_error"
}

func geminiStatus(status int) string {
	switch status {
	case 400, 413:
		return "INVALID_ARGUMENT"
	case 401:
		return "UNAUTHENTICATED"
	case 402:
		// Not RESOURCE_EXHAUSTED: the Gemini CLI takes that for a quota it
		// may wait out or fall back from.
		return "FAILED_PRECONDITION"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "UNAVAILABLE"
}

// errNotJSON is an event or body that is not the JSON the API sends.
var errNotJSON = errors.New("not JSON")
