package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/secrets"
)

// MaxRetryAfter bounds how long a server's Retry-After is honoured.
const MaxRetryAfter = 5 * time.Minute

// OpenAI calls an OpenAI-compatible Chat Completions server (OpenAI,
// Ollama, vLLM, llama.cpp, LiteLLM) with a streamed request and returns the
// answer only once the stream is complete.
type OpenAI struct {
	Cfg manifest.HTTP
	// Getenv reads the daemon's environment (tests inject it).
	Getenv func(string) string
	// Client, if set, is used instead of one built from the configuration.
	Client *http.Client
}

// Call sends one chat completion request and collects the streamed answer.
func (o *OpenAI) Call(ctx context.Context, req *Request) (*Result, error) {
	get := o.Getenv
	if get == nil {
		get = os.Getenv
	}
	var hidden []string
	key := ""
	if o.Cfg.APIKeyEnv != "" {
		key = get(o.Cfg.APIKeyEnv)
		if key == "" {
			return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("environment variable %s (api_key_env) is not set", o.Cfg.APIKeyEnv)}
		}
		hidden = append(hidden, key)
	}
	headers := http.Header{}
	for _, name := range slices.Sorted(maps.Keys(o.Cfg.HeadersEnv)) {
		env := o.Cfg.HeadersEnv[name]
		v := get(env)
		if v == "" {
			return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("environment variable %s (headers_env %s) is not set", env, name)}
		}
		headers.Set(name, v)
		hidden = append(hidden, v)
	}
	// A short value (a local server's dummy key) is not redacted: it
	// would rewrite the error text around it (secrets.Redactable).
	redact := func(s string) string {
		for _, v := range hidden {
			if secrets.Redactable(v) {
				s = strings.ReplaceAll(s, v, "[REDACTED]")
			}
		}
		return s
	}

	pool, err := o.rootCAs(req.JobDir)
	if err != nil {
		return nil, err
	}
	// Metered (the daemon's engine): the request goes to the proxy with a
	// call token; the proxy forwards it to base_url with the key, the
	// headers_env headers and the ca_file certificates.
	mc, err := openMeter(ctx, req, MeterGrant{API: APIOpenAI, BaseURL: o.Cfg.BaseURL, Key: key,
		Header: headers, RootCAs: pool, Model: o.Cfg.Model, Price: o.Cfg.Price})
	if err != nil {
		return nil, err
	}
	if mc != nil {
		mc.priceField = "http.price"
		hidden = append(hidden, mc.token)
		res, err := o.send(ctx, req, mc.m.BaseURL(mc.m.Root(), APIOpenAI), mc.token, http.Header{}, nil, redact)
		return mc.settle(res, err, nil)
	}
	return o.send(ctx, req, o.Cfg.BaseURL, key, headers, pool, redact)
}

// send makes the request to base and reads the answer.
func (o *OpenAI) send(ctx context.Context, req *Request, base, key string, headers http.Header, pool *x509.CertPool, redact func(string) string) (*Result, error) {
	body, err := o.body(req)
	if err != nil {
		return nil, &Error{Code: codes.AgentConfig, Msg: err.Error()}
	}
	client, closeIdle := o.client(pool)
	defer closeIdle()
	url := strings.TrimRight(base, "/") + "/chat/completions"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("base_url: %v", err)}
	}
	hreq.Header = headers
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "text/event-stream")
	if key != "" {
		hreq.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := client.Do(hreq)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &Error{Code: codes.APIError, Transient: true, Msg: redact(err.Error())}
	}
	defer resp.Body.Close() //nolint:errcheck // a response body, read only
	if resp.StatusCode != http.StatusOK {
		return nil, httpError(resp, redact)
	}
	var st stream
	// A media type is case-insensitive (Text/Event-Stream is a stream).
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/event-stream" {
		err = st.read(resp.Body)
	} else {
		err = st.readWhole(resp.Body)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ae *Error
		if !errors.As(err, &ae) {
			ae = &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: "stream broke before the answer was complete: " + err.Error()}
		}
		ae.Msg = redact(ae.Msg)
		ae.Partial = st.answer()
		return nil, ae
	}
	tokens, cost, note := o.usage(st.usage)
	if st.unread != "" {
		// The answer is whole: a usage out of range (1e308 tokens) or of
		// the wrong type is no reason to ask (and pay) again. Metered, the
		// proxy's figures are the cost of record anyway.
		note = strings.TrimSpace(note + "\nlogist: the server's usage could not be read: " + st.unread)
	}
	switch st.finish {
	case "length":
		return nil, &Error{Code: codes.MaxTokens, Msg: "the answer was cut off by max_tokens (finish_reason length); raise http.max_tokens", Partial: st.answer(), CostUSD: cost}
	case "content_filter":
		return nil, &Error{Code: codes.APIError, Msg: "the server filtered the answer (finish_reason content_filter)", Partial: st.answer(), CostUSD: cost}
	}
	return &Result{Raw: st.answer(), CostUSD: cost, Tokens: tokens, SessionID: st.id, Stderr: note}, nil
}

// body is the JSON request: system and user messages, streaming with
// usage, and the answer schema as a strict response format or a forced
// tool call.
func (o *OpenAI) body(req *Request) ([]byte, error) {
	var msgs []map[string]string
	user := req.Prompt
	if req.SystemPrompt != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": req.SystemPrompt})
		// The rendered prompt starts with the system prompt: not twice.
		if rest := strings.TrimSpace(strings.TrimPrefix(user, req.SystemPrompt)); rest != "" {
			user = rest
		}
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": user})
	// The parameters the intent recorded (Params), and only those.
	p := o.Params()
	b := map[string]any{
		"model":          p.Model,
		"messages":       msgs,
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
	}
	if p.Temperature != nil {
		b["temperature"] = *p.Temperature
	}
	if p.MaxTokens > 0 {
		b["max_tokens"] = p.MaxTokens
	}
	switch o.Cfg.StructuredOutput {
	case "", "json_schema":
		s, err := AnswerSchemaFor(req)
		if err != nil {
			return nil, err
		}
		b["response_format"] = map[string]any{"type": "json_schema",
			"json_schema": map[string]any{"name": "logist_answer", "strict": true, "schema": s}}
	case "tool":
		s, err := AnswerSchemaFor(req)
		if err != nil {
			return nil, err
		}
		b["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{
			"name": "answer", "description": "Give your answer to Logist.", "parameters": s}}}
		b["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": "answer"}}
	case "none":
	default:
		return nil, fmt.Errorf("structured_output %q is not json_schema, tool or none", o.Cfg.StructuredOutput)
	}
	return json.Marshal(b)
}

// rootCAs are the system's certificates plus ca_file's (relative to the
// job's folder), or nil without a ca_file.
func (o *OpenAI) rootCAs(jobDir string) (*x509.CertPool, error) {
	if o.Cfg.CAFile == "" {
		return nil, nil
	}
	p := o.Cfg.CAFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(jobDir, p)
	}
	pem, err := os.ReadFile(p)
	if err != nil {
		return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("ca_file: %v", err)}
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("ca_file %s holds no PEM certificate", p)}
	}
	return pool, nil
}

// client builds an HTTP client on the default transport (the system's
// certificates, or pool). The returned func drops its idle connections.
func (o *OpenAI) client(pool *x509.CertPool) (*http.Client, func()) {
	if o.Client != nil {
		return o.Client, func() {}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if pool != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, tr.CloseIdleConnections
}

// httpError turns a non-200 answer into an *Error: 401/403 need a steward,
// 408, 429 and 5xx are retried (not sooner than Retry-After), other 4xx
// are refusals a retry will not change.
func httpError(resp *http.Response, redact func(string) string) *Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<10))
	detail := strings.TrimSpace(string(b))
	var eb struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &eb) == nil && len(eb.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		var str string
		if json.Unmarshal(eb.Error, &obj) == nil && obj.Message != "" {
			detail = obj.Message
		} else if json.Unmarshal(eb.Error, &str) == nil && str != "" {
			detail = str
		}
	}
	msg := redact(fmt.Sprintf("HTTP %d: %s", resp.StatusCode, truncateText(detail, 300)))
	e := &Error{Code: codes.APIError, Msg: msg}
	switch c := resp.StatusCode; {
	case c == http.StatusUnauthorized || c == http.StatusForbidden:
		e.Code = codes.AuthFailed
		e.Msg += "; check the key named by api_key_env"
	case c == http.StatusTooManyRequests:
		e.Code, e.Transient = codes.RateLimited, true
	case c >= 500 || c == http.StatusRequestTimeout:
		e.Transient = true
	}
	if e.Transient {
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return e
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), bounded
// by MaxRetryAfter.
func retryAfter(h string, now time.Time) time.Duration {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseFloat(h, 64); err == nil {
		d = manifest.Duration(n, time.Second)
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

// usage converts the reported usage to tokens and a cost from the price
// table (or the manifest's override).
func (o *OpenAI) usage(u *usage) (*history.Tokens, float64, string) {
	if u == nil {
		return nil, 0, ""
	}
	t := &history.Tokens{Input: u.PromptTokens, Output: u.CompletionTokens}
	if u.PromptTokensDetails != nil {
		t.Cache = u.PromptTokensDetails.CachedTokens
	}
	p, ok := o.price()
	if !ok {
		return t, 0, fmt.Sprintf("logist: no price known for model %q; cost counted as 0 (set http.price)", o.Cfg.Model)
	}
	return t, TokenCost(*t, p), ""
}

func (o *OpenAI) price() (manifest.Price, bool) {
	if o.Cfg.Price != nil {
		return *o.Cfg.Price, true
	}
	return LookupPrice(o.Cfg.Model)
}

type usage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type toolCall struct {
	Index    int `json:"index"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type message struct {
	Content   *string    `json:"content"`
	ToolCalls []toolCall `json:"tool_calls"`
}

// chunk is one streamed chat.completion.chunk, or a whole chat.completion.
type chunk struct {
	ID      string `json:"id"`
	Choices []struct {
		Index        int      `json:"index"`
		Delta        *message `json:"delta"`
		Message      *message `json:"message"`
		FinishReason *string  `json:"finish_reason"`
	} `json:"choices"`
	// Usage is read apart (stream.add): a usage the answer does not need
	// cannot fail it.
	Usage json.RawMessage `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// stream accumulates an answer.
type stream struct {
	id      string
	content bytes.Buffer
	args    bytes.Buffer
	finish  string
	usage   *usage
	// unread is why a usage the server sent could not be read ("" when
	// it could, or sent none).
	unread string
}

// answer is the tool call's arguments if there was one, else the content.
func (s *stream) answer() []byte {
	if s.args.Len() > 0 {
		return bytes.Clone(s.args.Bytes())
	}
	if s.content.Len() > 0 {
		return bytes.Clone(s.content.Bytes())
	}
	return nil
}

// read follows the server-sent events until data: [DONE]. The answer is
// complete only with a finish_reason and a stream that ended cleanly
// ([DONE], or end of body after the finish_reason); anything else is
// STREAM_CUT.
func (s *stream) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), DefaultMaxOutput)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue // blank separators, comments (":"), event:/id: fields
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			if s.finish == "" {
				return &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: "stream ended ([DONE]) without a finish_reason"}
			}
			return nil
		}
		if err := s.add(data, false); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &Error{Code: codes.AgentOutputLimit, Msg: fmt.Sprintf("a streamed line is longer than %d bytes", DefaultMaxOutput)}
		}
		return err
	}
	if s.finish == "" {
		return &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: "stream ended before the answer was complete (no finish_reason, no [DONE])"}
	}
	return nil
}

// readWhole reads a server that answered without streaming.
func (s *stream) readWhole(r io.Reader) error {
	b, err := io.ReadAll(io.LimitReader(r, DefaultMaxOutput+1))
	if err != nil {
		return err
	}
	if len(b) > DefaultMaxOutput {
		return &Error{Code: codes.AgentOutputLimit, Msg: fmt.Sprintf("response longer than %d bytes", DefaultMaxOutput)}
	}
	if err := s.add(bytes.TrimSpace(b), true); err != nil {
		return err
	}
	if s.finish == "" {
		return &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: "response without a finish_reason"}
	}
	return nil
}

func (s *stream) add(data []byte, whole bool) error {
	var c chunk
	if err := json.Unmarshal(data, &c); err != nil {
		return &Error{Code: codes.APIMalformed, Transient: true, Msg: fmt.Sprintf("server sent a chunk that is not JSON: %s", truncateText(string(data), 200))}
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		var e struct {
			Message string `json:"message"`
		}
		msg := string(c.Error)
		if json.Unmarshal(c.Error, &e) == nil && e.Message != "" {
			msg = e.Message
		}
		return &Error{Code: codes.APIError, Transient: true, Msg: "server reported an error mid-stream: " + truncateText(msg, 300)}
	}
	if c.ID != "" && s.id == "" {
		s.id = c.ID
	}
	if len(c.Usage) > 0 && string(c.Usage) != "null" {
		var u usage
		if err := json.Unmarshal(c.Usage, &u); err != nil {
			s.unread = truncateText(err.Error(), 200)
		} else {
			s.usage, s.unread = &u, ""
		}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue
		}
		m := ch.Delta
		if whole {
			m = ch.Message
		}
		if m != nil {
			if m.Content != nil {
				s.content.WriteString(*m.Content)
			}
			for _, tc := range m.ToolCalls {
				if tc.Index == 0 {
					s.args.WriteString(tc.Function.Arguments)
				}
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
		}
	}
	if s.content.Len()+s.args.Len() > DefaultMaxOutput {
		return &Error{Code: codes.AgentOutputLimit, Msg: fmt.Sprintf("answer longer than %d bytes", DefaultMaxOutput)}
	}
	return nil
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
