package protocol

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
)

func execTool(t *testing.T, ws string, store Store, p Policy, tool string, input map[string]any) (*ToolResult, map[string]any) {
	t.Helper()
	res, err := Execute(context.Background(), ws, Intent{ID: "i", ProposalID: "p", Tool: tool, Input: input, RiskClass: "low"}, store, p)
	if err != nil {
		t.Fatal(err)
	}
	in, err := store.Get(res.InputArtifact)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := InputDocument(tool, input); string(in) != string(want) {
		t.Errorf("input artifact %s, want %s", in, want)
	}
	if res.InputArtifact != "sha256:"+NormalizedInputHash(tool, input) {
		t.Error("input artifact id is not the normalized input hash")
	}
	b, err := store.Get(res.OutputArtifact)
	if err != nil {
		t.Fatalf("output artifact: %v", err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return res, out
}

func toolSetup(t *testing.T) (string, Store, Policy) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	return ws, NewStore(dir), Policy{}.WithDefaults()
}

func TestShellTool(t *testing.T) {
	ws, store, p := toolSetup(t)
	t.Setenv("LOGIST_TEST_SECRET", "hunter2")
	res, out := execTool(t, ws, store, p, ToolShell, map[string]any{"command": `pwd; echo "home=$HOME"; env | grep -c SECRET; echo err >&2`})
	if !res.OK || res.ExitCode != 0 || res.Error != "" {
		t.Fatalf("%+v", res)
	}
	stdout := out["stdout"].(string)
	real, _ := filepath.EvalSymlinks(ws)
	if !strings.HasPrefix(stdout, real+"\n") && !strings.HasPrefix(stdout, ws+"\n") {
		t.Errorf("not run in the workspace: %q", stdout)
	}
	if strings.Contains(stdout, "home="+os.Getenv("HOME")+"\n") || !strings.Contains(stdout, "\n0\n") {
		t.Errorf("environment not scrubbed: %q", stdout)
	}
	if out["stderr"] != "err\n" || out["exit_code"] != 0.0 {
		t.Errorf("output %v", out)
	}
	// argv form.
	res, out = execTool(t, ws, store, p, ToolShell, map[string]any{"argv": []string{"printf", "%s", "a b"}})
	if !res.OK || out["stdout"] != "a b" {
		t.Errorf("argv: %+v %v", res, out)
	}
	// Non-UTF-8 output survives, as base64.
	res, out = execTool(t, ws, store, p, ToolShell, map[string]any{"command": `printf '\377\376'`})
	if !res.OK || out["stdout_base64"] != "//4=" {
		t.Errorf("binary output: %v", out)
	}
}

func TestShellToolFailures(t *testing.T) {
	ws, store, p := toolSetup(t)
	res, out := execTool(t, ws, store, p, ToolShell, map[string]any{"command": "echo partial; exit 7"})
	if res.OK || res.ExitCode != 7 || res.Error != "exit status 7" || out["stdout"] != "partial\n" || out["exit_code"] != 7.0 {
		t.Errorf("non-zero exit: %+v %v", res, out)
	}
	typ, body := ResultEvent(res)
	if typ != ToolExecutionFailed || body["error"] != "exit status 7" || body["output_artifact"] != res.OutputArtifact {
		t.Errorf("result event %s %v", typ, body)
	}
	for _, bad := range []map[string]any{
		{}, {"command": ""}, {"command": 3}, {"argv": []any{}}, {"argv": []any{1}}, {"command": "x", "argv": []any{"y"}},
	} {
		res, _ := execTool(t, ws, store, p, ToolShell, bad)
		if res.OK || !strings.Contains(res.Error, "invalid shell input") {
			t.Errorf("input %v: %+v", bad, res)
		}
	}
	res, _ = execTool(t, ws, store, p, ToolShell, map[string]any{"argv": []any{"/no/such/program"}})
	if res.OK || res.Error == "" {
		t.Errorf("missing program: %+v", res)
	}
	p.MaxToolOutputBytes = 1000
	res, out = execTool(t, ws, store, p, ToolShell, map[string]any{"command": "yes | head -c 100000"})
	if res.OK || out["truncated"] != true || !strings.Contains(res.Error, "more than 1000 bytes") {
		t.Errorf("output limit: %+v %v", res, out["truncated"])
	}
}

// A tool's max_tool_output_bytes is held to the daemon's output ceiling,
// which its executor carries, and the tool's error names the ceiling.
func TestToolOutputUnderTheCeiling(t *testing.T) {
	ws, store, p := toolSetup(t)
	p.MaxToolOutputBytes = 1 << 40
	ctx := agent.WithExecutor(context.Background(), agent.Direct{Ceiling: 2048})
	res, err := Execute(ctx, ws, Intent{ID: "i", ProposalID: "p", Tool: ToolShell, Input: map[string]any{"command": "yes | head -c 100000"}, RiskClass: "low"}, store, p)
	if err != nil {
		t.Fatal(err)
	}
	want := "printed more than 2048 bytes, this daemon's output ceiling (logistd --output-ceiling-bytes; the job asks 1099511627776); its process group was killed"
	if res.OK || res.Error != want {
		t.Errorf("error %q, want %q", res.Error, want)
	}
	b, err := store.Get(res.OutputArtifact)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil || out["truncated"] != true {
		t.Fatalf("output %s: %v", b, err)
	}
	if s, _ := out["stdout"].(string); len(s) > 2048 {
		t.Errorf("kept %d bytes of stdout, over the ceiling", len(s))
	}
}

// TestShellToolTimeoutKillsGroup: at the timeout the whole process group
// goes, background children included.
func TestShellToolTimeoutKillsGroup(t *testing.T) {
	ws, store, p := toolSetup(t)
	p.ToolTimeoutSeconds = 1
	start := time.Now()
	res, out := execTool(t, ws, store, p, ToolShell, map[string]any{"command": "sleep 60 & echo $! > child.pid; wait"})
	if time.Since(start) > 20*time.Second {
		t.Fatalf("took %s", time.Since(start))
	}
	if res.OK || res.ExitCode != -1 || out["timed_out"] != true || !strings.Contains(res.Error, "timed out") {
		t.Fatalf("%+v %v", res, out)
	}
	b, err := os.ReadFile(filepath.Join(ws, "child.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("background child %d outlived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The caller's cancellation is an error, not a tool failure.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Execute(ctx, ws, Intent{Tool: ToolShell, Input: map[string]any{"command": "true"}}, store, p); err == nil {
		t.Error("cancelled Execute returned a result")
	}
}

func TestWriteFileTool(t *testing.T) {
	t.Parallel()
	ws, store, p := toolSetup(t)
	res, out := execTool(t, ws, store, p, ToolWriteFile, map[string]any{"path": "sub/dir/a.txt", "content": "hi\n"})
	if !res.OK || res.ExitCode != 0 {
		t.Fatalf("%+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "sub/dir/a.txt")); err != nil || string(b) != "hi\n" {
		t.Errorf("file %q %v", b, err)
	}
	if out["path"] != "sub/dir/a.txt" || out["bytes"] != 3.0 || out["sha256"] != sha256Hex([]byte("hi\n")) {
		t.Errorf("output %v", out)
	}
	typ, body := ResultEvent(res)
	if typ != ToolExecutionCompleted || body["exit_code"] != 0 {
		t.Errorf("%s %v", typ, body)
	}
	// Overwrite in place.
	if res, _ := execTool(t, ws, store, p, ToolWriteFile, map[string]any{"path": "sub/dir/a.txt", "content": "v2"}); !res.OK {
		t.Errorf("overwrite %+v", res)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []map[string]any{
		{"path": "../escape.txt", "content": "x"},
		{"path": "/etc/escape.txt", "content": "x"},
		{"path": "link/escape.txt", "content": "x"},
		{"path": "sub/../../escape.txt", "content": "x"},
		{"path": "sub", "content": "x"},
		{"path": "a.txt"},
		{"path": 5, "content": "x"},
	} {
		res, _ := execTool(t, ws, store, p, ToolWriteFile, bad)
		if res.OK || res.Error == "" {
			t.Errorf("%v: %+v", bad, res)
		}
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Error("a file was written outside the workspace")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escape.txt")); err == nil {
		t.Error("escape.txt written next to the workspace")
	}
}

func TestToolNotAllowed(t *testing.T) {
	ws, store, p := toolSetup(t)
	p.Tools = []string{ToolWriteFile}
	res, out := execTool(t, ws, store, p, ToolShell, map[string]any{"command": "touch ran"})
	if res.OK || !strings.Contains(res.Error, "not allowed") || out["error"] == nil {
		t.Errorf("%+v %v", res, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Error("a refused tool ran")
	}
	res, _ = execTool(t, ws, store, Policy{Tools: []string{"fetch"}}.WithDefaults(), "fetch", map[string]any{})
	if res.OK || !strings.Contains(res.Error, "unknown tool") {
		t.Errorf("unknown tool: %+v", res)
	}
}

func TestPolicyDefaults(t *testing.T) {
	p := Policy{}.WithDefaults()
	if len(p.ApprovalRisk) != 1 || p.ApprovalRisk[0] != "high" || p.MinEvidence != 1 || len(p.Tools) != 2 ||
		p.ToolTimeoutSeconds != DefaultToolTimeoutSeconds || p.MaxToolOutputBytes != DefaultMaxToolOutputBytes {
		t.Errorf("%+v", p)
	}
	var q Policy
	if err := json.Unmarshal([]byte(`{"approval_risk":[],"min_evidence":3,"allow_fallback":true,"tools":["shell"],
		"tool_timeout_seconds":5,"max_tool_output_bytes":10,"checks":[{"name":"t","argv":["go","test"]}]}`), &q); err != nil {
		t.Fatal(err)
	}
	q = q.WithDefaults()
	if len(q.ApprovalRisk) != 0 || q.MinEvidence != 3 || !q.AllowFallback || len(q.Tools) != 1 || q.ToolTimeoutSeconds != 5 ||
		q.MaxToolOutputBytes != 10 || q.Checks[0].TimeoutSeconds != DefaultCheckTimeout || q.Checks[0].Argv[1] != "test" {
		t.Errorf("%+v", q)
	}
}
