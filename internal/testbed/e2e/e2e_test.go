// Package e2e runs logist and logistd end to end from txtar scripts
// (testdata/script), as the go command and Hugo test themselves: each
// script gets a fresh work folder and the two programs on its PATH.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/logist/logist/internal/cli"
	"github.com/logist/logist/internal/daemon"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/sandbox"
)

func TestMain(m *testing.M) {
	// The binary is also logistd's sandbox launcher and helper.
	sandbox.Helper()
	testscript.Main(m, map[string]func(){
		"logist": func() { os.Exit(cli.Main(context.Background(), os.Args, os.Getenv, os.Stdin, os.Stdout, os.Stderr)) },
		"logistd": func() {
			ctx, stop := signalContext()
			defer stop()
			os.Exit(daemon.Main(ctx, os.Args, os.Getenv, os.Stdout, os.Stderr))
		},
	})
}

func TestScripts(t *testing.T) {
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			env.Setenv("LOGIST_JOBS_DIR", "")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":    cmdExitCode,
			"waitstatus":  cmdWaitStatus,
			"waitfile":    cmdWaitFile,
			"waitgrep":    cmdWaitGrep,
			"waitgone":    cmdWaitGone,
			"copyexample": cmdCopyExample,
			"readmeblock": cmdReadmeBlock,
			"historyhas":  cmdHistoryHas,
			"bigfile":     cmdBigFile,
			"deepjson":    cmdDeepJSON,
			"nounsafe":    cmdNoUnsafe,
			"jsonhas":     cmdJSONHas,
		},
	})
}

// exitcode N prog args...: run prog (from the script's PATH) and require
// exit code N; its output is logged.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: exitcode N prog [args...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	path, err := lookPath(ts, args[1])
	ts.Check(err)
	cmd := exec.Command(path, args[2:]...)
	cmd.Dir = ts.MkAbs(".")
	cmd.Env = scriptEnv(ts)
	out, _ := cmd.CombinedOutput()
	ts.Logf("%s", out)
	got := cmd.ProcessState.ExitCode()
	if (got == want) == neg {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

func lookPath(ts *testscript.TestScript, name string) (string, error) {
	for _, dir := range filepath.SplitList(ts.Getenv("PATH")) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found on the script's PATH", name)
}

func scriptEnv(ts *testscript.TestScript) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR", "WORK", "LOGIST_JOBS_DIR", "LOGISTD_DATABASE_URL"} {
		env = append(env, k+"="+ts.Getenv(k))
	}
	// The test binary acts as logist/logistd when re-executed this way.
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GO") || strings.HasPrefix(kv, "TESTSCRIPT") {
			env = append(env, kv)
		}
	}
	return env
}

// waitstatus DIR JOB STATUS [seconds]: poll the manifest until the job
// has STATUS.
func cmdWaitStatus(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 3 {
		ts.Fatalf("usage: waitstatus JOBSDIR JOB STATUS [seconds]")
	}
	file := ts.MkAbs(filepath.Join(args[0], args[1], "job.json"))
	last := ""
	limit, ok := waitUntil(args, 3, 20*time.Second, func() bool {
		m, err := manifest.ReadFile(file)
		if err != nil {
			last = err.Error()
			return false
		}
		last = string(m.Status)
		return last == args[2]
	})
	if !ok {
		ts.Fatalf("job %s: status %s after %s, want %s", args[1], last, limit, args[2])
	}
}

// waitUntil polls cond every 20 ms until it holds or the limit passes,
// which is args[i] in seconds when given, else def; it returns the limit
// and whether cond held. The wait commands below share it.
func waitUntil(args []string, i int, def time.Duration, cond func() bool) (time.Duration, bool) {
	limit := def
	if len(args) > i {
		s, _ := strconv.ParseFloat(args[i], 64)
		limit = time.Duration(s * float64(time.Second))
	}
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return limit, true
		}
	}
	return limit, false
}

// waitfile FILE [seconds]: poll until FILE exists and is not empty.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: waitfile FILE [seconds]")
	}
	limit, ok := waitUntil(args, 1, 20*time.Second, func() bool {
		fi, err := os.Stat(ts.MkAbs(args[0]))
		return err == nil && fi.Size() > 0
	})
	if !ok {
		ts.Fatalf("%s did not appear within %s", args[0], limit)
	}
}

// waitgrep PATTERN FILE [seconds]: poll until FILE holds a line matching
// the regular expression PATTERN (for output a background command writes
// on its own clock, such as watch's look at the daemon once a second).
func cmdWaitGrep(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 2 {
		ts.Fatalf("usage: waitgrep PATTERN FILE [seconds]")
	}
	re, err := regexp.Compile("(?m)" + args[0])
	ts.Check(err)
	limit, ok := waitUntil(args, 2, 20*time.Second, func() bool {
		b, err := os.ReadFile(ts.MkAbs(args[1]))
		return err == nil && re.Match(b)
	})
	if !ok {
		ts.Fatalf("no line matching %q in %s within %s", args[0], args[1], limit)
	}
}

// waitgone PIDFILE [seconds]: the process whose pid is in PIDFILE must be
// gone (killed and reaped) within the limit.
func cmdWaitGone(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: waitgone PIDFILE [seconds]")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(ts.ReadFile(args[0])))
	ts.Check(err)
	limit, ok := waitUntil(args, 1, 5*time.Second, func() bool {
		return syscall.Kill(pid, 0) == syscall.ESRCH || zombie(pid)
	})
	if !ok {
		ts.Fatalf("process %d still runs after %s", pid, limit)
	}
}

// zombie reports a process that has exited and only waits for its parent.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && s[i+2] == 'Z'
}

// copyexample NAME DIR: copy the repo's example job jobs/NAME into DIR/NAME.
func cmdCopyExample(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: copyexample NAME DIR")
	}
	src := filepath.Join(ts.Getenv("REPO"), "jobs", args[0])
	dst := ts.MkAbs(filepath.Join(args[1], args[0]))
	ts.Check(os.CopyFS(dst, os.DirFS(src)))
}

// readmeblock MARKER FILE: write the first fenced block of the repo's
// README.md that follows the first line containing MARKER to FILE, so a
// script runs (or prints) what the README shows.
func cmdReadmeBlock(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: readmeblock MARKER FILE")
	}
	b, err := os.ReadFile(filepath.Join(ts.Getenv("REPO"), "README.md"))
	ts.Check(err)
	var block []string
	seen, in := false, false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case !seen:
			seen = strings.Contains(l, args[0])
		case !in && strings.HasPrefix(l, "```"):
			in = true
		case in && strings.HasPrefix(l, "```"):
			ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(strings.Join(block, "\n")+"\n"), 0o600))
			return
		case in:
			block = append(block, l)
		}
	}
	ts.Fatalf("README.md has no fenced block after a line starting with %q", args[0])
}

// historyhas DIR JOB TYPE CODE COUNT: the job's history has exactly COUNT
// records of TYPE whose error code (response.error_code or error.code, "-"
// for any) is CODE.
func cmdHistoryHas(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 5 {
		ts.Fatalf("usage: historyhas JOBSDIR JOB TYPE CODE COUNT")
	}
	recs, err := history.ReadAll(ts.MkAbs(filepath.Join(args[0], args[1])))
	ts.Check(err)
	want, _ := strconv.Atoi(args[4])
	n := 0
	for _, r := range recs {
		if r.Type != args[2] {
			continue
		}
		code := ""
		if r.Response != nil {
			code = r.Response.ErrorCode
		}
		if r.Error != nil {
			code = r.Error.Code
		}
		if args[3] == "-" || code == args[3] {
			n++
		}
	}
	if (n == want) == neg {
		ts.Fatalf("job %s: %d %s records with code %s, want %d", args[1], n, args[2], args[3], want)
	}
}

// bigfile PATH SIZE: a JSON object of about SIZE bytes.
func cmdBigFile(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: bigfile PATH SIZE")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	body := `{"task_description": "` + strings.Repeat("x", n) + `"}`
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(body), 0o600))
}

// deepjson PATH DEPTH: an array nested DEPTH levels deep.
func cmdDeepJSON(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: deepjson PATH DEPTH")
	}
	n, err := strconv.Atoi(args[1])
	ts.Check(err)
	body := `{"task_description": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`
	ts.Check(os.WriteFile(ts.MkAbs(args[0]), []byte(body), 0o600))
}

// nounsafe FILE: FILE (or stdout, stderr) holds no rune that acts on a
// terminal: no control character but newline, no DEL, no C1 control, no
// bidi embedding, override, isolate or mark, no line or paragraph
// separator, and is valid UTF-8.
func cmdNoUnsafe(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: nounsafe FILE")
	}
	text := ts.ReadFile(args[0])
	bad := ""
	if !utf8.ValidString(text) {
		bad = "invalid UTF-8"
	}
	for i, r := range text {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069,
			r == 0x200e, r == 0x200f, r == 0x061c, r == 0x2028, r == 0x2029:
			if bad == "" {
				bad = fmt.Sprintf("%U at byte %d", r, i)
			}
		}
	}
	if (bad == "") == neg {
		ts.Fatalf("%s: raw %s in:\n%q", args[0], bad, text)
	}
}

// jsonhas FILE QUOTED: FILE holds JSON (one document, or one per line) with
// a string value containing the Go-quoted text QUOTED exactly.
func cmdJSONHas(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: jsonhas FILE QUOTED")
	}
	want, err := strconv.Unquote(args[1])
	ts.Check(err)
	dec := json.NewDecoder(strings.NewReader(ts.ReadFile(args[0])))
	found := false
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			found = found || strings.Contains(x, want)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			ts.Fatalf("%s: not JSON: %v", args[0], err)
		}
		walk(v)
	}
	if found == neg {
		ts.Fatalf("%s: a string holding %q found: %v", args[0], want, found)
	}
}
