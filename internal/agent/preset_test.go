package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/sandbox"
)

// fakePreset runs a shell script that prints one JSON object describing
// its environment, and parses it: the framework is tested without any
// real agent CLI.
func fakePreset(parse func(out *RunOutput) (*Parsed, error)) *Preset {
	return &Preset{
		Name: "fake", Program: "fake-agent", Package: "none", EnvAllow: []string{"FAKE_API_KEY"},
		Build: func(inv *Invocation) error {
			inv.Args = []string{"--model", inv.Model, "--resume", inv.ResumeSession, "--schema", inv.SchemaFile}
			inv.Env["FAKE_BASE_URL"] = inv.BaseURL
			return os.WriteFile(filepath.Join(inv.Home, "settings.json"), []byte(`{"telemetry": false}`), 0o600)
		},
		Parse: parse,
	}
}

const fakeScript = `#!/bin/sh
stdin=$(cat)
printf '{"args":"%s","cwd":"%s","home":"%s","key":"%s","secret":"%s","base":"%s","ci":"%s","stdin":"%s","tmp":"%s"}\n' \
  "$*" "$(pwd)" "$HOME" "$FAKE_API_KEY" "$DAEMON_SECRET" "$FAKE_BASE_URL" "$CI" "$stdin" "$TMPDIR"
exit ${FAKE_EXIT:-0}
`

func setupFake(t *testing.T) (prog string, req *Request) {
	t.Helper()
	dir := t.TempDir()
	prog = filepath.Join(dir, "fake-agent")
	if err := os.WriteFile(prog, []byte(fakeScript), 0o700); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(dir, "job")
	ws := filepath.Join(job, "workspace")
	if err := os.MkdirAll(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	req = &Request{JobID: "j", Phase: "work", Role: "worker", JobDir: job, Workspace: ws, Interaction: 3,
		SystemPrompt: "You are the Worker.", Prompt: "You are the Worker.\n\n## Task\nDo it.",
		Metadata: map[string]any{MetaResumeSession: "sess-1"}}
	return prog, req
}

func envOf(t *testing.T, out *RunOutput) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal(jsonLines(out.Stdout)[0], &m); err != nil {
		t.Fatalf("fake output %q: %v", out.Stdout, err)
	}
	return m
}

func TestPresetCommandRunsProgramInPrivateHome(t *testing.T) {
	prog, req := setupFake(t)
	var seen map[string]string
	var schemaErr error
	p := fakePreset(func(out *RunOutput) (*Parsed, error) {
		seen = envOf(t, out)
		// The schema file is there while the call runs (the call's scratch
		// folder goes when it ends).
		if b, err := os.ReadFile(out.Inv.SchemaFile); err != nil || !json.Valid(b) {
			schemaErr = fmt.Errorf("%v (%q)", err, b)
		}
		return &Parsed{Answer: []byte(`{"action":"COMPLETED"}`), Tokens: &history.Tokens{Input: 1000, Output: 100, Cache: 500}, SessionID: "sess-2"}, nil
	})
	env := map[string]string{"FAKE_API_KEY": "k-123", "DAEMON_SECRET": "s3cret", "PATH": os.Getenv("PATH")}
	base := listeningURL(t, "/v1")
	c := &PresetCommand{Preset: p, Model: "m1", Getenv: func(k string) string { return env[k] },
		Cfg: manifest.Command{Preset: "fake", Program: prog, Args: []string{"--extra"}, BaseURL: base,
			Price: &manifest.Price{InputPerMTok: 2, OutputPerMTok: 10}}}
	res, err := c.Call(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(req.JobDir, "agent-home", "worker")
	schema := filepath.Join(req.JobDir, "requests", "000003.d", "answer-schema.json")
	want := map[string]string{
		"args": "--model m1 --resume sess-1 --schema " + schema + " --extra", "cwd": req.Workspace, "home": home,
		"key": "k-123", "secret": "", "base": base, "ci": "1", "stdin": "",
		"tmp": filepath.Join(req.JobDir, "requests", "000003.d"),
	}
	for k, v := range want {
		if seen[k] != v {
			t.Errorf("%s = %q, want %q", k, seen[k], v)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "settings.json")); err != nil {
		t.Errorf("Build's file in the private home: %v", err)
	}
	if schemaErr != nil {
		t.Errorf("schema file: %v", schemaErr)
	}
	// 500 uncached·2 + 500 cached·2 (no cached price: input rate) + 100·10, per million.
	if wantCost := (1000*2 + 100*10) / 1e6; res.CostUSD != wantCost || res.SessionID != "sess-2" {
		t.Errorf("cost %v session %q, want %v sess-2", res.CostUSD, res.SessionID, wantCost)
	}
}

func TestPresetCommandClassifies(t *testing.T) {
	prog, req := setupFake(t)
	cases := []struct {
		name      string
		exit      string
		parse     func(*RunOutput) (*Parsed, error)
		code      string
		transient bool
		cost      float64
	}{
		{"reported error behind exit 0", "0", func(*RunOutput) (*Parsed, error) {
			return &Parsed{Answer: []byte("API Error: 401"), CostUSD: 0.5, CostReported: true, Err: &Error{Code: codes.AuthFailed, Msg: "invalid key"}}, nil
		}, codes.AuthFailed, false, 0.5},
		{"unreadable output, exit 0", "0", func(*RunOutput) (*Parsed, error) { return nil, errors.New("no result event") }, codes.AgentFailed, false, 0},
		{"unreadable output, crash", "3", func(*RunOutput) (*Parsed, error) { return nil, errors.New("no result event") }, codes.AgentExit, true, 0},
		{"parsed but non-zero exit", "2", func(*RunOutput) (*Parsed, error) {
			return &Parsed{Answer: []byte("{}"), CostUSD: 0.25, CostReported: true}, nil
		}, codes.AgentExit, true, 0.25},
		{"rate limited", "1", func(*RunOutput) (*Parsed, error) {
			return &Parsed{Err: &Error{Code: codes.RateLimited, Transient: true, Msg: "429"}}, nil
		}, codes.RateLimited, true, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &PresetCommand{Preset: fakePreset(tc.parse), Cfg: manifest.Command{Program: prog, Env: map[string]string{"FAKE_EXIT": tc.exit}},
				Getenv: func(k string) string { return map[string]string{"PATH": os.Getenv("PATH")}[k] }}
			_, err := c.Call(context.Background(), req)
			ae, ok := AsError(err)
			if !ok || ae.Code != tc.code || ae.Transient != tc.transient || ae.CostUSD != tc.cost {
				t.Fatalf("got %#v, want code %s transient %v cost %v", err, tc.code, tc.transient, tc.cost)
			}
		})
	}
}

func TestPresetCommandImplausibleCostAndFreshSession(t *testing.T) {
	prog, req := setupFake(t)
	p := fakePreset(func(*RunOutput) (*Parsed, error) {
		return &Parsed{Answer: []byte("{}"), CostUSD: 1e9, CostReported: true}, nil
	})
	home := filepath.Join(req.JobDir, "agent-home", "worker")
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "old-session.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &PresetCommand{Preset: p, Cfg: manifest.Command{Program: prog, Session: "fresh"},
		Getenv: func(k string) string { return map[string]string{"PATH": os.Getenv("PATH")}[k] }}
	res, err := c.Call(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if res.CostUSD != 0 || !strings.Contains(res.Stderr, "implausible cost") {
		t.Errorf("implausible cost believed: %v %q", res.CostUSD, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(home, "old-session.json")); !os.IsNotExist(err) {
		t.Errorf("session fresh kept the old home: %v", err)
	}
}

func TestPresetCommandNotInstalled(t *testing.T) {
	_, req := setupFake(t)
	c := &PresetCommand{Preset: fakePreset(nil), Cfg: manifest.Command{Program: "no-such-agent-cli"}}
	_, err := c.Call(context.Background(), req)
	if ae, ok := AsError(err); !ok || ae.Code != codes.NotInstalled || ae.Transient || !strings.Contains(ae.Msg, "none") {
		t.Fatalf("got %v", err)
	}
}

func TestUserPromptDropsSystemPrompt(t *testing.T) {
	r := &Request{SystemPrompt: "SYS\n", Prompt: "SYS\n\n## Task\nT"}
	if got := userPrompt(r); got != "## Task\nT" {
		t.Errorf("userPrompt = %q", got)
	}
	r = &Request{SystemPrompt: "other", Prompt: "## Task\nT"}
	if got := userPrompt(r); got != "## Task\nT" {
		t.Errorf("userPrompt = %q", got)
	}
}

func TestPresetSchemaEnumMatchesRegistry(t *testing.T) {
	b, err := os.ReadFile("../../schemas/job-manifest-schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Definitions struct {
			Command struct {
				Properties struct {
					Preset struct {
						Enum []string `json:"enum"`
					} `json:"preset"`
				} `json:"properties"`
			} `json:"command"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	enum := s.Definitions.Command.Properties.Preset.Enum
	for _, n := range enum {
		if _, ok := LookupPreset(n); !ok {
			t.Errorf("schema allows preset %q that is not registered", n)
		}
	}
	if len(enum) != len(PresetNames()) {
		t.Errorf("schema presets %v, registered %v", enum, PresetNames())
	}
}

func TestTopModel(t *testing.T) {
	tokens := func(n int64) int64 { return n }
	for _, c := range []struct {
		usage map[string]int64
		want  string
	}{
		{nil, ""},
		{map[string]int64{"small": 10, "main": 900, "router": 40}, "main"},
		// A tie goes to the first name, whatever the map's order.
		{map[string]int64{"b": 5, "a": 5, "c": 1}, "a"},
		{map[string]int64{"only": 0}, "only"},
	} {
		if got := topModel(c.usage, tokens); got != c.want {
			t.Errorf("topModel(%v) = %q, want %q", c.usage, got, c.want)
		}
	}
}

// capturedRun reads a captured run of an agent CLI (testdata/presets/DIR:
// NAME.jsonl is its stdout, NAME.stderr.txt its stderr; each folder's
// README.txt says how they were made).
func capturedRun(t *testing.T, dir, name string, exit int) *RunOutput {
	t.Helper()
	d := filepath.Join("testdata", "presets", dir)
	out := &RunOutput{ExitCode: exit}
	if b, err := os.ReadFile(filepath.Join(d, name+".jsonl")); err == nil {
		out.Stdout = b
	}
	if b, err := os.ReadFile(filepath.Join(d, name+".stderr.txt")); err == nil {
		out.Stderr = b
	}
	if out.Stdout == nil && out.Stderr == nil {
		t.Fatalf("no sample %s/%s", dir, name)
	}
	return out
}

// TestPresetCallLeavesNoScratch: whatever becomes of a call, its scratch
// folder requests/NNNNNN.d (the program's TMPDIR, where OpenCode's Bun
// unpacks a 5 MB library on every start) is gone when Call returns.
func TestPresetCallLeavesNoScratch(t *testing.T) {
	const script = `#!/bin/sh
mkdir -p "$TMPDIR/bun" && head -c 65536 /dev/zero > "$TMPDIR/bun/lib.so" || exit 9
echo '{"tmp":"'"$TMPDIR"'"}'
[ -n "$FAKE_SLEEP" ] && exec sleep "$FAKE_SLEEP"
exit ${FAKE_EXIT:-0}
`
	ok := func(*RunOutput) (*Parsed, error) { return &Parsed{Answer: []byte(`{"action":"COMPLETED"}`)}, nil }
	cases := []struct {
		name    string
		env     map[string]string
		parse   func(*RunOutput) (*Parsed, error)
		build   func(*Invocation) error
		timeout time.Duration
		cancel  bool
		code    string // "" = an answer
	}{
		{name: "answer", parse: ok},
		{name: "reported error", parse: func(*RunOutput) (*Parsed, error) {
			return &Parsed{Err: &Error{Code: codes.APIError, Transient: true, Msg: "connection refused"}}, nil
		}, code: codes.APIError},
		{name: "crash", env: map[string]string{"FAKE_EXIT": "3"}, parse: func(*RunOutput) (*Parsed, error) { return nil, errors.New("no result") }, code: codes.AgentExit},
		{name: "unreadable", parse: func(*RunOutput) (*Parsed, error) { return nil, errors.New("no result") }, code: codes.AgentFailed},
		{name: "timeout", env: map[string]string{"FAKE_SLEEP": "30"}, parse: ok, timeout: 500 * time.Millisecond, code: "deadline"},
		{name: "cancel", env: map[string]string{"FAKE_SLEEP": "30"}, parse: ok, cancel: true, code: "canceled"},
		{name: "build fails", parse: ok, build: func(inv *Invocation) error {
			if err := os.WriteFile(filepath.Join(inv.CallDir, "prompt.md"), []byte("x"), 0o600); err != nil {
				return err
			}
			return errors.New("no model")
		}, code: codes.AgentConfig},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			prog, req := setupFake(t)
			if err := os.WriteFile(prog, []byte(script), 0o700); err != nil {
				t.Fatal(err)
			}
			callDir := filepath.Join(req.JobDir, "requests", "000003.d")
			// What a daemon that died during an earlier attempt left.
			if err := os.MkdirAll(filepath.Join(callDir, "stale"), 0o700); err != nil {
				t.Fatal(err)
			}
			var sawLib bool
			p := fakePreset(func(out *RunOutput) (*Parsed, error) {
				_, err := os.Stat(filepath.Join(out.Inv.CallDir, "bun", "lib.so"))
				sawLib = err == nil
				return tc.parse(out)
			})
			if tc.build != nil {
				p.Build = tc.build
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			if tc.cancel {
				go func() { time.Sleep(300 * time.Millisecond); cancel() }()
			}
			c := &PresetCommand{Preset: p, Cfg: manifest.Command{Program: prog, Env: tc.env},
				Getenv: func(k string) string { return map[string]string{"PATH": os.Getenv("PATH")}[k] }}
			res, err := c.Call(ctx, req)
			switch tc.code {
			case "":
				if err != nil || res == nil {
					t.Fatalf("call: %v", err)
				}
				if !sawLib {
					t.Error("the program's file in TMPDIR was not there while the call ran")
				}
			case "deadline":
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("got %v, want the deadline", err)
				}
			case "canceled":
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("got %v, want canceled", err)
				}
			default:
				if ae, ok := AsError(err); !ok || ae.Code != tc.code {
					t.Fatalf("got %v, want %s", err, tc.code)
				}
			}
			if _, err := os.Stat(callDir); !os.IsNotExist(err) {
				var left []string
				_ = filepath.Walk(callDir, func(p string, _ os.FileInfo, _ error) error { left = append(left, p); return nil })
				t.Errorf("the call's scratch folder is still there: %v", left)
			}
		})
	}
}

// listeningURL is the base URL of a model API that accepts connections
// (and closes them: the fake programs never talk to it).
func listeningURL(t *testing.T, path string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return "http://" + l.Addr().String() + path
}

// closedURL is the base URL of a model API nobody listens on.
func closedURL(t *testing.T, path string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + path
}

// TestPresetUnreachableEndpoint: a model API that refuses connections is
// a transient API_ERROR at once, without starting the program (several
// CLIs would retry it by themselves for minutes); through a proxy, or
// when the API is up, the program runs.
func TestPresetUnreachableEndpoint(t *testing.T) {
	const script = "#!/bin/sh\ntouch \"$LOGIST_WORKSPACE/started\"\necho '{}'\n"
	ok := func(*RunOutput) (*Parsed, error) { return &Parsed{Answer: []byte(`{"action":"COMPLETED"}`)}, nil }
	for _, tc := range []struct {
		name    string
		base    string
		env     map[string]string
		started bool
	}{
		{"refused", closedURL(t, "/v1"), nil, false},
		{"up", listeningURL(t, "/v1"), nil, true},
		{"through a proxy", closedURL(t, "/v1"), map[string]string{"HTTPS_PROXY": "http://proxy.invalid:3128"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prog, req := setupFake(t)
			if err := os.WriteFile(prog, []byte(script), 0o700); err != nil {
				t.Fatal(err)
			}
			c := &PresetCommand{Preset: fakePreset(ok), Cfg: manifest.Command{Program: prog, BaseURL: tc.base, Env: tc.env},
				Getenv: func(k string) string { return map[string]string{"PATH": os.Getenv("PATH")}[k] }}
			start := time.Now()
			_, err := c.Call(context.Background(), req)
			_, serr := os.Stat(filepath.Join(req.Workspace, "started"))
			if started := serr == nil; started != tc.started {
				t.Fatalf("program started: %v, want %v (err %v)", started, tc.started, err)
			}
			if tc.started {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			ae, isErr := AsError(err)
			if !isErr || ae.Code != codes.APIError || !ae.Transient || !strings.Contains(ae.Msg, "connection refused") || !strings.Contains(ae.Msg, tc.base) {
				t.Fatalf("got %v, want a transient API_ERROR naming the refused %s", err, tc.base)
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestPresetConfigFilesGetTheProxyAddress: a preset that writes its base
// URL into a file (Codex's config.toml, Cline's providers.json) lists the
// file for the executor to fill in the proxy's address when the base URL
// holds the placeholder (the proxy's root under Landlock alone), and only
// then.
func TestPresetConfigFilesGetTheProxyAddress(t *testing.T) {
	for _, tc := range []struct {
		inv  func(*testing.T) *Invocation
		file string
	}{
		{codexInvocation, filepath.Join(".codex", "config.toml")},
		{clineInvocation, filepath.Join(".cline", "data", "settings", "providers.json")},
	} {
		for _, base := range []string{"http://" + sandbox.ProxyAddr + "/v1", "http://127.0.0.1:8788/v1"} {
			inv := tc.inv(t)
			inv.BaseURL = base
			p, _ := LookupPreset(map[string]string{"/bin/codex": "codex", "cline": "cline"}[inv.Program])
			if err := p.Build(inv); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(inv.Home, tc.file)
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), base) {
				t.Errorf("%s: %s lacks the base URL %s:\n%s", p.Name, tc.file, base, b)
			}
			var want []string
			if strings.Contains(base, sandbox.ProxyAddr) {
				want = []string{file}
			}
			if !slices.Equal(inv.Fill, want) {
				t.Errorf("%s with base %s: files to fill %q, want %q", p.Name, base, inv.Fill, want)
			}
		}
	}
}
