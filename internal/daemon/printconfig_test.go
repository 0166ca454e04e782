package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --print-config runs the start's own check of the settings: a value that
// would stop logistd starting makes it exit 1 with the start's message
// (it printed them and exited 0), and it names the config file it read.
func TestPrintConfigRefusesWhatAStartRefuses(t *testing.T) {
	dir := t.TempDir()
	none := func(string) string { return "" }
	main := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"logistd", "--jobs-dir", filepath.Join(dir, "jobs")}, args...), none, &out, &errb)
		return code, out.String(), errb.String()
	}
	for _, c := range []struct{ body, want string }{
		{`{"max_parallel": 0}`, "--max-parallel 0 (config FILE): must be at least 1"},
		{`{"grace": "-1s"}`, "--grace -1s (config FILE): must not be negative"},
		{`{"log_level": "verbose"}`, `--log-level "verbose": use debug, info, warn or error`},
		{`{"default_max_agent_calls": 0}`, "--default-max-agent-calls 0 (config FILE): must be at least 1"},
		{`{"default_cost_threshold": -1}`, "--default-cost-threshold -1 (config FILE): must be a finite number of cents, more than 0"},
		// The console's settings, checked when --listen serves it.
		{`{"listen": "0.0.0.0:9464"}`, "--listen 0.0.0.0:9464 is not a loopback address"},
		{`{"listen": "127.0.0.1:0", "tls_cert": "c.pem"}`, "--tls-cert and --tls-key go together"},
		{`{"listen": "127.0.0.1:0", "console_disable": "rolback"}`, "--console-disable rolback: not a console action"},
		{`{"listen": "127.0.0.1:0", "console_viewer_token_file": "/nonexistent/token"}`, "console token: open /nonexistent/token: no such file"},
	} {
		file := filepath.Join(dir, "e.json")
		if err := os.WriteFile(file, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		want := "logistd: " + strings.ReplaceAll(c.want, "FILE", file)
		code, out, errs := main("--config", file, "--print-config")
		printed, _ := strings.CutPrefix(errs, "logistd: config file "+file+"\n")
		if code != 1 || out != "" || !strings.HasPrefix(printed, want) {
			t.Errorf("%s --print-config: exit %d, stdout %q, stderr %q; want exit 1 and %q", c.body, code, out, errs, want)
		}
		if code, _, errs := main("--config", file); code != 1 || errs != printed {
			t.Errorf("%s start: exit %d, stderr %q; want the same message as --print-config's, %q", c.body, code, errs, printed)
		}
	}
	file := filepath.Join(dir, "ok.json")
	if err := os.WriteFile(file, []byte(`{"max_parallel": 2}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errs := main("--config", file, "--print-config"); code != 0 || !strings.Contains(out, `"max-parallel"`) || errs != "logistd: config file "+file+"\n" {
		t.Errorf("a good file: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// logistd makes its jobs folder, not the folders above it: a mistyped
// --jobs-dir is refused, naming the missing parent, instead of being made
// whole and served empty.
func TestMistypedJobsDirIsNotMade(t *testing.T) {
	dir := t.TempDir()
	var out, errb bytes.Buffer
	jobs := filepath.Join(dir, "srv", "jbos", "jobs")
	code := Main(context.Background(), []string{"logistd", "--once", "--jobs-dir", jobs}, func(string) string { return "" }, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "its parent folder "+filepath.Join(dir, "srv", "jbos")+" does not exist") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "srv")); !os.IsNotExist(err) {
		t.Errorf("a folder above the jobs folder was made: %v", err)
	}
	// The jobs folder itself is made.
	code = Main(context.Background(), []string{"logistd", "--once", "--jobs-dir", filepath.Join(dir, "jobs")}, func(string) string { return "" }, &out, &errb)
	if fi, err := os.Stat(filepath.Join(dir, "jobs")); code != 0 || err != nil || !fi.IsDir() {
		t.Errorf("a new jobs folder: exit %d, %v\n%s", code, err, errb.String())
	}
}
