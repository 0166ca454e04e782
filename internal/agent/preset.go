package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/sandbox"
)

// Preset knows one agent CLI: how to run it non-interactively in a job's
// workspace and how to read what it printed. Presets are data plus two
// functions; they are registered in presets (preset_*.go).
type Preset struct {
	// Name is what a manifest says in command.preset.
	Name string
	// Program is the executable looked up on PATH unless command.program
	// names one.
	Program string
	// Package is the npm package (or other source) it is installed from,
	// for error messages and docs.
	Package string
	// EnvAllow are daemon variables the program needs (API keys, base URL
	// overrides), passed through when set; the manifest's env_allow adds
	// more.
	EnvAllow []string
	// FullSchema: the program checks structured output against a full JSON
	// Schema itself, so it gets the answer schema as written (optional
	// fields optional, patterns and bounds kept), not OpenAI's strict
	// subset.
	FullSchema bool
	// ModelArg, if set, is the model name the program is given for the
	// role's model and base URL (nil: the role's model as written). Build
	// passes this name, and the request records it (PresetCommand.Params).
	ModelArg func(model, baseURL string) string
	// OwnPrices: the program reports what a call costs when it talks to
	// its own providers (command.base_url unset), so a cost budget holds
	// without a price in Logist's table (UnpricedAgents).
	OwnPrices bool
	// API is the model API family the program speaks (APIAnthropic,
	// APIOpenAI, APIGemini) and KeyVar the variable it reads its key
	// from: a metered call (WithMeter) is given the proxy as its base URL
	// and a per-call token in KeyVar. "" = never metered.
	API, KeyVar string
	// Build fills inv.Args and inv.Env for one call.
	Build func(inv *Invocation) error
	// Parse reads what the program printed. It returns a Parsed with Err
	// set when the program reported a failure (also behind exit status 0),
	// and an error only when the output cannot be understood at all.
	Parse func(out *RunOutput) (*Parsed, error)
}

// Invocation is one call of a preset's program: what Logist knows (the
// inputs) and what Build decides (Args, Env).
type Invocation struct {
	Program string // resolved path of the executable
	Model   string // the role's model ("" = the program's default)
	// SystemPrompt is the role's system prompt (it states the answer
	// contract); Prompt is the rest of the request: task, phase, context
	// files, feedback and guidance.
	SystemPrompt string
	Prompt       string
	// Schema is the answer schema (strict subset, see AnswerSchema);
	// SchemaFile holds the same JSON.
	Schema     []byte
	SchemaFile string
	Workspace  string // the program's working directory
	// Home is the program's private config home (HOME and XDG_* point
	// into it): per job and role, kept between calls so a session can be
	// continued, never shared with other jobs or the daemon's user.
	Home string
	// CallDir is a scratch folder for this call's files (prompt files)
	// and its TMPDIR; it is removed when the call ends.
	CallDir string
	// ResumeSession is the session to continue ("" = start cold).
	ResumeSession string
	MaxTurns      int    // 0 = the preset's default
	BaseURL       string // model API base URL override ("" = the program's default)
	// Contained: the program runs in Logist's sandbox (the job's
	// executor is not Direct). A program that sandboxes its own tools
	// defers to it where its own sandbox cannot nest (Codex).
	Contained bool

	Args []string          // arguments after the program
	Env  map[string]string // variables set for the program (on top of the allowed ones)
	// Fill are the config files WriteConfig wrote that hold the proxy's
	// address placeholder (ProcSpec.Fill).
	Fill []string
	// TailArgs come after command.args (a prompt after "--" that the
	// extra options must not end up in).
	TailArgs []string
}

// WriteConfig writes a config file of the call (mode 0600), such as one
// holding BaseURL. A file that holds the proxy's address placeholder (the
// proxy's root under Landlock alone is known only when the call starts)
// is listed in Fill, so the executor fills the address in before the
// program starts, as it does in the arguments and environment: a preset
// that writes its base URL into a file reaches the proxy on every layer.
func (inv *Invocation) WriteConfig(path string, data []byte) error {
	if err := inv.writeFile(path, data); err != nil {
		return err
	}
	if bytes.Contains(data, []byte(sandbox.ProxyAddr)) && !slices.Contains(inv.Fill, path) {
		inv.Fill = append(inv.Fill, path)
	}
	return nil
}

// RunOutput is what the program left behind.
type RunOutput struct {
	Stdout, Stderr []byte
	ExitCode       int
	// Inv is the call's invocation, for parsers that read what Build
	// left in CallDir or Home (nil in parser unit tests).
	Inv *Invocation
}

// Parsed is a preset's reading of one run.
type Parsed struct {
	// Answer is the program's final text; the runner extracts and
	// validates the JSON answer in it.
	Answer []byte
	// CostUSD is what the program says the call cost, if CostReported;
	// otherwise the cost is tokens × the price table.
	CostUSD      float64
	CostReported bool
	Tokens       *history.Tokens
	SessionID    string
	Turns        int
	Model        string // the model the program reports it used
	// Err is a failure the program reported, classified.
	Err *Error
}

var presets = map[string]*Preset{}

func registerPreset(p *Preset) {
	if _, dup := presets[p.Name]; dup {
		panic("agent: preset registered twice: " + p.Name)
	}
	presets[p.Name] = p
}

// modelArg is the model name the program is given (ModelArg).
func (p *Preset) modelArg(model, baseURL string) string {
	if p.ModelArg != nil {
		return p.ModelArg(model, baseURL)
	}
	return model
}

// LookupPreset returns the named preset.
func LookupPreset(name string) (*Preset, bool) {
	p, ok := presets[name]
	return p, ok
}

// PresetNames lists the registered presets, sorted.
func PresetNames() []string {
	var out []string
	for n := range presets {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// PresetCommand runs an agent CLI through its preset.
type PresetCommand struct {
	Preset *Preset
	Cfg    manifest.Command
	Model  string
	// Getenv reads the daemon's environment (tests inject it).
	Getenv func(string) string
	// LookPath finds the program (tests inject it).
	LookPath func(string) (string, error)
}

// Call runs the program once in the workspace with stdin /dev/null and
// turns its output into a Result or a classified *Error.
func (c *PresetCommand) Call(ctx context.Context, req *Request) (*Result, error) {
	get := c.Getenv
	if get == nil {
		get = os.Getenv
	}
	look := c.LookPath
	if look == nil {
		look = exec.LookPath
	}
	prog := c.Cfg.Program
	if prog == "" {
		prog = c.Preset.Program
	}
	path, err := look(prog)
	if err != nil {
		return nil, &Error{Code: codes.NotInstalled, Msg: fmt.Sprintf("preset %s: program %q not found (install %s, or set command.program): %v", c.Preset.Name, prog, c.Preset.Package, err)}
	}
	reqDir := filepath.Join(req.JobDir, "requests")
	sandboxDir := CallDir(req.JobDir, req.Interaction)
	adopting := heldCall(sandboxDir)
	callDir, err := makeCallDir(reqDir, req.Interaction, adopting)
	if err != nil {
		return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
	}
	// Whatever the outcome (an answer, an error, a timeout, a cancel), the
	// call's scratch folder goes with the call: Parse has read what it
	// needed, and nothing in it is evidence (the history holds the request,
	// the answer and the program's output).
	// A folder left by a failed removal is cleared by makeCallDir on the
	// next attempt, so the error changes nothing for this call.
	defer func() { _ = os.RemoveAll(callDir) }()
	home := filepath.Join(req.JobDir, "agent-home", req.Role)
	if c.Cfg.Session == "fresh" {
		if err := os.RemoveAll(home); err != nil {
			return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
		}
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
	}
	schema, err := AnswerSchemaFor(req)
	if c.Preset.FullSchema {
		schema, err = FullAnswerSchemaFor(req)
	}
	if err != nil {
		return nil, &Error{Code: codes.AgentConfig, Msg: err.Error()}
	}
	schemaJSON, _ := json.Marshal(schema)
	schemaFile := filepath.Join(callDir, "answer-schema.json")
	if err := writeInHome(callDir, schemaFile, schemaJSON); err != nil {
		return nil, &Error{Code: codes.AgentStart, Msg: err.Error()}
	}
	inv := &Invocation{
		Program: path, Model: c.Model, SystemPrompt: req.SystemPrompt, Prompt: userPrompt(req),
		Schema: schemaJSON, SchemaFile: schemaFile, Workspace: req.Workspace, Home: home, CallDir: callDir,
		ResumeSession: resumeSession(req), MaxTurns: c.Cfg.MaxTurns, BaseURL: c.Cfg.BaseURL,
		Env: map[string]string{},
	}
	// A metered call talks to the proxy with a token of its own; the
	// upstream (the steward's base URL, else the provider's) and the real
	// key stay with the proxy. A call adopted from a previous daemon had
	// its grant there: it is read back as it is (never asked and paid
	// again), priced from what the program reported.
	var mc *meterCall
	if !adopting {
		if mc, err = openMeter(ctx, req, MeterGrant{API: c.Preset.API, BaseURL: c.Cfg.BaseURL, Key: c.key(get), Model: c.Model, Price: c.Cfg.Price}); err != nil {
			return nil, err
		}
	}
	if mc != nil {
		inv.BaseURL = mc.m.BaseURL(proxyRoot(ExecutorFrom(ctx), mc.m), c.Preset.API)
	}
	inv.Contained = ExecutorFrom(ctx).Layer() != LayerNone
	res, reported, err := c.run(ctx, req, inv, mc, path, reqDir, sandboxDir, adopting, get)
	if mc != nil {
		return mc.settle(res, err, reported)
	}
	return res, err
}

// key is the real API key the program would be given: the manifest's
// command.env, else the daemon's variable when the preset or the manifest
// lets it through. Under metering it goes to the proxy, never to the
// program.
func (c *PresetCommand) key(get func(string) string) string {
	k := c.Preset.KeyVar
	if k == "" {
		return ""
	}
	if v, ok := c.Cfg.Env[k]; ok {
		return v
	}
	if slices.Contains(c.Preset.EnvAllow, k) || slices.Contains(c.Cfg.EnvAllow, k) {
		return get(k)
	}
	return ""
}

// run builds the program's invocation, runs it and reads its output. It
// returns the cost the program reported itself, if it did.
func (c *PresetCommand) run(ctx context.Context, req *Request, inv *Invocation, mc *meterCall, path, reqDir, sandboxDir string, adopting bool, get func(string) string) (*Result, *float64, error) {
	if err := c.Preset.Build(inv); err != nil {
		return nil, nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("preset %s: %v", c.Preset.Name, err)}
	}
	argv := append(append(append([]string{path}, inv.Args...), c.Cfg.Args...), inv.TailArgs...)
	env := c.env(req, inv, get, mc)
	spec := ProcSpec{Argv: argv, Dir: req.Workspace, Env: env, Limit: c.Cfg.MaxOutputBytes,
		PidLog: filepath.Join(reqDir, PidLog), Interaction: req.Interaction,
		Home: inv.Home, ReadWrite: []string{inv.CallDir}, Fill: inv.Fill, ReadOnly: append(installation(path), Protected(req)...), CallDir: sandboxDir, ModelAPI: mc == nil}
	// The model API (the proxy's upstream, when metered) must accept
	// connections before the program starts: several CLIs would retry a
	// refused one by themselves for minutes.
	if c.Cfg.BaseURL != "" && !adopting {
		if err := unreachable(ctx, c.Cfg.BaseURL, spec.Env); err != nil && ctx.Err() == nil {
			return nil, nil, unreachableError(c.Preset.Program, c.Cfg.BaseURL, err)
		}
	}
	pr, err := RunProcess(ctx, spec)
	if err != nil {
		return nil, nil, err
	}
	out := &RunOutput{Stdout: pr.Stdout, Stderr: pr.Stderr, ExitCode: pr.ExitCode, Inv: inv}
	p, perr := c.Preset.Parse(out)
	stderr := string(pr.Stderr)
	if perr != nil {
		code := codes.AgentFailed
		if pr.ExitCode != 0 {
			// A crash with unreadable output: worth another try.
			return nil, nil, &Error{Code: codes.AgentExit, Transient: true, Msg: pr.Ended(c.Preset.Program) + ": " + lastLine(stderr), Partial: pr.Stdout, Stderr: stderr}
		}
		return nil, nil, &Error{Code: code, Msg: fmt.Sprintf("%s output: %v", c.Preset.Program, perr), Partial: pr.Stdout, Stderr: stderr}
	}
	cost, note := c.cost(p)
	var reported *float64
	if p.CostReported {
		r := p.CostUSD
		reported = &r
	}
	if mc != nil {
		note = "" // the proxy prices the call
	}
	if p.Err != nil {
		e := *p.Err
		e.CostUSD = cost
		if e.Stderr == "" {
			e.Stderr = stderr
		}
		if e.Partial == nil {
			e.Partial = p.Answer
		}
		return nil, reported, &e
	}
	if pr.ExitCode != 0 {
		return nil, nil, &Error{Code: codes.AgentExit, Transient: true, CostUSD: cost, Msg: pr.Ended(c.Preset.Program) + ": " + lastLine(stderr), Partial: pr.Stdout, Stderr: stderr}
	}
	if note != "" {
		stderr = strings.TrimSpace(stderr + "\n" + note)
	}
	return &Result{Raw: p.Answer, CostUSD: cost, Tokens: p.Tokens, SessionID: p.SessionID, Stderr: stderr}, reported, nil
}

// makeCallDir makes a call's scratch folder, requests/NNNNNN.d: the
// program's TMPDIR (Bun unpacks a 5 MB native library into it on every
// start of OpenCode) and the files Build gives the program (answer schema,
// long prompt, instructions). It starts empty: a daemon that died during
// the call left the last attempt's, and a re-attempt has the same number.
// The caller removes it when the call ends.
//
// A call a previous daemon started and that is being adopted keeps its
// folder as the program left it (its parser may read it).
func makeCallDir(reqDir string, interaction int, adopting bool) (string, error) {
	dir := filepath.Join(reqDir, fmt.Sprintf("%06d.d", interaction))
	if adopting {
		return dir, os.MkdirAll(dir, 0o700)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o700)
}

// installation is what a contained run of the program must read besides
// the system: an npm package's whole node_modules folder (the program is
// a link into it), else the program's own folder. Programs under the
// system folders need nothing.
func installation(program string) []string {
	var out []string
	for _, p := range []string{program, resolved(program)} {
		if i := strings.LastIndex(p, "/node_modules/"); i > 0 {
			out = append(out, p[:i+len("/node_modules")])
		} else if p != "" {
			out = append(out, filepath.Dir(p))
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	// Folders of the system are there already; a folder inside another
	// listed one is covered by it.
	keep := out[:0]
	for _, p := range out {
		if sandbox.System(p) || (len(keep) > 0 && strings.HasPrefix(p, keep[len(keep)-1]+"/")) {
			continue
		}
		keep = append(keep, p)
	}
	return keep
}

func resolved(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

// cost is what the program reported, else tokens × price.
func (c *PresetCommand) cost(p *Parsed) (float64, string) {
	if p.CostReported {
		if p.CostUSD < 0 || p.CostUSD > MaxCallCostUSD {
			return 0, fmt.Sprintf("logist: %s reported an implausible cost %v; counted as 0", c.Preset.Name, p.CostUSD)
		}
		return p.CostUSD, ""
	}
	if p.Tokens == nil {
		return 0, ""
	}
	model := c.Model
	if model == "" {
		model = p.Model
	}
	price, ok := LookupPrice(model)
	if c.Cfg.Price != nil {
		price, ok = *c.Cfg.Price, true
	}
	if !ok {
		return 0, fmt.Sprintf("logist: no price known for model %q; cost counted as 0 (set command.price)", model)
	}
	return TokenCost(*p.Tokens, price), ""
}

// env is the scrubbed environment: the base variables, the preset's and
// manifest's allowed ones, the manifest's constants, HOME and XDG_* in the
// private home, and what the preset sets.
//
// A metered call (mc set) gets none of the preset's allowed variables
// (API keys, base URL overrides): its key variable holds its token.
func (c *PresetCommand) env(req *Request, inv *Invocation, get func(string) string, mc *meterCall) []string {
	vars := map[string]string{}
	allow := append(append([]string{}, BaseEnv...), c.Cfg.EnvAllow...)
	if mc == nil {
		allow = append(allow, c.Preset.EnvAllow...)
	}
	for _, k := range allow {
		if v := get(k); v != "" {
			vars[k] = v
		}
	}
	vars["HOME"] = inv.Home
	vars["XDG_CONFIG_HOME"] = filepath.Join(inv.Home, ".config")
	vars["XDG_DATA_HOME"] = filepath.Join(inv.Home, ".local", "share")
	vars["XDG_STATE_HOME"] = filepath.Join(inv.Home, ".local", "state")
	vars["XDG_CACHE_HOME"] = filepath.Join(inv.Home, ".cache")
	vars["TMPDIR"] = inv.CallDir
	// Nothing interactive, no colours in machine-readable output.
	vars["CI"] = "1"
	vars["NO_COLOR"] = "1"
	vars["TERM"] = "dumb"
	for k, v := range inv.Env {
		vars[k] = v
	}
	for k, v := range c.Cfg.Env {
		vars[k] = v
	}
	if mc != nil {
		vars[c.Preset.KeyVar] = mc.token
	}
	vars["LOGIST_JOB_ID"] = req.JobID
	vars["LOGIST_PHASE"] = req.Phase
	vars["LOGIST_ROLE"] = req.Role
	vars["LOGIST_WORKSPACE"] = req.Workspace
	vars["LOGIST_INTERACTION"] = strconv.Itoa(req.Interaction)
	keys := make([]string, 0, len(vars))
	for k := range vars {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, 0, len(keys))
	for _, k := range keys {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// userPrompt is the request's prompt without the system prompt it starts
// with (presets pass the system prompt their own way).
func userPrompt(req *Request) string {
	if req.SystemPrompt != "" {
		if rest := strings.TrimSpace(strings.TrimPrefix(req.Prompt, strings.TrimSpace(req.SystemPrompt))); rest != req.Prompt {
			return rest
		}
	}
	return req.Prompt
}

// resumeSession is the session the engine asked to continue.
func resumeSession(req *Request) string {
	if s, ok := req.Metadata[MetaResumeSession].(string); ok {
		return s
	}
	return ""
}

// MetaResumeSession is the request metadata key naming the agent session
// a call continues; it is part of the stored request, so a re-attempt
// after a crash continues the same session.
const MetaResumeSession = "resume_session"

// jsonLines splits output into its JSON lines, skipping anything else
// (banners, warnings some programs print on stdout).
func jsonLines(b []byte) []json.RawMessage {
	var out []json.RawMessage
	for _, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' || !json.Valid(line) {
			continue
		}
		out = append(out, json.RawMessage(line))
	}
	return out
}

// maxPromptArg keeps a prompt passed as one argument below Linux's limit
// for a single argument (MAX_ARG_STRLEN, 128 KiB).
const maxPromptArg = 100 << 10

// longPrompt leaves a prompt that fits in one argument as it is; a longer
// one is written to prompt.md in the call's scratch folder and replaced by
// "Your full instructions are in the file F. " + howToRead. It reports the
// file (""  when the prompt was short).
func longPrompt(inv *Invocation, howToRead string) (prompt, file string, err error) {
	if len(inv.Prompt) <= maxPromptArg {
		return inv.Prompt, "", nil
	}
	file = filepath.Join(inv.CallDir, "prompt.md")
	if err := inv.writeFile(file, []byte(inv.Prompt)); err != nil {
		return "", "", err
	}
	return "Your full instructions are in the file " + file + ". " + howToRead, file, nil
}

// stderrText is a program's stderr on one line without blank lines and the
// lines starting with one of skip (its notices and stack frames), cut to
// 500 bytes: the part worth showing in an error.
func stderrText(stderr string, skip ...string) string {
	var keep []string
lines:
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		for _, p := range skip {
			if strings.HasPrefix(l, p) {
				continue lines
			}
		}
		keep = append(keep, l)
	}
	return truncateText(strings.Join(keep, " "), 500)
}
