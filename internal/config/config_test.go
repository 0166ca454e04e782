package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func flags() (*pflag.FlagSet, *int, *string, *time.Duration, *string) {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	n := fs.Int("max-parallel", 4, "")
	l := fs.String("listen", "", "")
	g := fs.Duration("grace", 30*time.Second, "")
	j := fs.String("jobs-dir", "./jobs", "")
	fs.String("config", "", "")
	return fs, n, l, g, j
}

func TestPrecedenceFlagsEnvFileDefaults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	if err := os.WriteFile(file, []byte(`{"max_parallel": 8, "listen": "127.0.0.1:1", "grace": "5s", "jobs_dir": "/from/file"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	fs, n, l, g, j := flags()
	if err := fs.Parse([]string{"--max-parallel", "2"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LOGISTD_LISTEN": "127.0.0.1:2"}
	src, err := Apply(fs, file, func(k string) string { return env[k] }, "config")
	if err != nil {
		t.Fatal(err)
	}
	if *n != 2 || *l != "127.0.0.1:2" || *g != 5*time.Second || *j != "/from/file" {
		t.Fatalf("got %d %s %s %s", *n, *l, *g, *j)
	}
	want := map[string]string{"max-parallel": "flag --max-parallel", "listen": "env LOGISTD_LISTEN", "grace": "config " + file, "jobs-dir": "config " + file}
	for k, o := range want {
		if src[k].Origin != o {
			t.Errorf("%s from %q, want %q", k, src[k].Origin, o)
		}
	}
	if _, ok := src["config"]; ok {
		t.Error("--config listed as a setting")
	}
}

func TestBadFilesAreClearErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, c := range map[string]struct{ body, want string }{
		"unknown":  {`{"max_paralel": 8}`, "unknown setting(s) max_paralel"}, //nolint:misspell // the typo is the test
		"json":     {`{"max_parallel": `, "invalid JSON"},
		"where":    {"{\n  \"max_parallel\": 8,\n  \"grace\": 5s\n}", "invalid JSON at line 3, column 13"},
		"trailing": {`{"max_parallel": 8} {"grace": "1s"}`, "data after the JSON object at line 1, column 21"},
		"twice":    {`{"max_parallel": 8, "max_parallel": 0}`, "setting max_parallel given twice"},
		"array":    {`[1]`, "want an object"},
		"eof":      {`{"max_parallel": 8`, "unexpected end of the file"},
		"type":     {`{"max_parallel": "lots"}`, "max_parallel"},
		"config":   {`{"config": "x"}`, "unknown setting(s) config"},
		"list":     {`{"grace": ["5s"]}`, "grace: a list, but --grace takes one value"},
	} {
		file := filepath.Join(dir, name+".json")
		if err := os.WriteFile(file, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		fs, _, _, _, _ := flags()
		_, err := Apply(fs, file, func(string) string { return "" }, "config")
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: err = %v, want %q naming the file", name, err, c.want)
		}
	}
	fs, _, _, _, _ := flags()
	if _, err := Apply(fs, filepath.Join(dir, "missing.json"), func(string) string { return "" }); err == nil {
		t.Error("a missing config file given explicitly is not an error")
	}
}

func TestRedactedAndJobsDir(t *testing.T) {
	t.Parallel()
	r := Redacted(map[string]Source{"api-token": {Value: "abc"}, "listen": {Value: "x"}})
	if r["api-token"].Value != "[REDACTED]" || r["listen"].Value != "x" {
		t.Fatalf("%v", r)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "c.json")
	if err := os.WriteFile(file, []byte(`{"jobs_dir": "/srv/jobs"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LOGISTD_CONFIG": file}
	if got := JobsDir(func(k string) string { return env[k] }); got != "/srv/jobs" {
		t.Errorf("JobsDir from config = %s", got)
	}
	env["LOGIST_JOBS_DIR"] = "/env"
	if got := JobsDir(func(k string) string { return env[k] }); got != "/env" {
		t.Errorf("JobsDir with env = %s", got)
	}
}

// TestRedactedURLPassword: a database URL keeps its host and user in
// --print-config, never its password; DatabaseURL reads the environment,
// then the config file.
func TestRedactedURLPassword(t *testing.T) {
	r := Redacted(map[string]Source{"database-url": {Value: "postgres://logist:s3cret@db:5432/logist"}, "other": {Value: "postgres://db/x"}})
	if got := r["database-url"].Value; strings.Contains(got, "s3cret") || !strings.Contains(got, "logist:REDACTED@db:5432") {
		t.Fatalf("redacted URL: %q", got)
	}
	if got := r["other"].Value; got != "postgres://db/x" {
		t.Fatalf("URL without password changed: %q", got)
	}
	file := filepath.Join(t.TempDir(), "logistd.json")
	if err := os.WriteFile(file, []byte(`{"database_url": "postgres://file/db"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"LOGISTD_CONFIG": file}
	if got := DatabaseURL(func(k string) string { return env[k] }); got != "postgres://file/db" {
		t.Fatalf("from the file: %q", got)
	}
	env["LOGISTD_DATABASE_URL"] = "postgres://env/db"
	if got := DatabaseURL(func(k string) string { return env[k] }); got != "postgres://env/db" {
		t.Fatalf("from the environment: %q", got)
	}
}

// A list setting is a JSON list in the config file, as it is a
// comma-separated list on the command line and in its variable.
func TestListSettingFromFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for body, want := range map[string][]string{
		`{"console_disable": ["rollback", "play"]}`: {"rollback", "play"},
		`{"console_disable": "rollback,play"}`:      {"rollback", "play"},
		`{"console_disable": ["a,b"]}`:              {"a,b"},
		`{"console_disable": []}`:                   {},
	} {
		file := filepath.Join(dir, "c.json")
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		got := fs.StringSlice("console-disable", nil, "")
		if _, err := Apply(fs, file, func(string) string { return "" }); err != nil {
			t.Errorf("%s: %v", body, err)
			continue
		}
		if strings.Join(*got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: console-disable %q, want %q", body, *got, want)
		}
	}
}
