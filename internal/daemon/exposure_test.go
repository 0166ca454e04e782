package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/codes"
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
