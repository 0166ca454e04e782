package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
)

// Claude Code (npm @anthropic-ai/claude-code, program claude) in print
// mode: one JSON result object on stdout. docs/presets/claude-code.md
// explains every flag and variable.
func init() {
	registerPreset(&Preset{
		API: APIAnthropic, KeyVar: "ANTHROPIC_API_KEY",
		Name:     "claude-code",
		Program:  "claude",
		Package:  "npm @anthropic-ai/claude-code",
		EnvAllow: []string{"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL"},
		Build:    claudeBuild,
		Parse:    claudeParse,
		// --json-schema is checked by claude with a full validator.
		FullSchema: true,
		OwnPrices:  true,
	})
}

func claudeBuild(inv *Invocation) error {
	prompt, f, err := longPrompt(inv, "Read all of it with the Read tool first, then follow it.")
	if err != nil {
		return err
	}
	var addDir []string
	if f != "" {
		addDir = []string{"--add-dir", inv.CallDir}
	}
	// The prompt follows -p directly: a variadic option (--add-dir, or
	// --allowedTools in command.args) must not swallow it, and an argument
	// starting with "-" would be read as an option.
	if strings.HasPrefix(prompt, "-") {
		prompt = "\n" + prompt
	}
	args := []string{"-p", prompt}
	args = append(args, addDir...)
	args = append(args, "--output-format", "json",
		// Edits in the working directory are allowed; anything else that
		// would ask (shell commands, files elsewhere) is denied at once
		// instead of waiting for a person.
		"--permission-mode", "acceptEdits", "--permission-prompts", "none")
	if len(inv.Schema) > 0 {
		// The answer comes back validated, in structured_output.
		args = append(args, "--json-schema", string(inv.Schema))
	}
	if inv.SystemPrompt != "" {
		args = append(args, "--append-system-prompt", inv.SystemPrompt)
	}
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	if inv.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(inv.MaxTurns))
	}
	// A session whose transcript is gone (session "fresh" wiped the home)
	// cannot be resumed: claude would exit with "No conversation found".
	if inv.ResumeSession != "" && claudeSessionExists(inv.Home, inv.ResumeSession) {
		args = append(args, "--resume", inv.ResumeSession)
	}
	inv.Args = args
	if inv.BaseURL != "" {
		// The SDK appends /v1/messages itself.
		inv.Env["ANTHROPIC_BASE_URL"] = strings.TrimSuffix(strings.TrimSuffix(inv.BaseURL, "/"), "/v1")
	}
	// Logist retries API failures itself (with backoff, recorded); claude's
	// own 10 retries would hide them and retry even a 401 for minutes.
	inv.Env["CLAUDE_CODE_MAX_RETRIES"] = "0"
	// No update checks, telemetry, error reports or other calls home: the
	// model API is the only host claude talks to.
	inv.Env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
	inv.Env["DISABLE_AUTOUPDATER"] = "1"
	inv.Env["DISABLE_TELEMETRY"] = "1"
	inv.Env["DISABLE_ERROR_REPORTING"] = "1"
	return nil
}

// claudeSessionExists tells whether claude keeps the session's transcript
// (~/.claude/projects/<project>/<id>.jsonl) in the private home.
func claudeSessionExists(home, id string) bool {
	if strings.ContainsAny(id, `/\*?[`) {
		return false
	}
	m, _ := filepath.Glob(filepath.Join(home, ".claude", "projects", "*", id+".jsonl"))
	return len(m) > 0
}

// claudeResult is the result object of --output-format json (also the
// last line of stream-json).
type claudeResult struct {
	Type             string          `json:"type"`
	Subtype          string          `json:"subtype"`
	IsError          bool            `json:"is_error"`
	Result           *string         `json:"result"`
	StructuredOutput json.RawMessage `json:"structured_output"`
	TotalCostUSD     *float64        `json:"total_cost_usd"`
	Usage            *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
	ModelUsage     map[string]claudeModelUsage `json:"modelUsage"`
	SessionID      string                      `json:"session_id"`
	NumTurns       int                         `json:"num_turns"`
	APIErrorStatus *int                        `json:"api_error_status"`
	APIErrorType   string                      `json:"api_error_type"`
	Errors         []string                    `json:"errors"`
	TerminalReason string                      `json:"terminal_reason"`
}

func claudeParse(out *RunOutput) (*Parsed, error) {
	var r *claudeResult
	for _, line := range jsonLines(out.Stdout) {
		var c claudeResult
		if json.Unmarshal(line, &c) == nil && c.Type == "result" {
			r = &c
		}
	}
	if r == nil {
		stderr := strings.TrimSpace(string(out.Stderr))
		if strings.Contains(stderr, "No conversation found") {
			return &Parsed{Err: &Error{Code: codes.AgentFailed, Msg: "claude cannot resume the session: " + lastLine(stderr)}}, nil
		}
		return nil, errors.New("no result object on stdout")
	}
	p := &Parsed{SessionID: r.SessionID, Turns: r.NumTurns, Model: claudeModel(r)}
	if u := r.Usage; u != nil {
		// Anthropic counts cached input apart; Logist's Input includes it.
		p.Tokens = &history.Tokens{Input: u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens,
			Output: u.OutputTokens, Cache: u.CacheReadInputTokens}
	}
	// claude prices only models it knows; a zero cost with tokens spent
	// (another model behind a gateway) falls back to the price table.
	if r.TotalCostUSD != nil && (*r.TotalCostUSD > 0 || p.Tokens == nil || p.Tokens.Input+p.Tokens.Output == 0) {
		p.CostUSD, p.CostReported = *r.TotalCostUSD, true
	}
	text := ""
	if r.Result != nil {
		text = *r.Result
	}
	structured := len(r.StructuredOutput) > 0 && string(r.StructuredOutput) != "null"
	if e := claudeError(r, text, structured); e != nil {
		e.Partial = []byte(text)
		p.Err = e
		return p, nil
	}
	if structured {
		p.Answer = []byte(r.StructuredOutput)
	} else {
		p.Answer = []byte(text)
	}
	return p, nil
}

// claudeModelUsage is one model's share of a run (modelUsage).
type claudeModelUsage struct {
	InputTokens  int64 `json:"inputTokens"`
	OutputTokens int64 `json:"outputTokens"`
}

// claudeModel is the model that did most of the work.
func claudeModel(r *claudeResult) string {
	return topModel(r.ModelUsage, func(u claudeModelUsage) int64 { return u.InputTokens + u.OutputTokens })
}

// claudeAPIErrorText is how claude words a failed API call in its result
// text; older versions did so with is_error false and exit status 0.
var claudeAPIErrorText = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(API Error|Invalid API key|Not logged in|OAuth token|Credit balance is too low|Request timed out|Connection error)`)
})

// claudeStatusText finds the HTTP status in "API Error: 500 ..." and
// "API Error: Request rejected (429) ...".
var claudeStatusText = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^API Error: (?:[^0-9(]*\()?([1-5][0-9][0-9])\b`) })

// claudeError classifies a failure the result reports, nil for success.
func claudeError(r *claudeResult, text string, structured bool) *Error {
	detail := strings.Join(r.Errors, "; ")
	if detail == "" {
		detail = truncateText(text, 300)
	}
	switch r.Subtype {
	case "error_max_turns":
		return &Error{Code: codes.MaxTurns, Msg: fmt.Sprintf("claude stopped at its turn limit after %d turns (command.max_turns): %s", r.NumTurns, detail)}
	case "error_max_budget_usd":
		return &Error{Code: codes.AgentBudget, Msg: "claude stopped at its spending limit (--max-budget-usd): " + detail}
	case "error_max_structured_output_retries":
		return &Error{Code: codes.AgentFailed, Msg: "claude gave up producing an answer that fits the answer schema: " + detail}
	}
	apiErr := r.APIErrorStatus != nil || r.APIErrorType != "" || r.TerminalReason == "api_error"
	if !r.IsError && !apiErr && (structured || !claudeAPIErrorText().MatchString(text)) {
		if strings.HasPrefix(r.Subtype, "error") {
			return &Error{Code: codes.AgentFailed, Msg: "claude: " + r.Subtype + ": " + detail}
		}
		return nil
	}
	status := 0
	if r.APIErrorStatus != nil {
		status = *r.APIErrorStatus
	} else if m := claudeStatusText().FindStringSubmatch(text); m != nil {
		status, _ = strconv.Atoi(m[1])
	}
	msg := "claude: " + detail
	if status != 0 {
		msg = fmt.Sprintf("claude: HTTP %d: %s", status, detail)
	}
	low := strings.ToLower(r.APIErrorType + " " + text)
	switch {
	case status == 401 || status == 403 || r.APIErrorType == "authentication_error" || r.APIErrorType == "permission_error" ||
		strings.Contains(low, "invalid api key") || strings.Contains(low, "not logged in") || strings.Contains(low, "oauth token"):
		return &Error{Code: codes.AuthFailed, Msg: msg + "; check ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN)"}
	case status == 429 || r.APIErrorType == "rate_limit_error" || strings.Contains(low, "rate limit"):
		return &Error{Code: codes.RateLimited, Transient: true, Msg: msg}
	case status >= 500 || status == 408:
		return &Error{Code: codes.APIError, Transient: true, Msg: msg}
	case status == 0 && (apiErr || strings.Contains(low, "overloaded") || strings.Contains(low, "connection") || strings.Contains(low, "timed out")):
		// No HTTP status: the connection broke or the reply was not
		// readable (claude already tried once more without streaming).
		return &Error{Code: codes.APIError, Transient: true, Msg: msg}
	case status != 0 || apiErr:
		// A request the API refused (400: prompt too long, bad model):
		// asking again the same way will not help.
		return &Error{Code: codes.APIError, Msg: msg}
	}
	return &Error{Code: codes.AgentFailed, Msg: msg}
}
