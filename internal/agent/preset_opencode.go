package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

// OpenCode (npm opencode-ai, program opencode) with `opencode run
// --format json`: one JSON event per line (step_start, text, tool_use,
// step_finish, error). docs/presets/opencode.md explains every flag,
// setting and variable.
func init() {
	registerPreset(&Preset{
		API: APIOpenAI, KeyVar: "OPENAI_API_KEY",
		Name:    "opencode",
		Program: "opencode",
		Package: "npm opencode-ai",
		// The key of the base_url provider, and those of OpenCode's own
		// providers for models named provider/model.
		EnvAllow: []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "GEMINI_API_KEY",
			"GOOGLE_GENERATIVE_AI_API_KEY", "GROQ_API_KEY", "DEEPSEEK_API_KEY", "XAI_API_KEY", "MISTRAL_API_KEY", "OPENCODE_API_KEY"},
		ModelArg:  opencodeModel,
		Build:     opencodeBuild,
		Parse:     opencodeParse,
		OwnPrices: true, // models.dev prices for its own providers
	})
}

// opencodeProvider is the provider id Logist defines for command.base_url.
const opencodeProvider = "logist"

// opencodeModel is the model OpenCode is given: with command.base_url, the
// role's model as a model of the provider Logist defines for it.
func opencodeModel(model, baseURL string) string {
	if baseURL == "" {
		return model
	}
	if id := strings.TrimPrefix(model, opencodeProvider+"/"); id != "" {
		return opencodeProvider + "/" + id
	}
	return ""
}

func opencodeBuild(inv *Invocation) error {
	cfg := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"autoupdate": false,
		"share":      "disabled",
		// No git snapshots of the workspace per step (they are for the
		// TUI's undo; Logist keeps its own record).
		"snapshot": false,
		// Edits, shell commands and fetches run without asking; whatever
		// else would ask (files outside the workspace) is rejected at once
		// by `opencode run` instead of waiting for a person.
		"permission": map[string]any{"edit": "allow", "bash": "allow", "webfetch": "allow"},
	}
	if inv.SystemPrompt != "" {
		// Instructions are appended to OpenCode's own system prompt (an
		// agent prompt would replace it, and with it its rules for its
		// tools).
		f := filepath.Join(inv.CallDir, "system-prompt.md")
		if err := inv.writeFile(f, []byte(inv.SystemPrompt+"\n")); err != nil {
			return err
		}
		cfg["instructions"] = []string{f}
	}
	if inv.MaxTurns > 0 {
		cfg["agent"] = map[string]any{"build": map[string]any{"steps": inv.MaxTurns}}
	}
	model := opencodeModel(inv.Model, inv.BaseURL)
	if inv.BaseURL != "" {
		id := strings.TrimPrefix(inv.Model, opencodeProvider+"/")
		if id == "" {
			return errors.New("command.base_url needs the agent's model (the model name the server knows)")
		}
		cfg["provider"] = map[string]any{opencodeProvider: map[string]any{
			"npm":  "@ai-sdk/openai-compatible",
			"name": "Logist base_url",
			"options": map[string]any{
				// The SDK appends /chat/completions.
				"baseURL": strings.TrimSuffix(inv.BaseURL, "/"),
				"apiKey":  "{env:OPENAI_API_KEY}",
			},
			"models": map[string]any{id: map[string]any{"name": id}},
		}}
	}
	if model != "" {
		cfg["model"] = model
	}
	content, err := json.Marshal(cfg)
	if err != nil {
		return err
	}

	args := []string{"run", "--format", "json"}
	if model != "" {
		args = append(args, "--model", model)
	}
	// A session that is gone (session "fresh" wiped the home) cannot be
	// continued: opencode would exit with "Session not found".
	if inv.ResumeSession != "" && opencodeSessionExists(inv.Home, inv.ResumeSession) {
		args = append(args, "--session", inv.ResumeSession)
	} else {
		// A title of our own spares the model call that would make one.
		args = append(args, "--title", "logist")
	}
	prompt := inv.Prompt
	if len(prompt) > maxPromptArg {
		f := filepath.Join(inv.CallDir, "prompt.md")
		if err := inv.writeFile(f, []byte(prompt)); err != nil {
			return err
		}
		// An attached file's text goes into the message itself (a file
		// outside the workspace could not be read by the model's tools).
		args = append(args, "--file", f)
		prompt = "Your full instructions are in the attached file " + f + ". Follow them."
	}
	inv.Args = args
	// "--" ends the options: a prompt starting with "-" stays a message;
	// it comes after command.args, which are options. opencode run wraps
	// every message argument that contains a space in quotes and escapes
	// the quotes inside it (the JSON in Logist's prompt would reach the
	// model as {\"action\": ...}); it joins the arguments with spaces,
	// so the prompt goes in cut at its spaces and arrives as it was.
	inv.TailArgs = append([]string{"--"}, strings.Split(prompt, " ")...)

	// The configuration goes in through the variable that outranks every
	// file (global and the workspace's own opencode.json).
	inv.Env["OPENCODE_CONFIG_CONTENT"] = string(content)
	// No update checks, no models.dev refresh (the built-in list is
	// used), no language servers downloaded in the middle of a job.
	inv.Env["OPENCODE_DISABLE_AUTOUPDATE"] = "1"
	inv.Env["OPENCODE_DISABLE_MODELS_FETCH"] = "1"
	inv.Env["OPENCODE_DISABLE_LSP_DOWNLOAD"] = "1"
	inv.Env["OPENCODE_DISABLE_SHARE"] = "1"
	return nil
}

// opencodeSessionExists tells whether OpenCode's database in the private
// home holds the session (its id is stored as text in the SQLite file or
// its write-ahead log).
func opencodeSessionExists(home, id string) bool {
	if id == "" || strings.ContainsAny(id, "\x00\n") {
		return false
	}
	db := filepath.Join(home, ".local", "share", "opencode", "opencode.db")
	for _, f := range []string{db, db + "-wal"} {
		fh, err := openInHome(home, f)
		if err != nil {
			continue
		}
		found, _ := holds(fh, []byte(id))
		_ = fh.Close() // read-only
		if found {
			return true
		}
	}
	return false
}

// opencodeEvent is one line of `opencode run --format json`.
type opencodeEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      *struct {
		Type   string  `json:"type"`
		Text   string  `json:"text"`
		Reason string  `json:"reason"`
		Cost   float64 `json:"cost"`
		Tokens *struct {
			Input     int64 `json:"input"`
			Output    int64 `json:"output"`
			Reasoning int64 `json:"reasoning"`
			Cache     struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
	} `json:"part"`
	Error *opencodeError `json:"error"`
}

// opencodeError is OpenCode's error object: a name (APIError,
// ProviderAuthError, UnknownError, ...) and data.
type opencodeError struct {
	Name string `json:"name"`
	Data struct {
		Message         string            `json:"message"`
		StatusCode      int               `json:"statusCode"`
		IsRetryable     bool              `json:"isRetryable"`
		ResponseHeaders map[string]string `json:"responseHeaders"`
		ResponseBody    string            `json:"responseBody"`
	} `json:"data"`
}

func opencodeParse(out *RunOutput) (*Parsed, error) {
	p := &Parsed{}
	var tokens history.Tokens
	var cost float64
	var sawTokens, sawEvent bool
	var text []string // the texts of the last step: the answer
	var fail *opencodeError
	for _, line := range jsonLines(out.Stdout) {
		var ev opencodeEvent
		if json.Unmarshal(line, &ev) != nil || ev.Type == "" {
			continue
		}
		sawEvent = true
		if ev.SessionID != "" {
			p.SessionID = ev.SessionID
		}
		switch ev.Type {
		case "step_start":
			p.Turns++
			text = nil
		case "text":
			if ev.Part != nil && ev.Part.Text != "" {
				text = append(text, ev.Part.Text)
			}
		case "step_finish":
			if ev.Part == nil {
				continue
			}
			cost += ev.Part.Cost
			if t := ev.Part.Tokens; t != nil {
				sawTokens = true
				// OpenCode counts cached input apart; Logist's Input
				// includes it, and reasoning is billed as output.
				tokens.Input += t.Input + t.Cache.Read + t.Cache.Write
				tokens.Output += t.Output + t.Reasoning
				tokens.Cache += t.Cache.Read
			}
		case "error":
			if ev.Error != nil {
				fail = ev.Error
			}
		}
	}
	if sawTokens {
		p.Tokens = &tokens
	}
	// OpenCode prices only models it has metadata for: a zero cost with
	// tokens spent (a base_url model) falls back to the price table.
	if cost > 0 || (p.Tokens != nil && p.Tokens.Input+p.Tokens.Output == 0) {
		p.CostUSD, p.CostReported = cost, true
	}
	if inv := out.Inv; inv != nil {
		p.Model = inv.Model
	}
	answer := strings.Join(text, "\n")
	if fail != nil {
		e := opencodeClassify(fail)
		e.Partial = []byte(answer)
		p.Err = e
		return p, nil
	}
	if !sawEvent {
		if e := opencodeFatal(out); e != nil {
			p.Err = e
			return p, nil
		}
		return nil, errors.New("no JSON events on stdout")
	}
	// OpenCode's step limit is soft: at the last step the model is told to
	// stop and summarise, and a model that calls tools anyway gets more
	// steps. More steps than allowed, or a last step without a JSON
	// answer, is a run that hit the limit.
	if inv := out.Inv; inv != nil && inv.MaxTurns > 0 &&
		(p.Turns > inv.MaxTurns || (p.Turns == inv.MaxTurns && !strings.Contains(answer, "{"))) {
		p.Err = &Error{Code: codes.MaxTurns, Partial: []byte(answer),
			Msg: fmt.Sprintf("opencode reached its step limit (command.max_turns %d → agent.build.steps) after %d steps", inv.MaxTurns, p.Turns)}
		return p, nil
	}
	p.Answer = []byte(answer)
	return p, nil
}

// opencodeFatal reads a failure that ended the program before its first
// event (the message is on stderr).
func opencodeFatal(out *RunOutput) *Error {
	stderr := strings.TrimSpace(opencodeStripANSI(string(out.Stderr)))
	if stderr == "" {
		return nil
	}
	msg := "opencode: " + truncateText(lastLine(stderr), 500)
	low := strings.ToLower(stderr)
	switch {
	case strings.Contains(low, "session not found"):
		return &Error{Code: codes.AgentFailed, Msg: msg + " (the session to continue is gone; set command.session \"fresh\" or resume the job)"}
	case strings.Contains(low, "configinvaliderror") || strings.Contains(low, "invalid config") || strings.Contains(low, "providermodelnotfound") ||
		strings.Contains(low, "model not found"):
		return &Error{Code: codes.AgentConfig, Msg: msg}
	}
	return nil
}

// opencodeClassify turns OpenCode's error event into a Logist error.
func opencodeClassify(e *opencodeError) *Error {
	d := e.Data
	detail := d.Message
	if detail == "" {
		detail = e.Name
	}
	msg := "opencode: " + e.Name + ": " + truncateText(detail, 500)
	if d.StatusCode != 0 {
		msg = fmt.Sprintf("opencode: HTTP %d: %s", d.StatusCode, truncateText(detail, 500))
	}
	low := strings.ToLower(detail + " " + d.ResponseBody)
	status := d.StatusCode
	switch {
	case e.Name == "ProviderAuthError" || status == 401 || status == 403 ||
		strings.Contains(low, "invalid api key") || strings.Contains(low, "incorrect api key") || strings.Contains(low, "api key is missing"):
		return &Error{Code: codes.AuthFailed, Msg: msg + "; check the provider's API key (OPENAI_API_KEY for command.base_url)"}
	case status == 429 || strings.Contains(low, "rate limit") || strings.Contains(low, "too many requests"):
		// OpenCode has already retried 5 times, honouring Retry-After.
		return &Error{Code: codes.RateLimited, Transient: true, Msg: msg, RetryAfter: opencodeRetryAfter(d.ResponseHeaders)}
	case status >= 500 || status == 408 || strings.Contains(low, "overloaded"):
		return &Error{Code: codes.APIError, Transient: true, Msg: msg, RetryAfter: opencodeRetryAfter(d.ResponseHeaders)}
	case e.Name == "MessageOutputLengthError":
		return &Error{Code: codes.MaxTokens, Msg: "opencode: the answer was cut at the model's output limit"}
	case strings.Contains(low, "json parsing failed") || strings.Contains(low, "json parse error") || strings.Contains(low, "type validation failed"):
		// A reply that is not JSON: OpenCode does not retry it.
		return &Error{Code: codes.APIMalformed, Transient: true, Msg: msg}
	case strings.Contains(low, "terminated") || strings.Contains(low, "socket connection was closed") || strings.Contains(low, "socket hang up") ||
		strings.Contains(low, "econnreset") || strings.Contains(low, "premature close"):
		// The stream broke off (OpenCode retried it already): whatever
		// came before is not an answer.
		return &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: msg}
	case strings.Contains(low, "fetch failed") || strings.Contains(low, "unable to connect") || strings.Contains(low, "econnrefused") ||
		strings.Contains(low, "etimedout") || strings.Contains(low, "timed out") || strings.Contains(low, "enotfound") || strings.Contains(low, "eai_again"):
		return &Error{Code: codes.APIError, Transient: true, Msg: msg}
	case e.Name == "APIError" || status != 0:
		// A request the API refused (400: bad model, prompt too long):
		// asking again the same way will not help.
		return &Error{Code: codes.APIError, Msg: msg}
	}
	return &Error{Code: codes.AgentFailed, Msg: msg}
}

// opencodeRetryAfter is the delay the API asked for (retry-after-ms or
// Retry-After), 0 if none.
func opencodeRetryAfter(h map[string]string) time.Duration {
	if v := h["retry-after-ms"]; v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return min(manifest.Duration(ms, time.Millisecond), MaxRetryAfter)
		}
	}
	return retryAfter(h["retry-after"], time.Now())
}

// opencodeStripANSI drops terminal colour sequences (OpenCode colours its fatal
// messages even with NO_COLOR).
func opencodeStripANSI(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
