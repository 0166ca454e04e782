package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// Codex CLI (npm @openai/codex, tested with 0.169.0): `codex exec --json`
// prints JSONL events; see docs/presets/codex.md.
func init() {
	registerPreset(&Preset{
		API: APIOpenAI, KeyVar: "OPENAI_API_KEY",
		Name:     "codex",
		Program:  "codex",
		Package:  "npm @openai/codex",
		EnvAllow: []string{"OPENAI_API_KEY"},
		Build:    buildCodex,
		Parse:    parseCodex,
	})
}

// codexProvider is the model provider Logist defines in config.toml.
const codexProvider = "logist"

// codexUsageBefore is the file (in the call's scratch folder) holding the
// resumed session's token totals before the call: Codex reports a
// session's running total, not the call's own tokens.
const codexUsageBefore = "codex-usage-before.json"

func buildCodex(inv *Invocation) error {
	codexHome := filepath.Join(inv.Home, ".codex")
	if err := inv.mkdir(codexHome); err != nil {
		return err
	}
	if err := inv.WriteConfig(filepath.Join(codexHome, "config.toml"), []byte(codexConfig(inv))); err != nil {
		return err
	}
	inv.Env["CODEX_HOME"] = codexHome
	// The sandbox mode is in config.toml (not -s) so that command.args can
	// override it with -c sandbox_mode=... where the host cannot build
	// Codex's bubblewrap sandbox.
	inv.Args = []string{"exec", "--json", "--skip-git-repo-check", "-C", inv.Workspace}
	if inv.Model != "" {
		inv.Args = append(inv.Args, "-m", inv.Model)
	}
	if inv.SchemaFile != "" {
		inv.Args = append(inv.Args, "--output-schema", inv.SchemaFile)
	}
	if inv.ResumeSession != "" {
		// A session Codex no longer has (a fresh home) starts cold: resume
		// would fail with "no rollout found".
		if rollout := codexRollout(codexHome, inv.ResumeSession); rollout != "" {
			inv.Args = append(inv.Args, "resume", inv.ResumeSession)
			if u, ok := codexRolloutTotals(codexHome, rollout); ok {
				b, _ := json.Marshal(codexUsageFile{Session: inv.ResumeSession, Usage: u})
				if err := inv.writeFile(filepath.Join(inv.CallDir, codexUsageBefore), b); err != nil {
					return err
				}
			}
		}
	}
	// Linux limits one argument to 128 KiB: a longer prompt goes through a
	// file Codex reads with its shell tool (its sandbox reads anywhere).
	prompt, _, err := longPrompt(inv, "Read all of it first, then follow it.")
	if err != nil {
		return err
	}
	// No "--" before the prompt, so command.args appended after it still
	// parse as options; a prompt that looks like an option gets a leading
	// newline instead.
	if strings.HasPrefix(prompt, "-") {
		prompt = "\n" + prompt
	}
	inv.Args = append(inv.Args, prompt)
	return nil
}

// codexConfig is config.toml for one call: Logist's model provider
// (inv.BaseURL, the key from OPENAI_API_KEY, no retries of Codex's own so
// Logist's retry policy governs), no approvals (nobody is there to
// approve), writes in the workspace only (Codex's sandbox, or Logist's
// when contained), the role's system prompt as
// developer instructions, and no update checks, analytics, feedback
// uploads or plugin syncs.
func codexConfig(inv *Invocation) string {
	base := strings.TrimRight(inv.BaseURL, "/")
	if base == "" {
		base = "https://api.openai.com/v1"
	}
	var b strings.Builder
	b.WriteString("# Written by Logist for each call; edits are overwritten.\n")
	fmt.Fprintf(&b, "model_provider = %s\n", tomlString(codexProvider))
	b.WriteString("approval_policy = \"never\"\n")
	// Codex's own sandbox (bubblewrap in a user namespace) cannot be
	// built inside Logist's, which forbids new user namespaces: contained,
	// Codex defers to Logist's sandbox (docs/security.md).
	mode := "workspace-write"
	if inv.Contained {
		mode = "danger-full-access"
	}
	fmt.Fprintf(&b, "sandbox_mode = %s\n", tomlString(mode))
	b.WriteString("check_for_update_on_startup = false\n")
	if inv.SystemPrompt != "" {
		fmt.Fprintf(&b, "developer_instructions = %s\n", tomlString(inv.SystemPrompt))
	}
	b.WriteString("\n[features]\n")
	// Connection failures fail the call (Logist retries it) instead of
	// "Reconnecting... waiting for network" forever.
	b.WriteString("unbounded_connection_retries = false\n")
	// Plugin marketplace syncs run git ls-remote against GitHub.
	b.WriteString("plugins = false\nremote_plugin = false\n")
	b.WriteString("\n[analytics]\nenabled = false\n")
	b.WriteString("\n[feedback]\nenabled = false\n")
	fmt.Fprintf(&b, "\n[model_providers.%s]\n", codexProvider)
	b.WriteString("name = \"Logist\"\n")
	fmt.Fprintf(&b, "base_url = %s\n", tomlString(base))
	b.WriteString("env_key = \"OPENAI_API_KEY\"\n")
	b.WriteString("wire_api = \"responses\"\n")
	b.WriteString("request_max_retries = 0\n")
	b.WriteString("stream_max_retries = 0\n")
	return b.String()
}

// tomlString quotes s as a TOML basic string: JSON's string escapes are
// a subset of TOML's.
func tomlString(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes; a bytes.Buffer never fails
	return strings.TrimSuffix(buf.String(), "\n")
}

// codexRollout finds the session file Codex keeps for a thread id.
func codexRollout(codexHome, id string) string {
	if id == "" || strings.ContainsAny(id, `*?[\/`) {
		return ""
	}
	m, _ := filepath.Glob(filepath.Join(codexHome, "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl"))
	if len(m) == 0 {
		return ""
	}
	return m[len(m)-1]
}

// codexUsage is Codex's token usage record.
type codexUsage struct {
	Input  int64 `json:"input_tokens"`
	Cached int64 `json:"cached_input_tokens"`
	Output int64 `json:"output_tokens"`
}

type codexUsageFile struct {
	Session string     `json:"session"`
	Usage   codexUsage `json:"usage"`
}

// codexRolloutTotals is the last running token total in a session file
// (event_msg token_count info.total_token_usage).
func codexRolloutTotals(codexHome, path string) (codexUsage, bool) {
	f, err := openInHome(codexHome, path)
	if err != nil {
		return codexUsage{}, false
	}
	defer f.Close() //nolint:errcheck // read-only
	var last codexUsage
	found := false
	err = eachLine(f, maxHomeLine, func(line []byte) {
		if !bytes.Contains(line, []byte(`"token_count"`)) {
			return
		}
		var ev struct {
			Type    string `json:"type"`
			Payload struct {
				Type string `json:"type"`
				Info *struct {
					Total *codexUsage `json:"total_token_usage"`
				} `json:"info"`
			} `json:"payload"`
		}
		if json.Unmarshal(line, &ev) == nil && ev.Payload.Type == "token_count" && ev.Payload.Info != nil && ev.Payload.Info.Total != nil {
			last, found = *ev.Payload.Info.Total, true
		}
	})
	if err != nil {
		return codexUsage{}, false
	}
	return last, found
}

type codexEvent struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Message  string `json:"message"`
	Item     *struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Message string `json:"message"`
	} `json:"item"`
	Usage *codexUsage `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// parseCodex reads `codex exec --json` output: thread.started (the
// session id), item.completed (agent_message: the answer; tool items:
// turns), turn.completed (the session's running token total),
// turn.failed and error events (classified).
func parseCodex(out *RunOutput) (*Parsed, error) {
	lines := jsonLines(out.Stdout)
	if len(lines) == 0 {
		if e := codexStartError(string(out.Stderr)); e != nil {
			return &Parsed{Err: e}, nil
		}
		return nil, errors.New("no JSON events on stdout")
	}
	p := &Parsed{}
	var usage *codexUsage
	var failed, lastErr string
	completed := false
	for _, l := range lines {
		var ev codexEvent
		if json.Unmarshal(l, &ev) != nil {
			continue
		}
		switch ev.Type {
		case "thread.started":
			p.SessionID = ev.ThreadID
		case "item.completed":
			if ev.Item == nil {
				continue
			}
			switch ev.Item.Type {
			case "agent_message":
				p.Answer = []byte(ev.Item.Text)
				p.Turns++
			case "error", "reasoning", "todo_list":
				// Warnings (e.g. unknown model metadata) and thinking.
			default:
				p.Turns++ // a tool call: file_change, command_execution, ...
			}
		case "turn.completed":
			completed = true
			usage = ev.Usage
		case "turn.failed":
			failed = "turn failed"
			if ev.Error != nil && ev.Error.Message != "" {
				failed = ev.Error.Message
			}
		case "error":
			// "Reconnecting... n/m" is a retry in progress, not a failure.
			if !strings.HasPrefix(ev.Message, "Reconnecting") {
				lastErr = ev.Message
			}
		}
	}
	if usage != nil {
		u := *usage
		if before, ok := codexBefore(out, p.SessionID); ok {
			u.Input = max(u.Input-before.Input, 0)
			u.Cached = max(u.Cached-before.Cached, 0)
			u.Output = max(u.Output-before.Output, 0)
		}
		p.Tokens = &history.Tokens{Input: u.Input, Output: u.Output, Cache: u.Cached}
	}
	switch {
	case failed != "":
		p.Err = classifyCodex(failed)
	case !completed && lastErr != "":
		p.Err = classifyCodex(lastErr)
	case !completed:
		p.Err = &Error{Code: codes.AgentFailed, Transient: out.ExitCode != 0, Msg: "codex ended without turn.completed"}
	}
	return p, nil
}

// codexBefore is the resumed session's token total before this call.
func codexBefore(out *RunOutput, session string) (codexUsage, bool) {
	if out.Inv == nil || out.Inv.CallDir == "" || session == "" {
		return codexUsage{}, false
	}
	// The call's scratch folder is the agent's too (its TMPDIR): read as
	// its home is (home.go).
	b, err := readInHome(out.Inv.CallDir, filepath.Join(out.Inv.CallDir, codexUsageBefore), maxHomeRecord)
	if err != nil {
		return codexUsage{}, false
	}
	var f codexUsageFile
	if json.Unmarshal(b, &f) != nil || f.Session != session {
		return codexUsage{}, false
	}
	return f.Usage, true
}

// codexStartError classifies a run that printed no events: a config file
// or command line Codex rejected (not worth retrying).
func codexStartError(stderr string) *Error {
	switch {
	case strings.Contains(stderr, "Error loading config"):
		return &Error{Code: codes.AgentConfig, Msg: "codex rejected its config: " + strings.TrimSpace(stderr)}
	case strings.Contains(stderr, "Usage: codex"):
		msg := lastLine(stderr)
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, "error:") {
				msg = l
				break
			}
		}
		return &Error{Code: codes.AgentConfig, Msg: "codex rejected its command line (check command.args): " + msg}
	case strings.Contains(stderr, "no rollout found"):
		return &Error{Code: codes.AgentFailed, Msg: "codex could not resume the session: " + lastLine(stderr)}
	}
	return nil
}

var (
	codexStatus     = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\b([1-5][0-9][0-9]) [A-Z][A-Za-z ]+`) })
	codexRetryAfter = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?i)try again in ([0-9]+(?:\.[0-9]+)?)\s*(ms|s|sec|seconds?)\b`)
	})
)

// classifyCodex turns the message of a failed turn into an Error. Codex
// reports HTTP failures as text: "unexpected status 401 Unauthorized: ...",
// "exceeded retry limit, last status: 429 Too Many Requests", its own
// wording for a 500 ("We're currently experiencing high demand") and
// "stream disconnected before completion: ..." for a broken stream.
func classifyCodex(msg string) *Error {
	low := strings.ToLower(msg)
	status := 0
	if m := codexStatus().FindStringSubmatch(msg); m != nil {
		status, _ = strconv.Atoi(m[1])
	}
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(low, s) {
				return true
			}
		}
		return false
	}
	switch {
	case status == 401 || status == 403 || has("unauthorized", "invalid_api_key", "incorrect api key", "missing environment variable", "authentication"):
		return &Error{Code: codes.AuthFailed, Msg: "codex: " + msg}
	case has("quota exceeded", "insufficient_quota", "usage limit"):
		// Billing, not a burst: a human has to act.
		return &Error{Code: codes.APIError, Msg: "codex: quota exhausted: " + msg}
	case status == 429 || has("too many requests", "rate limit"):
		e := &Error{Code: codes.RateLimited, Transient: true, Msg: "codex: " + msg}
		if m := codexRetryAfter().FindStringSubmatch(msg); m != nil {
			v, _ := strconv.ParseFloat(m[1], 64)
			unit := time.Second
			if strings.ToLower(m[2]) == "ms" {
				unit = time.Millisecond
			}
			e.RetryAfter = manifest.Duration(v, unit)
		}
		return e
	case has("context window", "context_length_exceeded"):
		return &Error{Code: codes.AgentFailed, Msg: "codex: " + msg}
	case has("stream disconnected", "stream closed before"):
		// Nothing of a broken stream is an answer: the same turn is asked
		// again.
		return &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: "codex: " + msg}
	case status >= 500 || has("high demand", "internal server error", "bad gateway", "service unavailable",
		"gateway timeout", "overloaded", "connection failed", "error sending request", "timed out", "timeout"):
		return &Error{Code: codes.APIError, Transient: true, Msg: "codex: " + msg}
	}
	return &Error{Code: codes.AgentFailed, Msg: "codex: " + msg}
}
