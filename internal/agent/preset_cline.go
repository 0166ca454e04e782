package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
)

// Cline CLI (npm cline, program cline; a native executable) with --json:
// one JSON event per line ending in a run_result object.
// docs/presets/cline.md explains every flag, file and variable, and what
// Cline cannot do non-interactively (continue a session, limit turns).
func init() {
	registerPreset(&Preset{
		API: APIOpenAI, KeyVar: "OPENAI_API_KEY",
		Name:      "cline",
		Program:   "cline",
		Package:   "npm cline",
		EnvAllow:  []string{"OPENAI_API_KEY"},
		Build:     clineBuild,
		Parse:     clineParse,
		OwnPrices: true,
	})
}

// clineProvider is Cline's provider id for an OpenAI-compatible server.
const clineProvider = "openai-compatible"

func clineBuild(inv *Invocation) error {
	if inv.MaxTurns > 0 {
		// Cline 3.0.65 has no turn limit a non-interactive run can set.
		return errors.New("command.max_turns: the cline CLI has no turn limit (use limits.call_timeout_seconds)")
	}
	settings := filepath.Join(inv.Home, ".cline", "data", "settings")
	if err := inv.mkdir(settings); err != nil {
		return err
	}
	// No telemetry, no self-update.
	if err := clineWriteJSON(inv, filepath.Join(settings, "global-settings.json"),
		map[string]any{"telemetryOptOut": true, "autoUpdateEnabled": false}); err != nil {
		return err
	}
	args := []string{"--json"}
	if inv.BaseURL != "" {
		if inv.Model == "" {
			return errors.New("command.base_url needs the agent's model (the model name the server knows)")
		}
		// What `cline auth -p openai -b URL -m MODEL` writes, without the
		// key: Cline reads OPENAI_API_KEY from the environment (a key in
		// this file would stay in the job folder). Cline resets a file it
		// cannot read (no updatedAt) to its own provider.
		prov := map[string]any{"version": 1, "lastUsedProvider": clineProvider, "modes": map[string]any{},
			"providers": map[string]any{clineProvider: map[string]any{
				"settings":    map[string]any{"provider": clineProvider, "model": inv.Model, "baseUrl": strings.TrimSuffix(inv.BaseURL, "/")},
				"updatedAt":   time.Now().UTC().Format("2006-01-02T15:04:05.000Z"),
				"tokenSource": "manual",
			}}}
		if err := clineWriteJSON(inv, filepath.Join(settings, "providers.json"), prov); err != nil {
			return err
		}
		args = append(args, "--provider", clineProvider)
	}
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	// The role's system prompt is a global rule: Cline appends rules to
	// its own system prompt (--system would replace it, and with it the
	// rules for its tools). Rewritten on every call.
	rules := filepath.Join(inv.Home, "Documents", "Cline", "Rules")
	rule := filepath.Join(rules, "logist.md")
	if inv.SystemPrompt != "" {
		if err := inv.writeFile(rule, []byte(inv.SystemPrompt+"\n")); err != nil {
			return err
		}
	} else if err := inv.remove(rule); err != nil {
		return err
	}
	inv.Args = args

	prompt, _, err := longPrompt(inv, "Read all of it with the read_files tool first (it is long: read it in parts until its end), then follow it.")
	if err != nil {
		return err
	}
	// After command.args and "--": one positional prompt (Cline refuses
	// more than one), which may start with "-".
	inv.TailArgs = []string{"--", prompt}

	// The local session backend: by default Cline starts a hub daemon in
	// its own session (setsid), which outlives the call and its process
	// group.
	inv.Env["CLINE_SESSION_BACKEND_MODE"] = "local"
	inv.Env["CLINE_NO_AUTO_UPDATE"] = "1"
	return nil
}

func clineWriteJSON(inv *Invocation, path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return inv.WriteConfig(path, append(b, '\n'))
}

// clineUsage is Cline's token count (inputTokens includes cached input
// for OpenAI-compatible servers).
type clineUsage struct {
	InputTokens      int64   `json:"inputTokens"`
	OutputTokens     int64   `json:"outputTokens"`
	CacheReadTokens  int64   `json:"cacheReadTokens"`
	CacheWriteTokens int64   `json:"cacheWriteTokens"`
	TotalCost        float64 `json:"totalCost"`
}

// clineLine is one line of --json output.
type clineLine struct {
	TS           string      `json:"ts"`
	Type         string      `json:"type"`
	Message      string      `json:"message"`
	FinishReason string      `json:"finishReason"`
	Iterations   int         `json:"iterations"`
	Usage        *clineUsage `json:"usage"`
	Text         string      `json:"text"`
	Model        *struct {
		ID string `json:"id"`
	} `json:"model"`
	Event *struct {
		Type  string `json:"type"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	} `json:"event"`
}

func clineParse(out *RunOutput) (*Parsed, error) {
	var res *clineLine
	var start time.Time
	errMsg := ""
	// The final error line goes to stderr.
	lines := append(jsonLines(out.Stdout), jsonLines(out.Stderr)...)
	for _, raw := range lines {
		var l clineLine
		if json.Unmarshal(raw, &l) != nil {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, l.TS); err == nil && (start.IsZero() || t.Before(start)) {
			start = t
		}
		switch {
		case l.Type == "run_result":
			res = &l
		case l.Type == "agent_event" && l.Event != nil && l.Event.Type == "error" && l.Event.Error != nil:
			errMsg = l.Event.Error.Message
		case l.Type == "error" && l.Message != "" && errMsg == "":
			errMsg = l.Message
		}
	}
	p := &Parsed{}
	var home string
	if out.Inv != nil {
		home = out.Inv.Home
		p.SessionID = clineSession(home, start)
	}
	if res == nil {
		if errMsg != "" {
			p.Err = clineClassify(errMsg, clineLogError(home, start))
			return p, nil
		}
		return nil, errors.New("no run_result on stdout")
	}
	p.Turns = res.Iterations
	if res.Model != nil {
		p.Model = res.Model.ID
	}
	if u := res.Usage; u != nil {
		p.Tokens = &history.Tokens{Input: u.InputTokens + u.CacheWriteTokens, Output: u.OutputTokens, Cache: u.CacheReadTokens}
		// Cline prices only models it has metadata for: 0 with tokens
		// spent (a base_url model) falls back to the price table.
		if u.TotalCost > 0 || u.InputTokens+u.OutputTokens == 0 {
			p.CostUSD, p.CostReported = u.TotalCost, true
		}
	}
	switch res.FinishReason {
	case "completed":
		p.Answer = []byte(res.Text)
		return p, nil
	case "max_iterations":
		p.Err = &Error{Code: codes.MaxTurns, Msg: fmt.Sprintf("cline stopped at its iteration limit after %d iterations", res.Iterations)}
	case "mistake_limit":
		p.Err = &Error{Code: codes.AgentFailed, Msg: "cline gave up after too many consecutive mistakes (--retries): " + truncateText(res.Text, 300)}
	case "aborted":
		p.Err = &Error{Code: codes.AgentFailed, Transient: true, Msg: "cline aborted the run: " + truncateText(res.Text, 300)}
	default:
		msg := errMsg
		if msg == "" {
			msg = res.Text
		}
		if msg == "" {
			msg = "finish reason " + res.FinishReason
		}
		p.Err = clineClassify(msg, clineLogError(home, start))
	}
	p.Err.Partial = []byte(res.Text)
	return p, nil
}

// clineSession is the id of the session this run made: the newest of
// the home's sessions (~/.cline/data/sessions/<id>/<id>.json) that started
// at or after the run's first event (a role's calls run one at a time).
func clineSession(home string, since time.Time) string {
	files, _ := filepath.Glob(filepath.Join(home, ".cline", "data", "sessions", "*", "*.json"))
	best, bestAt := "", time.Time{}
	for _, f := range files {
		if strings.HasSuffix(f, ".messages.json") {
			continue
		}
		b, err := readInHome(home, f, maxHomeRecord)
		if err != nil {
			continue
		}
		var s struct {
			SessionID string `json:"session_id"`
			StartedAt string `json:"started_at"`
		}
		if json.Unmarshal(b, &s) != nil || s.SessionID == "" {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, s.StartedAt)
		// The session is created a moment before the first event.
		if err != nil || (!since.IsZero() && at.Before(since.Add(-time.Minute))) {
			continue
		}
		if best == "" || at.After(bestAt) {
			best, bestAt = s.SessionID, at
		}
	}
	return best
}

// clineAPIError is what Cline's log (~/.cline/data/logs/cline.log) says
// about the last failed model request: its --json output has only the
// message.
type clineAPIError struct {
	Status     int
	RetryAfter time.Duration
}

// clineCallError is the AI SDK's APICallError as Cline logs it.
type clineCallError struct {
	StatusCode      int               `json:"statusCode"`
	ResponseHeaders map[string]string `json:"responseHeaders"`
}

// clineLogTail bounds how much of the log is read (each error entry
// carries the whole request).
const clineLogTail = 8 << 20

// clineLogError finds the last "[ai-sdk] stream error" of the run in the
// log, nil if none.
func clineLogError(home string, since time.Time) *clineAPIError {
	if home == "" {
		return nil
	}
	f, err := openInHome(home, filepath.Join(home, ".cline", "data", "logs", "cline.log"))
	if err != nil {
		return nil
	}
	defer f.Close() //nolint:errcheck // read-only
	if st, err := f.Stat(); err == nil && st.Size() > clineLogTail {
		if _, err := f.Seek(st.Size()-clineLogTail, io.SeekStart); err != nil {
			return nil
		}
	}
	var found *clineAPIError
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), clineLogTail)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(`"statusCode"`)) {
			continue
		}
		var e struct {
			Time string `json:"time"`
			Err  *struct {
				clineCallError
				// After Cline's own retries: AI_RetryError.
				LastError *clineCallError `json:"lastError"`
			} `json:"err"`
		}
		if json.Unmarshal(line, &e) != nil || e.Err == nil {
			continue
		}
		ce := e.Err.clineCallError
		if ce.StatusCode == 0 && e.Err.LastError != nil {
			ce = *e.Err.LastError
		}
		if ce.StatusCode == 0 {
			continue
		}
		if t, err := time.Parse(time.RFC3339Nano, e.Time); err != nil || (!since.IsZero() && t.Before(since.Add(-time.Second))) {
			continue
		}
		found = &clineAPIError{Status: ce.StatusCode, RetryAfter: opencodeRetryAfter(ce.ResponseHeaders)}
	}
	return found
}

// clineClassify turns Cline's error message (and the status its log
// gives) into a Logist error.
func clineClassify(msg string, api *clineAPIError) *Error {
	status := 0
	var after time.Duration
	if api != nil {
		status, after = api.Status, api.RetryAfter
	}
	text := "cline: " + truncateText(strings.TrimSpace(msg), 600)
	if status != 0 {
		text = fmt.Sprintf("cline: HTTP %d: %s", status, truncateText(strings.TrimSpace(msg), 600))
	}
	low := strings.ToLower(msg)
	switch {
	case status == 401 || status == 403 || strings.Contains(low, "incorrect api key") || strings.Contains(low, "invalid api key") ||
		strings.Contains(low, "unauthorized") || strings.Contains(low, "api key is missing"):
		return &Error{Code: codes.AuthFailed, Msg: text + "; check OPENAI_API_KEY"}
	case status == 429 || strings.Contains(low, "rate limit") || strings.Contains(low, "too many requests"):
		return &Error{Code: codes.RateLimited, Transient: true, Msg: text, RetryAfter: after}
	case status >= 500 || status == 408 || strings.Contains(low, "overloaded") || strings.Contains(low, "internal server error"):
		return &Error{Code: codes.APIError, Transient: true, Msg: text, RetryAfter: after}
	case strings.Contains(low, "json parsing failed") || strings.Contains(low, "json parse error"):
		// A reply that is not JSON: Cline does not retry it.
		return &Error{Code: codes.APIMalformed, Transient: true, Msg: text}
	case strings.Contains(low, "socket connection was closed") || strings.Contains(low, "terminated") || strings.Contains(low, "econnreset"):
		return &Error{Code: codes.StreamCut, Transient: true, Retake: true, Msg: text}
	case strings.Contains(low, "cannot connect to api") || strings.Contains(low, "unable to connect") || strings.Contains(low, "fetch failed") ||
		strings.Contains(low, "econnrefused") || strings.Contains(low, "timed out") || strings.Contains(low, "failedtoopensocket"):
		return &Error{Code: codes.APIError, Transient: true, Msg: text}
	case status != 0:
		// A request the API refused (400, 404): asking again the same way
		// will not help.
		return &Error{Code: codes.APIError, Msg: text}
	}
	return &Error{Code: codes.AgentFailed, Msg: text}
}
