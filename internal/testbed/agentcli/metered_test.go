package agentcli

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/meter"
	"github.com/logist/logist/internal/testbed/modelstub"
)

// Every program runs contained, its model traffic through logistd's
// metering proxy: the program holds a call token, the proxy the key, and
// the proxy's figures are the cost of record.

// requireMetered checks that a successful call went through the proxy:
// the response says its cost is metered, the stub saw the steward's key
// (injected by the proxy) and never a call token, and the call ran in
// the sandbox with the proxy as its only network.
func (p *cliProgram) requireMetered(t *testing.T, r *jobRun, resp *history.Response, main []modelstub.Logged) {
	t.Helper()
	if !resp.Metered {
		t.Errorf("response not metered by the proxy: %+v", resp)
	}
	for _, l := range main {
		var sawKey bool
		for name, vs := range l.Header {
			for _, v := range vs {
				if strings.Contains(v, meter.TokenPrefix) {
					t.Errorf("the stub got a call token in %s", name)
				}
				sawKey = sawKey || strings.Contains(v, p.key)
			}
		}
		if !sawKey {
			t.Errorf("the stub never saw the steward's key %q: %v", p.key, l.Header)
		}
	}
	if !strings.Contains(r.Log, "metering proxy listening") {
		t.Errorf("logistd did not start its metering proxy:\n%s", tail(r.Log, 3000))
	}
	if asked := r.Manifest.Sandbox; asked != "none" && (r.Manifest.Run.Sandbox == "" || r.Manifest.Run.Sandbox == "none") {
		t.Errorf("job ran under sandbox %q, want contained", r.Manifest.Run.Sandbox)
	}
}

// Every preset reaches the proxy on every layer: under Landlock alone the
// proxy's address is picked per call by the launcher, which fills it into
// the arguments, the environment and the preset's config files (Codex's
// config.toml, Cline's providers.json); uncontained, the proxy's loopback
// address is written directly.

func TestCodexLandlockAlone(t *testing.T) {
	o := codex.succeedsUnder(t, "landlock", [2]float64{0.01499, 0.01501})
	requireLayer(t, o.r, "landlock")
}

func TestCodexUncontained(t *testing.T) {
	o := codex.succeedsUnder(t, "none", [2]float64{0.01499, 0.01501})
	requireLayer(t, o.r, "none")
}

func TestClineLandlockAlone(t *testing.T) {
	o := cline.succeedsUnder(t, "landlock", gpt4oMiniCost)
	requireLayer(t, o.r, "landlock")
}

func TestClineUncontained(t *testing.T) {
	o := cline.succeedsUnder(t, "none", gpt4oMiniCost)
	requireLayer(t, o.r, "none")
}

// requireLayer checks which layer the job's calls ran under.
func requireLayer(t *testing.T, r *jobRun, want string) {
	t.Helper()
	if got := r.Manifest.Run.Sandbox; got != want {
		t.Errorf("job ran under sandbox %q, want %q", got, want)
	}
}

// TestClaudeCodeBudgetCut: a job whose cost budget is less than what the
// first reply's input costs. Anthropic reports the input in the stream's
// first event: the proxy debits it, finds the budget spent and cuts the
// stream there. The job halts HALTED_COST, its cost of record is that one
// event's (an overshoot of at most one chunk), and claude never got an
// answer.
func TestClaudeCodeBudgetCut(t *testing.T) {
	p := claudeCode
	bin, s := p.start(t)
	// The first event's figures (message_start): 1200 input tokens, 200
	// of them cached, and the one output token Anthropic reports there,
	// as claude-sonnet-4-5 ($3, $0.30 and $15 per million).
	chunk := (1000*3 + 200*0.3 + 1*15) / 1e6
	r := p.run(t, "cut", bin, s, nil, map[string]any{"cost_threshold": 0.1, // cents: $0.001
		"limits": map[string]any{"backoff_initial_ms": 10, "max_api_retries": 3, "call_timeout_seconds": 180}})
	r.requireStatus(t, "HALTED_COST")
	rs := r.responses()
	if len(rs) != 1 || rs[0].ErrorCode != "BUDGET_SPENT" || !rs[0].Metered {
		t.Fatalf("responses %s (metered %v)%s", codes(rs), len(rs) > 0 && rs[0].Metered, errorDetails(rs))
	}
	got := r.Manifest.Metrics.CumulativeCost / 100
	if math.Abs(rs[0].CostUSD-chunk) > 1e-9 || math.Abs(got-chunk) > 1e-9 {
		t.Errorf("cost of record $%v (job $%v), want the one event that crossed the budget: $%v", rs[0].CostUSD, got, chunk)
	}
	if over := got - 0.001; over > chunk {
		t.Errorf("overshoot $%v, more than one chunk ($%v)", over, chunk)
	}
	if n := len(mainRequests(s)); n != 1 {
		t.Errorf("%d model requests reached the stub, want the one that was cut", n)
	}
	if !strings.Contains(r.Log, `"error_code":"BUDGET_SPENT"`) {
		t.Errorf("no BUDGET_SPENT in the log:\n%s", tail(r.Log, 3000))
	}
}

// TestClaudeCodeCostDisagreement: the steward prices the model at ten
// times the table (command.price); claude prices the call with its own
// table. The proxy's figure (the steward's price) is the cost of record,
// claude's is kept beside it, and the answer carries a COST_DISAGREEMENT
// warning (logist status shows an answer's warnings).
func TestClaudeCodeCostDisagreement(t *testing.T) {
	p := claudeCode
	bin, s := p.start(t)
	price := map[string]any{"input_per_mtok": 30, "output_per_mtok": 150, "cached_input_per_mtok": 3}
	r := p.run(t, "disagree", bin, s, map[string]any{"price": price}, nil)
	r.requireStatus(t, "SUCCESS")
	rs := r.responses()
	if len(rs) != 1 {
		t.Fatalf("responses %s%s", codes(rs), errorDetails(rs))
	}
	resp := rs[0]
	// Two replies: 2000 uncached input, 400 cached, 160 output.
	want := (2000*30 + 400*3 + 160*150) / 1e6
	if math.Abs(resp.CostUSD-want) > 1e-9 || !resp.Metered {
		t.Errorf("cost of record $%v (metered %v), want the proxy's $%v", resp.CostUSD, resp.Metered, want)
	}
	if resp.ReportedCostUSD == nil || *resp.ReportedCostUSD < 0.0085 || *resp.ReportedCostUSD > 0.0086 {
		t.Errorf("claude's own report %v, want about $0.00852", resp.ReportedCostUSD)
	}
	ws, _ := json.Marshal(resp.Warnings)
	if !strings.Contains(string(ws), "COST_DISAGREEMENT") {
		t.Errorf("warnings %s lack COST_DISAGREEMENT", ws)
	}
	if !strings.Contains(r.Log, `"error_code":"COST_DISAGREEMENT"`) {
		t.Errorf("no COST_DISAGREEMENT in the log:\n%s", tail(r.Log, 3000))
	}
}
