package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
)

// Aider (PyPI aider-chat, program aider) with --message: one request,
// the edits applied, then exit. Its output is plain text; the answer is
// the JSON object in the model's last reply and the cost is aider's own
// "Cost: $x message, $y session." line. UNTESTED against the real program
// (PyPI is unreachable here): built from aider's documented options and
// output format, see docs/presets/aider.md.
func init() {
	registerPreset(&Preset{
		API: APIOpenAI, KeyVar: "OPENAI_API_KEY",
		Name:    "aider",
		Program: "aider",
		Package: "PyPI aider-chat",
		EnvAllow: []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "DEEPSEEK_API_KEY",
			"OPENROUTER_API_KEY", "OPENAI_API_BASE"},
		Build:     aiderBuild,
		Parse:     aiderParse,
		OwnPrices: true, // litellm's price list
	})
}

// aiderSession is the session id aider runs report: aider has no session
// ids, its conversation is the chat history file in the private home,
// restored with --restore-chat-history when the engine asks to continue.
const aiderSession = "aider-chat-history"

func aiderBuild(inv *Invocation) error {
	args := []string{
		"--yes-always",       // nobody is there to confirm
		"--no-auto-commits",  // the workspace's git history is the job's, not aider's
		"--no-dirty-commits", // nor are uncommitted changes committed first
		"--no-gitignore",     // .gitignore is left alone
		"--no-pretty",        // plain text, no colours or panels
		"--no-stream",        // one reply per request, priced by litellm
		"--no-check-update",  // no calls home
		"--no-show-release-notes",
		"--analytics-disable",
		"--no-fancy-input",
		"--no-detect-urls",            // a URL in the task is not fetched
		"--no-suggest-shell-commands", // they would need a person's yes
		"--no-show-model-warnings",
		// Its history files stay in the private home, not the workspace.
		"--chat-history-file", filepath.Join(inv.Home, "aider.chat.history.md"),
		"--input-history-file", filepath.Join(inv.Home, "aider.input.history"),
	}
	if _, err := os.Stat(filepath.Join(inv.Workspace, ".git")); err != nil {
		// Without this aider would create a git repository in the workspace.
		args = append(args, "--no-git")
	}
	if inv.SystemPrompt != "" {
		// aider has no system prompt option; a read-only file in the chat
		// is how it takes standing instructions (its "conventions").
		f := filepath.Join(inv.CallDir, "logist-instructions.md")
		if err := inv.writeFile(f, []byte(inv.SystemPrompt+"\n")); err != nil {
			return err
		}
		args = append(args, "--read", f)
	}
	if inv.Model != "" {
		args = append(args, "--model", inv.Model)
	}
	if inv.ResumeSession != "" {
		args = append(args, "--restore-chat-history")
	}
	// The message goes through a file: no argument length limit, and a
	// message starting with "-" is not an option.
	msg := filepath.Join(inv.CallDir, "message.md")
	if err := inv.writeFile(msg, []byte(inv.Prompt)); err != nil {
		return err
	}
	args = append(args, "--message-file", msg)
	inv.Args = args
	if inv.BaseURL != "" {
		// Only OpenAI-compatible servers take a base URL this way.
		inv.Env["OPENAI_API_BASE"] = inv.BaseURL
	}
	return nil
}

var (
	// aiderTokens is aider's usage line: "Tokens: 2.1k sent, 1.0k cache
	// write, 12k cache hit, 176 received." (format_tokens: n, n.nk, nk).
	aiderTokens = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`(?m)^Tokens: ([0-9.]+k?) sent(?:, ([0-9.]+k?) cache write)?(?:, ([0-9.]+k?) cache hit)?, ([0-9.]+k?) received\.`)
	})
	// aiderCost follows it: "Cost: $0.0093 message, $0.12 session."
	aiderCost = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile(`Cost: \$([0-9.]+) message, \$([0-9.]+) session\.`)
	})
	aiderModel = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`(?m)^(?:Main model|Model): (\S+)`) })
)

func aiderParse(out *RunOutput) (*Parsed, error) {
	text := string(out.Stdout)
	if strings.TrimSpace(text) == "" && out.ExitCode != 0 {
		return nil, errors.New("no output")
	}
	p := &Parsed{SessionID: aiderSession}
	if m := aiderModel().FindStringSubmatch(text); m != nil {
		p.Model = m[1]
	}
	usage := aiderTokens().FindAllStringSubmatchIndex(text, -1)
	if len(usage) > 0 {
		t := &history.Tokens{}
		for _, m := range usage {
			t.Input += aiderCount(text, m[2], m[3])
			t.Cache += aiderCount(text, m[6], m[7])
			t.Output += aiderCount(text, m[8], m[9])
		}
		t.Cache = min(t.Cache, t.Input)
		p.Tokens = t
		p.Turns = len(usage)
	}
	if costs := aiderCost().FindAllStringSubmatch(text, -1); len(costs) > 0 {
		if v, err := strconv.ParseFloat(costs[len(costs)-1][2], 64); err == nil {
			p.CostUSD, p.CostReported = v, true
		}
	}
	// The model's last reply is what precedes the last usage line (and
	// follows the one before).
	reply := text
	if n := len(usage); n > 0 {
		start := 0
		if n > 1 {
			start = usage[n-2][1]
		}
		reply = text[start:usage[n-1][0]]
	}
	if ans := aiderAnswer(reply); ans != nil {
		p.Answer = ans
		return p, nil
	}
	if e := aiderError(text); e != nil {
		e.Partial = []byte(strings.TrimSpace(reply))
		p.Err = e
		return p, nil
	}
	// No answer object: the runner reports what the model said.
	p.Answer = []byte(strings.TrimSpace(reply))
	return p, nil
}

// aiderCount reads format_tokens output ("950", "2.1k", "12k").
func aiderCount(text string, i, j int) int64 {
	if i < 0 {
		return 0
	}
	s := text[i:j]
	mult := 1.0
	if strings.HasSuffix(s, "k") {
		s, mult = strings.TrimSuffix(s, "k"), 1000
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0
	}
	return int64(v*mult + 0.5)
}

// aiderAnswer is the last JSON object with an "action" in the reply (the
// reply also holds edit blocks and prose), or nil.
func aiderAnswer(reply string) []byte {
	b := []byte(reply)
	for i := bytes.LastIndexByte(b, '{'); i >= 0; i = bytes.LastIndexByte(b[:i], '{') {
		dec := json.NewDecoder(bytes.NewReader(b[i:]))
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			continue
		}
		var obj map[string]any
		if json.Unmarshal(raw, &obj) == nil {
			if _, ok := obj["action"]; ok {
				return raw
			}
		}
	}
	return nil
}

// aiderError classifies the failures aider prints (its descriptions of
// litellm's exceptions, aider/exceptions.py); aider exits 0 after them.
func aiderError(text string) *Error {
	low := strings.ToLower(text)
	msg := "aider: " + truncateText(aiderLastLines(text, 4), 600)
	switch {
	case strings.Contains(low, "not able to authenticate you") || strings.Contains(low, "authenticationerror"):
		return &Error{Code: codes.AuthFailed, Msg: msg}
	case strings.Contains(low, "has rate limited you") || strings.Contains(low, "ratelimiterror"):
		// aider already retried for about a minute.
		return &Error{Code: codes.RateLimited, Transient: true, Msg: msg}
	case strings.Contains(low, "servers are down or overloaded") || strings.Contains(low, "timed out without returning") ||
		strings.Contains(low, "internalservererror") || strings.Contains(low, "serviceunavailableerror") || strings.Contains(low, "apiconnectionerror"):
		return &Error{Code: codes.APIError, Transient: true, Msg: msg}
	case strings.Contains(low, "hit a token limit") || strings.Contains(low, "contextwindowexceedederror"):
		return &Error{Code: codes.MaxTokens, Msg: msg}
	case strings.Contains(low, "badrequesterror") || strings.Contains(low, "notfounderror"):
		return &Error{Code: codes.APIError, Msg: msg}
	}
	return nil
}

func aiderLastLines(text string, n int) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " ")
}
