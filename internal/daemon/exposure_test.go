package daemon

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/pgtest"
)

// startOnce runs logistd --once on jobs with a console (token files as
// given) and returns its log.
func startOnce(t *testing.T, jobs string, co ConsoleOptions) *logBuffer {
	t.Helper()
	lb := &logBuffer{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Run(ctx, Options{JobsDir: jobs, MaxParallel: 1, Once: true, Listen: freeAddr(t), Grace: time.Second, Console: co},
		slog.New(slog.NewJSONHandler(lb, nil)))
	if err != nil {
		t.Fatalf("logistd on %s: %v", jobs, err)
	}
	return lb
}

// At start logistd warns (seed 004 §7 lines, WARN) when it runs as root,
// when its jobs folder lets other users write into it, and when a console
// token file is readable by others; a folder and files as deploy/systemd
// makes them draw no warning but root's.
func TestStartWarnsOfExposure(t *testing.T) {
	root := os.Geteuid() == 0
	folder := func(t *testing.T, mode os.FileMode, owner int) string {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "jobs")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		if owner >= 0 {
			if err := os.Chown(dir, owner, owner); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	type folderCase struct {
		name    string
		mode    os.FileMode
		owner   int // -1: this user
		exposed bool
	}
	cases := []folderCase{
		{"0700, the daemon's", 0o700, -1, false},
		{"0770, the daemon's", 0o770, -1, false},
		{"1777 (sticky), the daemon's", 0o777 | os.ModeSticky, -1, false},
		{"0777, the daemon's", 0o777, -1, true},
	}
	if root {
		cases = append(cases,
			folderCase{"0777, nobody's", 0o777, nobody, true},
			folderCase{"0770, nobody's", 0o770, nobody, true},
			folderCase{"1777 (sticky), nobody's", 0o777 | os.ModeSticky, nobody, true},
			folderCase{"0700, nobody's", 0o700, nobody, false})
	} else if os.Getenv("CI") == "true" {
		t.Fatal("folders owned by another user need root, and CI=true may not skip them")
	} else {
		t.Log("SKIP: not root: the cases of a folder owned by another user are not tested")
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jobs := folder(t, c.mode, c.owner)
			tok := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tok, []byte("steward-token-0123456789abcdef\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			lb := startOnce(t, jobs, ConsoleOptions{TokenFile: tok})
			line := lb.seedLine(t, codes.JobsDirExposed)
			if (line != nil) != c.exposed {
				t.Errorf("JOBS_DIR_EXPOSED logged: %v, want %v\n%s", line != nil, c.exposed, lb.b.String())
			}
			if line != nil && (line["level"] != "WARN" || line["path"] != jobs || !strings.Contains(line["fix"].(string), "chmod 0700 "+jobs)) {
				t.Errorf("JOBS_DIR_EXPOSED line: %v", line)
			}
			if line := lb.seedLine(t, codes.RunsAsRoot); (line != nil) != root || (line != nil && line["level"] != "WARN") {
				t.Errorf("RUNS_AS_ROOT logged: %v, running as root: %v", line, root)
			}
			if line := lb.seedLine(t, codes.TokenExposed); line != nil {
				t.Errorf("a 0600 token file was warned of: %v", line)
			}
		})
	}
	// Token files readable by others, given or the one logistd made.
	jobs := folder(t, 0o700, -1)
	dir := t.TempDir()
	steward, viewer := filepath.Join(dir, "steward"), filepath.Join(dir, "viewer")
	if err := os.WriteFile(steward, []byte("steward-token-0123456789abcdef\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(viewer, []byte("viewer-token-0123456789abcdef\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	lb := startOnce(t, jobs, ConsoleOptions{TokenFile: steward, ViewerTokenFile: viewer})
	for _, f := range []string{steward, viewer} {
		if !lb.has("error_code", codes.TokenExposed, "path", f, "level", "WARN", "fix", "chmod 0600 "+f) {
			t.Errorf("no TOKEN_FILE_EXPOSED line for %s:\n%s", f, lb.b.String())
		}
	}
	lb.seedLine(t, codes.TokenExposed) // its fields are seed 004 §7's
	made := filepath.Join(jobs, ".logist", "console-token")
	startOnce(t, jobs, ConsoleOptions{}) // makes it, 0600
	if err := os.Chmod(made, 0o644); err != nil {
		t.Fatal(err)
	}
	if lb := startOnce(t, jobs, ConsoleOptions{}); !lb.has("error_code", codes.TokenExposed, "path", made) {
		t.Errorf("no TOKEN_FILE_EXPOSED line for the token logistd made, made 0644:\n%s", lb.b.String())
	}
}

// startNodeOnce starts logistd as a cluster node (Main, as the binary
// does) on jobs with args more, waits for its start, stops it and returns
// its log, whole: the start-up checks run before the node claims a job.
func startNodeOnce(t *testing.T, url, id, jobs string, args ...string) *logBuffer {
	t.Helper()
	lb := &logBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, append([]string{"logistd", "--database-url", url, "--node-id", id, "--jobs-dir", jobs, "--lease", "5s"}, args...),
			func(string) string { return "" }, io.Discard, lb)
	}()
	deadline := time.After(60 * time.Second)
	for !lb.has("msg", "cluster node started", "node", id) {
		select {
		case code := <-done:
			t.Fatalf("node %s exited %d before it started:\n%s", id, code, lb.b.String())
		case <-deadline:
			t.Fatalf("node %s did not start in 60s:\n%s", id, lb.b.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("node %s: exit %d:\n%s", id, code, lb.b.String())
	}
	return lb
}

// A cluster node makes file mode's start-up checks (warnExposure): its
// working folder is an intake folder whose manifests it runs, and the
// console it serves reads token files. A token file of a console the node
// does not serve (a non-loopback --listen without --insecure-listen) is
// not read, and not warned of.
func TestClusterStartWarnsOfExposure(t *testing.T) {
	url := pgtest.DB(t)
	root := os.Geteuid() == 0
	setup := func(t *testing.T, dirMode, tokMode os.FileMode) (jobs, tok string) {
		t.Helper()
		jobs = filepath.Join(t.TempDir(), "work")
		if err := os.Mkdir(jobs, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(jobs, dirMode); err != nil {
			t.Fatal(err)
		}
		tok = filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tok, []byte("steward-token-0123456789abcdef\n"), tokMode); err != nil {
			t.Fatal(err)
		}
		return jobs, tok
	}
	checkRoot := func(t *testing.T, lb *logBuffer) {
		t.Helper()
		if line := lb.seedLine(t, codes.RunsAsRoot); (line != nil) != root || (line != nil && line["level"] != "WARN") {
			t.Errorf("RUNS_AS_ROOT logged: %v, running as root: %v\n%s", line, root, lb.b.String())
		}
	}

	t.Run("exposed", func(t *testing.T) {
		jobs, tok := setup(t, 0o777, 0o644)
		lb := startNodeOnce(t, url, "exposed", jobs, "--listen", freeAddr(t), "--console-token-file", tok)
		line := lb.seedLine(t, codes.JobsDirExposed)
		if line == nil || line["level"] != "WARN" || line["path"] != jobs || !strings.Contains(line["fix"].(string), "chmod 0700 "+jobs) {
			t.Errorf("JOBS_DIR_EXPOSED line for a 0777 working folder: %v\n%s", line, lb.b.String())
		}
		if !lb.has("error_code", codes.TokenExposed, "path", tok, "level", "WARN", "fix", "chmod 0600 "+tok) {
			t.Errorf("no TOKEN_FILE_EXPOSED line for the console's 0644 token file:\n%s", lb.b.String())
		}
		lb.seedLine(t, codes.TokenExposed) // its fields are seed 004 §7's
		checkRoot(t, lb)
	})
	t.Run("as deployed", func(t *testing.T) {
		jobs, tok := setup(t, 0o700, 0o600)
		lb := startNodeOnce(t, url, "deployed", jobs, "--listen", freeAddr(t), "--console-token-file", tok)
		for _, code := range []string{codes.JobsDirExposed, codes.TokenExposed} {
			if line := lb.seedLine(t, code); line != nil {
				t.Errorf("a 0700 folder and a 0600 token file were warned of: %v", line)
			}
		}
		checkRoot(t, lb)
	})
	t.Run("console not served, relative folder", func(t *testing.T) {
		jobs, tok := setup(t, 0o777, 0o644)
		t.Chdir(filepath.Dir(jobs)) // the line names the folder by its absolute path, as file mode's
		lb := startNodeOnce(t, url, "unserved", filepath.Base(jobs), "--listen", "0.0.0.0:0", "--console-token-file", tok)
		if !strings.Contains(lb.b.String(), "console not served") {
			t.Fatalf("the console was served on 0.0.0.0 without --insecure-listen:\n%s", lb.b.String())
		}
		if line := lb.seedLine(t, codes.TokenExposed); line != nil {
			t.Errorf("the token file of a console not served was warned of: %v", line)
		}
		if line := lb.seedLine(t, codes.JobsDirExposed); line == nil || line["path"] != jobs {
			t.Errorf("JOBS_DIR_EXPOSED line for a 0777 working folder: %v, want path %s\n%s", line, jobs, lb.b.String())
		}
		checkRoot(t, lb)
	})
}
