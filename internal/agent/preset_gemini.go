package agent

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

// Gemini CLI (npm @google/gemini-cli, program gemini) in headless mode
// with --output-format stream-json: JSON lines on stdout ending with a
// result event that carries the token stats also when the call failed.
// docs/presets/gemini-cli.md explains every flag, setting and variable.
func init() {
	registerPreset(&Preset{
		API: APIGemini, KeyVar: "GEMINI_API_KEY",
		Name:     "gemini-cli",
		Program:  "gemini",
		Package:  "npm @google/gemini-cli",
		EnvAllow: []string{"GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL"},
		Build:    geminiBuild,
		Parse:    geminiParse,
	})
}

func geminiBuild(inv *Invocation) error {
	dir := filepath.Join(inv.Home, ".gemini")
	if err := inv.mkdir(dir); err != nil {
		return err
	}
	settings, err := json.MarshalIndent(geminiSettings(inv.MaxTurns), "", "  ")
	if err != nil {
		return err
	}
	if err := inv.writeFile(filepath.Join(dir, "settings.json"), settings); err != nil {
		return err
	}
	// The global context file is appended to the CLI's own system prompt
	// (GEMINI_SYSTEM_MD would replace it, and with it the CLI's rules for
	// its tools). It is rewritten on every call: the role's system prompt
	// is the only thing in it.
	memory := filepath.Join(dir, "GEMINI.md")
	if inv.SystemPrompt != "" {
		if err := inv.writeFile(memory, []byte(inv.SystemPrompt+"\n")); err != nil {
			return err
		}
	} else if err := inv.remove(memory); err != nil {
		return err
	}

	prompt, f, err := longPrompt(inv, "Read all of it with the read_file tool first (it is long: read it in parts until its end), then follow it.")
	if err != nil {
		return err
	}
	var include []string
	if f != "" {
		// The CLI reads files only inside its workspace directories.
		include = []string{"--include-directories", inv.CallDir}
	}
	// --prompt=TEXT keeps a prompt that starts with "-" from being read as
	// an option.
	args := []string{"--prompt=" + prompt, "--output-format", "stream-json"}
	args = append(args, include...)
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	// A session whose record is gone (session "fresh" wiped the home)
	// cannot be resumed: gemini would exit 42 "Error resuming session".
	if inv.ResumeSession != "" && geminiSessionExists(inv.Home, inv.ResumeSession) {
		args = append(args, "--resume", inv.ResumeSession)
	}
	inv.Args = args
	if inv.BaseURL != "" {
		// The SDK appends /v1beta/models/... itself.
		inv.Env["GOOGLE_GEMINI_BASE_URL"] = strings.TrimSuffix(strings.TrimSuffix(inv.BaseURL, "/"), "/v1beta")
	}
	inv.Env["GEMINI_TELEMETRY_ENABLED"] = "false"
	return nil
}

// geminiSettings is the user settings file written into the private home.
func geminiSettings(maxTurns int) map[string]any {
	general := map[string]any{
		// Logist retries API failures itself (with backoff, recorded);
		// the CLI's own 10 attempts (5 s doubling to 30 s) would hide them
		// for minutes.
		"maxAttempts":                  1,
		"enableAutoUpdate":             false,
		"enableAutoUpdateNotification": false,
		// Edits in the workspace are approved; tools that would ask
		// (shell, MCP) are left out in headless mode. --yolo (or
		// --approval-mode yolo) in command.args allows everything.
		"defaultApprovalMode": "auto_edit",
	}
	s := map[string]any{
		"general": general,
		"security": map[string]any{
			// An API key, never the browser login the CLI asks for first.
			"auth": map[string]any{"selectedType": "gemini-api-key"},
			// Folder trust is on by default in this version; an untrusted
			// workspace turns every approval mode back to "default", where
			// a headless run may not even edit files.
			"folderTrust": map[string]any{"enabled": false},
		},
		"privacy":   map[string]any{"usageStatisticsEnabled": false},
		"telemetry": map[string]any{"enabled": false},
		"ide":       map[string]any{"enabled": false, "hasSeenNudge": true},
		// .env files of the workspace and its parents are not the
		// program's configuration; only what Logist passes is.
		"advanced": map[string]any{"ignoreLocalEnv": true},
		// GEMINI.md files are read from the workspace, not from the
		// daemon's folders above it.
		"context": map[string]any{"memoryBoundaryMarkers": []string{}},
	}
	if maxTurns > 0 {
		s["model"] = map[string]any{"maxSessionTurns": maxTurns}
	}
	return s
}

// geminiSessionExists tells whether the CLI keeps the session's record
// (~/.gemini/tmp/<project>/chats/session-<time>-<id prefix>.jsonl whose
// first line names the session) in the private home.
func geminiSessionExists(home, id string) bool {
	if len(id) < 8 || strings.ContainsAny(id, `/\*?[`) {
		return false
	}
	files, _ := filepath.Glob(filepath.Join(home, ".gemini", "tmp", "*", "chats", "session-*-"+id[:8]+".json*"))
	for _, f := range files {
		fh, err := openInHome(home, f)
		if err != nil {
			continue
		}
		line, _ := bufio.NewReader(io.LimitReader(fh, maxHomeLine)).ReadString('\n')
		_ = fh.Close() // read-only
		var head struct {
			SessionID string `json:"sessionId"`
		}
		if json.Unmarshal([]byte(line), &head) == nil && head.SessionID == id {
			return true
		}
	}
	return false
}

// geminiEvent is one line of --output-format stream-json.
type geminiEvent struct {
	Type      string `json:"type"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	Role      string `json:"role"`
	Content   string `json:"content"`
	Delta     bool   `json:"delta"`
	Severity  string `json:"severity"`
	Message   string `json:"message"`
	Status    string `json:"status"`
	Error     *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *geminiStats `json:"stats"`
}

type geminiStats struct {
	TotalTokens  int64                       `json:"total_tokens"`
	InputTokens  int64                       `json:"input_tokens"`
	OutputTokens int64                       `json:"output_tokens"`
	Cached       int64                       `json:"cached"`
	Models       map[string]geminiModelStats `json:"models"`
}

// geminiModelStats is one model's share of a run (stats.models).
type geminiModelStats struct {
	TotalTokens int64 `json:"total_tokens"`
}

func geminiParse(out *RunOutput) (*Parsed, error) {
	p := &Parsed{}
	var result *geminiEvent
	var answer strings.Builder
	var problems []string
	inTools := false
	for _, line := range jsonLines(out.Stdout) {
		var ev geminiEvent
		if json.Unmarshal(line, &ev) != nil {
			continue
		}
		switch ev.Type {
		case "init":
			p.SessionID, p.Model = ev.SessionID, ev.Model
		case "message":
			if ev.Role != "assistant" {
				continue
			}
			// The answer is the text of the last model turn: what came
			// before a tool call was talk on the way.
			if inTools {
				answer.Reset()
				inTools = false
			}
			answer.WriteString(ev.Content)
		case "tool_use", "tool_result":
			if !inTools {
				p.Turns++
			}
			inTools = true
		case "error":
			problems = append(problems, ev.Message)
		case "result":
			r := ev
			result = &r
		}
	}
	if result == nil {
		// Fatal errors before the session starts (no key, a session that
		// cannot be resumed, bad settings) are plain text on stderr.
		if e := geminiFatal(out); e != nil {
			p.Err = e
			return p, nil
		}
		return nil, errors.New("no result event on stdout")
	}
	p.Turns++
	if st := result.Stats; st != nil {
		// total counts thinking (and tool-use prompt) tokens too, which
		// output_tokens (candidates only) leaves out; both are billed.
		output := max(st.TotalTokens-st.InputTokens, st.OutputTokens)
		p.Tokens = &history.Tokens{Input: st.InputTokens, Output: output, Cache: st.Cached}
		// The model that used the most tokens is the main one.
		if m := topModel(st.Models, func(m geminiModelStats) int64 { return m.TotalTokens }); m != "" {
			p.Model = m
		}
	}
	text := answer.String()
	if inTools {
		text = "" // the run ended on a tool call: no final text
	}
	if e := geminiError(result, problems, out.ExitCode); e != nil {
		e.Partial = []byte(text)
		p.Err = e
		return p, nil
	}
	p.Answer = []byte(text)
	return p, nil
}

// geminiError classifies a failure the run reports, nil for success. An
// API failure is a result with status "error" (exit status = the HTTP
// status mod 256); an invalid stream (empty or blocked response) and the
// turn limit reached inside the model loop come with exit status 0.
func geminiError(r *geminiEvent, problems []string, exit int) *Error {
	msg := ""
	if r.Error != nil {
		msg = r.Error.Message
	}
	all := strings.Join(append(problems, msg), "; ")
	if r.Status != "error" && r.Error == nil {
		for _, w := range problems {
			switch {
			case strings.Contains(w, "Maximum session turns exceeded"):
				return &Error{Code: codes.MaxTurns, Msg: "gemini stopped at its turn limit (command.max_turns → model.maxSessionTurns): " + all}
			case strings.Contains(w, "Loop detected"):
				return &Error{Code: codes.AgentFailed, Msg: "gemini stopped a loop of repeated model output: " + all}
			}
		}
		return nil
	}
	if all == "" {
		all = "result status " + r.Status
	}
	return geminiClassify(all, r.Error != nil && r.Error.Type == "FatalTurnLimitedError", exit)
}

// geminiFatal reads a failure that ended the program before its first
// event: the message is on stderr, the kind in the exit status.
func geminiFatal(out *RunOutput) *Error {
	stderr := strings.TrimSpace(string(out.Stderr))
	last := lastLine(stderr)
	switch out.ExitCode {
	case 41: // FatalAuthenticationError
		return &Error{Code: codes.AuthFailed, Msg: "gemini: " + geminiLines(stderr) + "; check GEMINI_API_KEY"}
	case 42: // FatalInputError, e.g. "Error resuming session"
		return &Error{Code: codes.AgentFailed, Msg: "gemini refused its input: " + geminiLines(stderr)}
	case 52: // FatalConfigError
		return &Error{Code: codes.AgentConfig, Msg: "gemini configuration: " + geminiLines(stderr)}
	case 53: // FatalTurnLimitedError
		return &Error{Code: codes.MaxTurns, Msg: "gemini stopped at its turn limit: " + last}
	}
	if out.ExitCode != 0 && strings.Contains(stderr, "GEMINI_API_KEY") {
		return &Error{Code: codes.AuthFailed, Msg: "gemini: " + geminiLines(stderr)}
	}
	return nil
}

// geminiLines is the end of stderr without the CLI's terminal warnings.
func geminiLines(stderr string) string { return stderrText(stderr, "Warning:", "[STARTUP]", "at ") }

var (
	// geminiStatusText finds the HTTP status in the API's error body the
	// CLI quotes: [API Error: {"error":{"code":401,...}}].
	geminiStatusText = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"code"\s*:\s*([1-5][0-9][0-9])\b`) })
	// geminiRetryText is the delay the API asks for (RetryInfo), as the
	// CLI words it.
	geminiRetryText = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?:Please retry in|Suggested retry after) ([0-9.]+)(ms|s)\b`)
	})
)

// geminiClassify turns an error message into a Logist error.
func geminiClassify(msg string, turnLimit bool, exit int) *Error {
	status := 0
	if m := geminiStatusText().FindStringSubmatch(msg); m != nil {
		status, _ = strconv.Atoi(m[1])
	} else if exit >= 144 && exit <= 255 {
		// The exit status is the HTTP status mod 256 (401 → 145).
		status = exit + 256
	}
	low := strings.ToLower(msg)
	text := "gemini: " + truncateText(msg, 600)
	switch {
	case turnLimit || exit == 53 || strings.Contains(low, "max session turns"):
		return &Error{Code: codes.MaxTurns, Msg: "gemini stopped at its turn limit (command.max_turns → model.maxSessionTurns): " + msg}
	case status == 401 || status == 403 || strings.Contains(low, "api key not valid") || strings.Contains(low, "unauthenticated") ||
		strings.Contains(low, "permission_denied") || strings.Contains(low, "gemini_api_key"):
		return &Error{Code: codes.AuthFailed, Msg: text + "; check GEMINI_API_KEY"}
	case status == 429 || strings.Contains(low, "resource_exhausted") || strings.Contains(low, "exceeded your current quota") || strings.Contains(low, "rate limit"):
		e := &Error{Code: codes.RateLimited, Transient: true, Msg: text, RetryAfter: geminiRetryAfter(msg)}
		if strings.Contains(low, "daily quota") || strings.Contains(low, "limit: 0") {
			// Asking again today will not help: a person decides.
			e.Transient = false
		}
		return e
	case status >= 500 || status == 408 || status == 499 || strings.Contains(low, "overloaded") || strings.Contains(low, "unavailable"):
		return &Error{Code: codes.APIError, Transient: true, Msg: text}
	case strings.Contains(low, "terminated") || strings.Contains(low, "other side closed") || strings.Contains(low, "premature close") ||
		strings.Contains(low, "socket hang up") || strings.Contains(low, "econnreset"):
		// The stream broke off: whatever came before is not an answer.
		return &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: text}
	case strings.Contains(low, "in json at position") || strings.Contains(low, "unexpected token") || strings.Contains(low, "bad control character") ||
		strings.Contains(low, "unexpected end of json") || strings.Contains(low, "incomplete json"):
		return &Error{Code: codes.APIMalformed, Transient: true, Msg: text}
	case strings.Contains(low, "fetch failed") || strings.Contains(low, "econnrefused") || strings.Contains(low, "etimedout") ||
		strings.Contains(low, "enotfound") || strings.Contains(low, "eai_again"):
		return &Error{Code: codes.APIError, Transient: true, Msg: text}
	case strings.Contains(low, "empty response"):
		// The CLI itself calls this "a transient API issue".
		return &Error{Code: codes.APIError, Transient: true, Msg: text}
	case strings.Contains(low, "truncated because it exceeded the token limit"):
		return &Error{Code: codes.MaxTokens, Msg: text}
	case status != 0:
		// A request the API refused (400: bad model, prompt too long):
		// asking again the same way will not help.
		return &Error{Code: codes.APIError, Msg: text}
	}
	return &Error{Code: codes.AgentFailed, Msg: text}
}

// geminiRetryAfter is the delay named in a quota error, 0 if none.
func geminiRetryAfter(msg string) time.Duration {
	m := geminiRetryText().FindStringSubmatch(msg)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil || v < 0 {
		return 0
	}
	if m[2] == "ms" {
		return manifest.Duration(v, time.Millisecond)
	}
	return manifest.Duration(v, time.Second)
}
