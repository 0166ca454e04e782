package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
)

func TestEveryCommandHasAnExample(t *testing.T) {
	for _, c := range commands {
		if strings.TrimSpace(c.example) == "" {
			t.Errorf("command %s has no example", c.name)
			continue
		}
		code, out, _ := runMain(t, nil, "help", c.name)
		_, examples, found := strings.Cut(out, "\nExamples:\n")
		if code != 0 || !found || !strings.Contains(examples, "logist "+c.name) {
			t.Errorf("logist help %s: exit %d, no examples:\n%s", c.name, code, out)
		}
	}
}

func TestHiddenCommandNotInHelp(t *testing.T) {
	_, out, _ := runMain(t, nil, "help")
	if strings.Contains(out, "__jobs") {
		t.Fatalf("help lists the hidden __jobs:\n%s", out)
	}
	for _, name := range []string{"watch", "logs", "completion"} {
		if !strings.Contains(out, "\n  "+name+" ") {
			t.Errorf("help does not list %s:\n%s", name, out)
		}
	}
}

func TestJobsCommand(t *testing.T) {
	t.Parallel()
	jobs := t.TempDir()
	writeJob(t, jobs, "beta", jobJSON("PENDING", ""))
	writeJob(t, jobs, "alpha", jobJSON("PENDING", ""))
	if err := os.WriteFile(filepath.Join(jobs, "bare.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runMain(t, map[string]string{"LOGIST_JOBS_DIR": jobs}, "__jobs")
	if code != 0 || out != "alpha\nbeta\n" {
		t.Fatalf("exit %d: %q", code, out)
	}
}

// shellEnv puts a "logist" that is this test binary acting as logist
// first on PATH, with jobs in $LOGIST_JOBS_DIR and another folder.
func shellEnv(t *testing.T) (env []string, jobs, other string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "logist")); err != nil {
		t.Fatal(err)
	}
	jobs, other = t.TempDir(), t.TempDir()
	writeJob(t, jobs, "alpha", jobJSON("PENDING", ""))
	writeJob(t, jobs, "beta", jobJSON("PENDING", ""))
	writeJob(t, other, "gamma", jobJSON("PENDING", ""))
	env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LOGIST_CLI_TEST_MAIN=1", "LOGIST_JOBS_DIR="+jobs, "HOME="+t.TempDir(),
		"GORACE=atexit_sleep_ms=0") // under -race, do not wait a second at each exit
	return env, jobs, other
}

func script(t *testing.T, shell string) string {
	t.Helper()
	code, out, errs := runMain(t, nil, "completion", shell)
	if code != 0 || out == "" {
		t.Fatalf("logist completion %s: exit %d: %s", shell, code, errs)
	}
	p := filepath.Join(t.TempDir(), "logist."+shell)
	if err := os.WriteFile(p, []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCompletionUnknownShell(t *testing.T) {
	code, _, errs := runMain(t, nil, "completion", "tcsh")
	if code != ExitUsage || !strings.Contains(errs, "use bash, zsh or fish") {
		t.Fatalf("exit %d: %s", code, errs)
	}
}

func TestCompletionScriptsParse(t *testing.T) {
	for _, c := range []struct {
		shell string
		check []string
	}{
		{"bash", []string{"bash", "-n"}},
		{"zsh", []string{"zsh", "-n"}},
		{"fish", []string{"fish", "--no-execute"}},
	} {
		t.Run(c.shell, func(t *testing.T) {
			if _, err := exec.LookPath(c.check[0]); err != nil {
				if c.shell == "bash" {
					t.Fatalf("bash is required to test the bash completion: %v", err)
				}
				if os.Getenv("CI") == "true" {
					t.Fatalf("%s is not installed (make test-tools installs it)", c.shell)
				}
				t.Skipf("SKIPPED: %s is not installed, its completion script is not checked (apt-get install %s)", c.shell, c.shell)
			}
			p := script(t, c.shell)
			out, err := exec.Command(c.check[0], append(c.check[1:], p)...).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %v: %v\n%s", c.check[0], c.check[1:], err, out)
			}
		})
	}
}

// bashComplete runs the bash completion function for each list of words
// (the last is the one being completed), all in one bash, and returns the
// candidates of each, sorted and joined by spaces.
func bashComplete(t *testing.T, p string, env []string, cases [][]string) []string {
	t.Helper()
	prog := `source "$1"` + "\n"
	for _, words := range cases {
		var q []string
		for _, w := range words {
			q = append(q, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		prog += `COMP_WORDS=(` + strings.Join(q, " ") + `); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _logist; printf '%s\n' "${COMPREPLY[@]}" ---` + "\n"
	}
	cmd := exec.Command("bash", "-c", prog, "bash", p)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash completion: %v\n%s", err, out)
	}
	var res []string
	for _, part := range strings.Split(string(out), "---\n") {
		got := strings.Fields(part)
		sort.Strings(got)
		res = append(res, strings.Join(got, " "))
	}
	return res
}

func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("bash is required: %v", err)
	}
	p := script(t, "bash")
	env, _, other := shellEnv(t)
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"logist", "st"}, "status"},
		{[]string{"logist", "w"}, "watch"},
		{[]string{"logist", "status", ""}, "alpha beta"},
		{[]string{"logist", "status", "alpha", ""}, ""},
		{[]string{"logist", "verify", "alpha", ""}, "alpha beta"},
		{[]string{"logist", "--jobs-dir", other, "logs", ""}, "gamma"},
		// A global flag's value before the command word is not the command.
		{[]string{"logist", "--database-url", "postgres://h/db", "st"}, "status"},
		{[]string{"logist", "logs", "--jobs-dir", "=", other, ""}, "gamma"},
		{[]string{"logist", "logs", "--"}, "--database-url --exit-on-finish --follow --format --help --jobs-dir"},
		{[]string{"logist", "watch", "--e"}, "--exit-on-finish"},
		{[]string{"logist", "status", "--format", ""}, "json markdown text"},
		{[]string{"logist", "validate", "--kind", "r"}, "response"},
		{[]string{"logist", "resume", "alpha", "--guidance", ""}, ""},
		{[]string{"logist", "help", "com"}, "completion"},
		{[]string{"logist", "completion", ""}, "bash fish zsh"},
	}
	var words [][]string
	for _, c := range cases {
		words = append(words, c.words)
	}
	got := bashComplete(t, p, env, words)
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("complete %q: got %q, want %q", c.words, got[i], c.want)
		}
	}
}

func TestFishCompletion(t *testing.T) {
	if _, err := exec.LookPath("fish"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("fish is not installed (make test-tools installs it)")
		}
		t.Skipf("SKIPPED: fish is not installed, its completions are not exercised")
	}
	p := script(t, "fish")
	env, _, other := shellEnv(t)
	cases := []struct{ line, want string }{
		{"logist status ", "alpha beta"},
		{"logist --jobs-dir " + other + " history ", "gamma"},
		{"logist logs --exit", "--exit-on-finish"},
		{"logist completion ", "bash fish zsh"},
	}
	args := []string{"--no-config", "-c", "source $argv[1]; for line in $argv[2..-1]; complete -C $line; echo ---; end", p}
	for _, c := range cases {
		args = append(args, c.line)
	}
	cmd := exec.Command("fish", args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fish completion: %v\n%s", err, out)
	}
	parts := strings.Split(string(out), "---\n")
	for i, c := range cases {
		var got []string
		for _, l := range strings.Split(parts[i], "\n") {
			if l != "" {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != c.want {
			t.Errorf("complete %q: got %q, want %q", c.line, got, c.want)
		}
	}
}

// completionJobs is a jobs folder whose jobs can take different steward
// commands; stuck has checkpoints of every kind.
func completionJobs(t *testing.T) string {
	t.Helper()
	jobs := t.TempDir()
	for id, st := range map[string]string{"pend": "PENDING", "draft": "DRAFT", "stuck": "INTERVENTION_REQUIRED", "done": "SUCCESS", "gone": "CANCELED"} {
		writeJob(t, jobs, id, jobJSON(st, ""))
	}
	l, _, err := history.Open(filepath.Join(jobs, "stuck"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	snap := &history.SnapshotRef{Listing: "snapshots/x.json", Files: 1}
	for _, cp := range []*history.RecoveryPoint{
		{CheckpointID: "cp-start", ResumePhase: "work", Snapshot: snap},
		{CheckpointID: "cp-0000-work", ResumePhase: "review", Snapshot: snap},
		{CheckpointID: "cp-0001-review", ResumePhase: "", Snapshot: snap}, // where it ended
		{CheckpointID: "cp-0002-work", ResumePhase: "review"},             // its snapshot failed
	} {
		if err := l.Append(&history.Record{Type: history.TypeRecoveryPoint, RecoveryPoint: cp}); err != nil {
			t.Fatal(err)
		}
	}
	return jobs
}

// Completion offers a steward command only the jobs it can act on now
// (the lifecycle table's rule, as the commands check it), and after
// rollback --to only the checkpoints rollback takes.
func TestCompletionOffersWhatTheCommandTakes(t *testing.T) {
	jobs := completionJobs(t)
	env, _, _ := shellEnv(t)
	env = append(env, "LOGIST_JOBS_DIR="+jobs)
	cases := []struct {
		words []string
		want  string
	}{
		{[]string{"logist", "resume", ""}, "stuck"},
		{[]string{"logist", "halt", ""}, "draft pend stuck"},
		{[]string{"logist", "activate", ""}, "draft"},
		{[]string{"logist", "rollback", ""}, "done stuck"},
		{[]string{"logist", "status", ""}, "done draft gone pend stuck"},
		{[]string{"logist", "rollback", "stuck", "--to", ""}, "cp-0000-work cp-start"},
		{[]string{"logist", "rollback", "--guidance", "g", "stuck", "--to", "cp-0"}, "cp-0000-work"},
		{[]string{"logist", "rollback", "stuck", "--to", "=", ""}, "cp-0000-work cp-start"},
		{[]string{"logist", "rollback", "--to", ""}, ""},
		{[]string{"logist", "history", "stuck", "--"}, "--database-url --format --help --jobs-dir --last --record"},
	}
	var words [][]string
	for _, c := range cases {
		words = append(words, c.words)
	}
	got := bashComplete(t, script(t, "bash"), env, words)
	for i, c := range cases {
		if got[i] != c.want {
			t.Errorf("bash: complete %q: got %q, want %q", c.words, got[i], c.want)
		}
	}

	if _, err := exec.LookPath("fish"); err != nil {
		t.Skipf("SKIPPED (bash checked): fish is not installed")
	}
	lines := []struct{ line, want string }{
		{"logist resume ", "stuck"},
		{"logist --jobs-dir " + jobs + " activate ", "draft"},
		{"logist rollback stuck --to ", "cp-0000-work cp-start"},
		{"logist rollback --reason r stuck --to ", "cp-0000-work cp-start"},
	}
	args := []string{"--no-config", "-c", "source $argv[1]; for line in $argv[2..-1]; complete -C $line; echo ---; end", script(t, "fish")}
	for _, c := range lines {
		args = append(args, c.line)
	}
	cmd := exec.Command("fish", args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fish completion: %v\n%s", err, out)
	}
	parts := strings.Split(string(out), "---\n")
	for i, c := range lines {
		var got []string
		for _, l := range strings.Split(parts[i], "\n") {
			if l != "" {
				got = append(got, strings.SplitN(l, "\t", 2)[0])
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != c.want {
			t.Errorf("fish: complete %q: got %q, want %q", c.line, got, c.want)
		}
	}
}
