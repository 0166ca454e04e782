package agent

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
)

// Qwen Code (npm @qwen-code/qwen-code, program qwen) in headless mode
// with --output-format stream-json against an OpenAI-compatible API: JSON
// lines on stdout ending in a result object. docs/presets/qwen-code.md
// explains every flag, setting and variable.
func init() {
	registerPreset(&Preset{
		API: APIOpenAI, KeyVar: "OPENAI_API_KEY",
		Name:     "qwen-code",
		Program:  "qwen",
		Package:  "npm @qwen-code/qwen-code",
		EnvAllow: []string{"OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "DASHSCOPE_API_KEY"},
		Build:    qwenBuild,
		Parse:    qwenParse,
	})
}

func qwenBuild(inv *Invocation) error {
	dir := filepath.Join(inv.Home, ".qwen")
	if err := inv.mkdir(dir); err != nil {
		return err
	}
	settings, err := json.MarshalIndent(qwenSettings(), "", "  ")
	if err != nil {
		return err
	}
	if err := inv.writeFile(filepath.Join(dir, "settings.json"), settings); err != nil {
		return err
	}

	prompt, f, err := longPrompt(inv, "Read all of it with the read_file tool first (it is long: read it in parts until its end), then follow it.")
	if err != nil {
		return err
	}
	var include []string
	if f != "" {
		// The tools read files only inside the workspace directories.
		include = []string{"--include-directories", inv.CallDir}
	}
	// The prompt is the positional query (taken as it is; -p is
	// deprecated). One starting with "-" would be read as an option.
	if strings.HasPrefix(prompt, "-") {
		prompt = "\n" + prompt
	}
	args := []string{prompt, "--output-format", "stream-json"}
	args = append(args, include...)
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	if inv.SchemaFile != "" {
		// The model must end by calling a structured_output tool with
		// this schema; the result carries the validated object.
		args = append(args, "--json-schema", "@"+inv.SchemaFile)
	}
	if inv.SystemPrompt != "" {
		// Appended: Qwen Code's own prompt (its rules for its tools) stays.
		args = append(args, "--append-system-prompt", inv.SystemPrompt)
	}
	if inv.MaxTurns > 0 {
		args = append(args, "--max-session-turns", strconv.Itoa(inv.MaxTurns))
	}
	// A session whose record is gone (session "fresh" wiped the home)
	// cannot be resumed.
	if inv.ResumeSession != "" && qwenSessionExists(inv.Home, inv.ResumeSession) {
		args = append(args, "--resume", inv.ResumeSession)
	}
	inv.Args = args
	if inv.BaseURL != "" {
		// The SDK appends /chat/completions.
		inv.Env["OPENAI_BASE_URL"] = strings.TrimSuffix(inv.BaseURL, "/")
	}
	return nil
}

// qwenSettings is the user settings file written into the private home.
func qwenSettings() map[string]any {
	return map[string]any{
		"general": map[string]any{"enableAutoUpdate": false},
		"security": map[string]any{
			// An OpenAI-compatible API with a key from the environment.
			"auth": map[string]any{"selectedType": "openai"},
			// An untrusted folder would turn the approval mode back to
			// "default", where a headless run may not edit.
			"folderTrust": map[string]any{"enabled": false},
		},
		// Edits in the workspace are approved; tools that would ask
		// (shell) are refused in headless mode. The default, "auto", asks
		// the model itself (extra, billed requests) whether a call is safe.
		// --approval-mode yolo in command.args allows everything.
		"tools":     map[string]any{"approvalMode": "auto-edit"},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"model": map[string]any{
			// Logist retries API failures itself (with backoff, recorded).
			// This turns off Qwen Code's outer loop of 10 rate-limit
			// retries; its inner 7 attempts cannot be configured.
			"generationConfig": map[string]any{"maxRetries": 0},
		},
	}
}

// qwenSessionExists tells whether Qwen Code keeps the session's record
// (~/.qwen/projects/<project>/chats/<id>.jsonl) in the private home.
func qwenSessionExists(home, id string) bool {
	if id == "" || strings.ContainsAny(id, `/\*?[`) {
		return false
	}
	m, _ := filepath.Glob(filepath.Join(home, ".qwen", "projects", "*", "chats", id+".jsonl"))
	return len(m) > 0
}

// qwenLine is one line of stream-json: the init event, messages, and the
// result object at the end.
type qwenLine struct {
	Type             string          `json:"type"`
	Subtype          string          `json:"subtype"`
	SessionID        string          `json:"session_id"`
	Model            string          `json:"model"`
	IsError          bool            `json:"is_error"`
	NumTurns         int             `json:"num_turns"`
	Result           string          `json:"result"`
	Usage            *qwenUsage      `json:"usage"`
	StructuredResult json.RawMessage `json:"structured_result"`
	Error            *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Message *struct {
		ID      string     `json:"id"`
		Model   string     `json:"model"`
		Usage   *qwenUsage `json:"usage"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"message"`
}

// qwenUsage is the token usage of one reply, or of the whole session in
// the result object.
type qwenUsage struct {
	InputTokens          int64 `json:"input_tokens"`
	OutputTokens         int64 `json:"output_tokens"`
	CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
}

func qwenParse(out *RunOutput) (*Parsed, error) {
	var res *qwenLine
	p := &Parsed{}
	var lastText string
	// The result's usage covers the whole session, also the calls before
	// a resume; this call's tokens are the sum over its own replies.
	var own history.Tokens
	counted := map[string]bool{}
	for _, line := range jsonLines(out.Stdout) {
		var l qwenLine
		if json.Unmarshal(line, &l) != nil {
			continue
		}
		if l.SessionID != "" && p.SessionID == "" {
			p.SessionID = l.SessionID
		}
		switch l.Type {
		case "system":
			if l.Model != "" {
				p.Model = l.Model
			}
		case "assistant":
			if m := l.Message; m != nil && m.Usage != nil && !counted[m.ID] {
				counted[m.ID] = true
				own.Input += m.Usage.InputTokens
				own.Output += m.Usage.OutputTokens
				own.Cache += m.Usage.CacheReadInputTokens
			}
			if l.Message != nil {
				var b strings.Builder
				for _, c := range l.Message.Content {
					if c.Type == "text" {
						b.WriteString(c.Text)
					}
				}
				if b.Len() > 0 {
					lastText = b.String()
				}
			}
		case "result":
			res = &l
		}
	}
	// Qwen Code counts input as the API does (cached tokens included),
	// like Logist.
	if len(counted) > 0 {
		p.Tokens = &own
	}
	if res == nil {
		if e := qwenFatal(out); e != nil {
			p.Err = e
			return p, nil
		}
		return nil, errors.New("no result object on stdout")
	}
	if res.SessionID != "" {
		p.SessionID = res.SessionID
	}
	p.Turns = res.NumTurns
	if u := res.Usage; p.Tokens == nil && u != nil && u.InputTokens+u.OutputTokens > 0 && (out.Inv == nil || out.Inv.ResumeSession == "") {
		// No reply carried usage: the session's total is this call's
		// only when the session started with it.
		p.Tokens = &history.Tokens{Input: u.InputTokens, Output: u.OutputTokens, Cache: u.CacheReadInputTokens}
	}
	structured := len(res.StructuredResult) > 0 && string(res.StructuredResult) != "null"
	if e := qwenError(res, lastText, out.ExitCode, structured); e != nil {
		e.Partial = []byte(res.Result)
		p.Err = e
		return p, nil
	}
	if structured {
		p.Answer = []byte(res.StructuredResult)
	} else {
		p.Answer = []byte(res.Result)
	}
	return p, nil
}

var (
	// qwenAPIErrorText is how Qwen Code words a failed API call:
	// "[API Error: 429 Rate limit reached ...]".
	qwenAPIErrorText = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[API Error:`) })
	// qwenStatusText finds the HTTP status in such a message.
	qwenStatusText = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`\[API Error: (?:Error: )?([1-5][0-9][0-9])\b|status(?: code)?:? ([1-5][0-9][0-9])\b|"code"\s*:\s*([1-5][0-9][0-9])\b`)
	})
)

// qwenError classifies the result object, nil for success. A failed API
// call is worded in the result's error (and, with older versions, only in
// the last assistant text, behind exit status 0).
func qwenError(r *qwenLine, lastText string, exit int, structured bool) *Error {
	msg := ""
	if r.Error != nil {
		msg = r.Error.Message
	}
	apiText := qwenAPIErrorText().MatchString(r.Result) || (!structured && r.Result == "" && qwenAPIErrorText().MatchString(lastText))
	if msg == "" && apiText {
		msg = r.Result
		if msg == "" {
			msg = lastText
		}
	}
	if !r.IsError && msg == "" && !strings.HasPrefix(r.Subtype, "error") {
		return nil
	}
	if msg == "" {
		msg = r.Subtype
	}
	turnLimit := r.Subtype == "error_max_turns" || strings.Contains(strings.ToLower(msg), "maximum session turns")
	return qwenClassify(msg, turnLimit, exit)
}

// qwenFatal reads a failure that ended the program before its result.
func qwenFatal(out *RunOutput) *Error {
	stderr := strings.TrimSpace(string(out.Stderr))
	if stderr == "" || out.ExitCode == 0 {
		return nil
	}
	low := strings.ToLower(stderr)
	switch {
	case strings.Contains(low, "no saved session found") || strings.Contains(low, "session not found") || strings.Contains(low, "no session found"):
		return &Error{Code: codes.AgentFailed, Msg: "qwen cannot resume the session: " + qwenLines(stderr)}
	case strings.Contains(low, "openai_api_key") || strings.Contains(low, "api key") && strings.Contains(low, "missing"):
		return &Error{Code: codes.AuthFailed, Msg: "qwen: " + qwenLines(stderr)}
	case out.ExitCode == 53 || strings.Contains(low, "reached max session turns"):
		return &Error{Code: codes.MaxTurns, Msg: "qwen stopped at its turn limit (command.max_turns → --max-session-turns): " + qwenLines(stderr)}
	case out.ExitCode == 52:
		return &Error{Code: codes.AgentConfig, Msg: "qwen configuration: " + qwenLines(stderr)}
	}
	return nil
}

// qwenLines is the end of stderr without the CLI's notices.
func qwenLines(stderr string) string {
	return stderrText(stderr, "Ripgrep not available", "Warning:", "at ")
}

// qwenClassify turns an error message into a Logist error.
func qwenClassify(msg string, turnLimit bool, exit int) *Error {
	status := 0
	if m := qwenStatusText().FindStringSubmatch(msg); m != nil {
		for _, g := range m[1:] {
			if g != "" {
				status, _ = strconv.Atoi(g)
				break
			}
		}
	}
	low := strings.ToLower(msg)
	text := "qwen: " + truncateText(strings.TrimSpace(msg), 600)
	switch {
	case turnLimit || exit == 53:
		return &Error{Code: codes.MaxTurns, Msg: "qwen stopped at its turn limit (command.max_turns → --max-session-turns): " + truncateText(msg, 300)}
	case status == 401 || status == 403 || strings.Contains(low, "incorrect api key") || strings.Contains(low, "invalid api key") || strings.Contains(low, "missing api key") ||
		strings.Contains(low, "unauthorized") || strings.Contains(low, "authentication"):
		return &Error{Code: codes.AuthFailed, Msg: text + "; check OPENAI_API_KEY"}
	case status == 429 || strings.Contains(low, "rate limit") || strings.Contains(low, "too many requests"):
		// Qwen Code has already made 7 attempts, honouring Retry-After.
		return &Error{Code: codes.RateLimited, Transient: true, Msg: text}
	case status >= 500 || status == 408 || strings.Contains(low, "overloaded"):
		return &Error{Code: codes.APIError, Transient: true, Msg: text}
	case strings.Contains(low, "terminated") || strings.Contains(low, "premature close") || strings.Contains(low, "socket hang up") ||
		strings.Contains(low, "econnreset") || strings.Contains(low, "stream ended") || strings.Contains(low, "other side closed"):
		return &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: text}
	case strings.Contains(low, "json") && (strings.Contains(low, "unexpected token") || strings.Contains(low, "parse") || strings.Contains(low, "position")):
		return &Error{Code: codes.APIMalformed, Transient: true, Msg: text}
	case strings.Contains(low, "connection error") || strings.Contains(low, "fetch failed") || strings.Contains(low, "econnrefused") ||
		strings.Contains(low, "etimedout") || strings.Contains(low, "timed out") || strings.Contains(low, "enotfound"):
		return &Error{Code: codes.APIError, Transient: true, Msg: text}
	case strings.Contains(low, "plain text instead of") || strings.Contains(low, "structured_output"):
		return &Error{Code: codes.AgentFailed, Msg: "qwen: the model did not give its answer through the structured_output tool: " + truncateText(msg, 300)}
	case status != 0:
		// A request the API refused (400: bad model, prompt too long):
		// asking again the same way will not help.
		return &Error{Code: codes.APIError, Msg: text}
	}
	return &Error{Code: codes.AgentFailed, Msg: text}
}
