package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/cluster"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/pgstore"
	"github.com/logist/logist/internal/pgtest"
	"github.com/logist/logist/internal/testkit"
)

// startNode runs logistd as a cluster node (Main, as the binary does)
// until the test ends; it returns the address of its --listen.
func startNode(t *testing.T, url, id string, getenv func(string) string) (string, *testkit.SyncBuffer) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testkit.SyncBuffer
	done := make(chan int)
	go func() {
		done <- Main(ctx, []string{"logistd", "--database-url", url, "--node-id", id, "--jobs-dir", t.TempDir(),
			"--listen", addr, "--lease", "5s", "--log-format", "text"}, getenv, &out, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("node %s: exit %d: %s", id, code, errb.String())
		}
	})
	return addr, &errb
}

func waitJob(t *testing.T, s clusterstore.Store, id string, want lifecycle.Status, log fmt.Stringer) *clusterstore.Job {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		j, err := s.Job(context.Background(), id)
		if err == nil && j.Status == want {
			return j
		}
		if time.Now().After(deadline) {
			st := "missing"
			if err == nil {
				st = string(j.Status)
			}
			t.Fatalf("job %s is %s after 60s, want %s; node log:\n%s", id, st, want, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClusterNodeMetersCalls: a cluster node meters an http agent's
// model traffic through the daemon's proxy, as file mode does: the
// response record says metered, the proxy's priced figure is the job's
// cost of record and the database's debit, and the node's /metrics
// count the call's cost and the job's start under its containment.
func TestClusterNodeMetersCalls(t *testing.T) {
	url := pgtest.DB(t)
	const key = "sk-cluster-metered-7"
	t.Setenv("LOGIST_TEST_HTTP_KEY", key)
	const answer = `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"Done over HTTP."}`
	var mu sync.Mutex
	var auths, encodings []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		encodings = append(encodings, r.Header.Get("Accept-Encoding"))
		mu.Unlock()
		content, _ := json.Marshal(answer)
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range []string{
			`{"id":"c1","choices":[{"index":0,"delta":{"content":` + string(content) + `}}]}`,
			`{"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			`{"id":"c1","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":500}}`,
			"[DONE]"} {
			fmt.Fprintf(w, "data: %s\n\n", e)
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()

	s, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr, log := startNode(t, url, "n1", func(k string) string { return map[string]string{"LOGIST_TEST_HTTP_KEY": key}[k] })
	job := fmt.Sprintf(`{"schema_version": 1, "job_id": "metered", "task_description": "t", "cost_threshold": 100,
 "agents": {
  "worker": {"provider": "http", "http": {"base_url": %q, "model": "stub-model", "api_key_env": "LOGIST_TEST_HTTP_KEY",
    "price": {"input_per_mtok": 10, "output_per_mtok": 20}}},
  "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}},
 "metrics": {"cumulative_cost": 0, "cumulative_time_seconds": 0}}`, srv.URL+"/v1")
	if _, err := cluster.Submit(context.Background(), s, []byte(job)); err != nil {
		t.Fatal(err)
	}
	j := waitJob(t, s, "metered", lifecycle.Success, log)
	// 1000 input tokens at $10/Mtok and 500 output at $20/Mtok: $0.02.
	if j.SpentMicros != 20000 {
		t.Errorf("the database debited %d µ$, want 20000 (the proxy's $0.02)", j.SpentMicros)
	}
	lines, err := s.History(context.Background(), "metered")
	if err != nil {
		t.Fatal(err)
	}
	var metered int
	for _, l := range lines {
		var line struct {
			Rec struct {
				Response *struct {
					Metered bool    `json:"metered"`
					Cost    float64 `json:"cost_usd"`
				} `json:"response"`
			} `json:"rec"`
		}
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatalf("history line %s: %v", l, err)
		}
		if r := line.Rec; r.Response != nil && r.Response.Metered {
			metered++
			if r.Response.Cost != 0.02 {
				t.Errorf("metered response cost $%v, want $0.02", r.Response.Cost)
			}
		}
	}
	if metered != 1 {
		t.Errorf("%d metered responses in the history, want 1 (the http worker's)", metered)
	}
	mu.Lock()
	if len(auths) != 1 || auths[0] != "Bearer "+key || encodings[0] != "identity" {
		t.Errorf("upstream saw Authorization %q, Accept-Encoding %q: want the real key, injected by the proxy", auths, encodings)
	}
	mu.Unlock()

	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, re := range []string{
		`(?m)^logistd_job_starts_by_sandbox_total\{sandbox="[a-z+]+"\} 1$`,
		`(?m)^logistd_agent_cost_usd_total\{provider="http"\} 0\.02$`,
		`(?m)^logist_cluster_claims_total\{node="n1"\} 1$`,
	} {
		if !regexp.MustCompile(re).Match(body) {
			t.Errorf("/metrics lacks %s:\n%s", re, grepLines(string(body), "sandbox", "cost_usd", "claims"))
		}
	}
}

func grepLines(s string, words ...string) string {
	var out []string
	for l := range strings.Lines(s) {
		for _, w := range words {
			if strings.Contains(l, w) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "")
}
