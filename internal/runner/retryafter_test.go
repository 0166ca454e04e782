package runner

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
)

// TestRetryAfterWaitIsSaid: a server's Retry-After of 99999999 seconds is
// waited five minutes, and the log line of the failed call says how long
// and why (before, the job sat RUNNING for five minutes on a line that
// said only "HTTP 429: slow down"); a retry without one says its backoff.
func TestRetryAfterWaitIsSaid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		retryAfter time.Duration
		want       string
	}{
		{"retry-after", agent.MaxRetryAfter, "HTTP 429: slow down; asked again in 5m0s (the server's Retry-After, waited up to 5m0s)"},
		{"backoff", 0, "HTTP 429: slow down; asked again in "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var logs bytes.Buffer
			f.Env.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
			f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
				return nil, &agent.Error{Code: codes.RateLimited, Transient: true, RetryAfter: tc.retryAfter, Msg: "HTTP 429: slow down"}
			})
			j := job(okSupervisor(), okSupervisor())
			j["limits"] = map[string]any{"max_api_retries": 1, "backoff_initial_ms": 100}
			f.WriteJob("j", j)
			f.Run("j")
			if sl := f.backoffs(); len(sl) != 1 || tc.retryAfter > 0 && sl[0] != 5*time.Minute {
				t.Fatalf("backoffs %v", sl)
			}
			if !strings.Contains(logs.String(), tc.want) {
				t.Errorf("no log line says %q:\n%s", tc.want, logs.String())
			}
			if tc.retryAfter == 0 && strings.Contains(logs.String(), "Retry-After") {
				t.Errorf("a backoff said to be the server's:\n%s", logs.String())
			}
		})
	}
}
