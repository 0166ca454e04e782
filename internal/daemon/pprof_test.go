package daemon

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// getAs GETs url with token (none when ""): its status and body.
func getAs(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestPprofOnlyWithFlag: /debug/pprof/ answers on the --listen server only
// when --pprof is given, and then to the steward only, as the console's
// actions do: no token is 401 (loopback included), a viewer's 403.
func TestPprofOnlyWithFlag(t *testing.T) {
	for _, on := range []bool{false, true} {
		dir := t.TempDir()
		tokens := t.TempDir()
		steward, viewer := filepath.Join(tokens, "steward"), filepath.Join(tokens, "viewer")
		if err := os.WriteFile(steward, []byte("steward-token-0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(viewer, []byte("viewer-token-0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		addr := freeAddr(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 1, Listen: addr, Grace: time.Second, Pprof: on,
				Console: ConsoleOptions{TokenFile: steward, ViewerTokenFile: viewer}}, discard())
		}()
		waitFor(t, "readyz", func() bool { code, _ := get(t, "http://"+addr+"/readyz"); return code == 200 })
		for _, p := range []string{"/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/symbol"} {
			for _, c := range []struct {
				who, token string
				want       int
			}{
				{"anonymous", "", http.StatusUnauthorized},
				{"viewer", "viewer-token-0123456789abcdef", http.StatusForbidden},
				{"steward", "steward-token-0123456789abcdef", http.StatusOK},
			} {
				want := c.want
				if !on {
					want = http.StatusNotFound
					if c.token == "" {
						continue // the console's own answer to a stranger
					}
				}
				code, body := getAs(t, "http://"+addr+p, c.token)
				if code != want {
					t.Errorf("pprof=%v: %s as %s = %d, want %d (%.100q)", on, p, c.who, code, want, body)
				}
				if on && c.want != http.StatusOK && strings.Contains(body, os.Args[0]) {
					t.Errorf("pprof=%v: %s as %s showed the command line: %.200q", on, p, c.who, body)
				}
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
