package meter

import (
	"net/http"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/testbed/modelstub"
)

// longAnswer streams in 40 deltas of 100 bytes: 25 estimated output tokens
// each.
var longAnswer = strings.Repeat("0123456789", 400)

const longChunks = 40

// cutMarks is how each API's stream says it was cut, in the form its SDKs
// throw.
var cutMarks = map[string][]string{
	"anthropic": {"event: error\n", `"billing_error"`, codes.BudgetSpent},
	"chat":      {`data: {"error":{`, codes.BudgetSpent},
	"responses": {"event: response.failed\n", `"status":"failed"`, "event: error\n", codes.BudgetSpent},
	"gemini":    {`{"error":{"code":402`, codes.BudgetSpent},
}

// deltaMarks count the answer's deltas a client saw.
var deltaMarks = map[string]string{
	"anthropic": `"type":"text_delta"`,
	"chat":      `"content":"0123`,
	"responses": "event: response.output_text.delta",
	"gemini":    `"text":"0123`,
}

// TestBudgetCutsTheStream: for each API, a budget smaller than the call's
// cost cuts the stream in the middle with the API's error, the connection
// breaks (a CLI cannot take the stream for complete), and the budget is
// overshot by at most the one chunk that crossed it.
func TestBudgetCutsTheStream(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: longAnswer, Chunks: longChunks,
		Usage: modelstub.Usage{Input: 1000, Output: 1000}}, nil)
	for _, ac := range apiCases {
		t.Run(ac.name, func(t *testing.T) {
			price := priceOf(t, ac.model)
			chunkCost := Cost(Usage{Output: 25}, price)
			// Room for the input and about ten chunks: the input is
			// reported (Anthropic) or estimated from the request's size
			// (the others) before the text flows.
			limit := Cost(Usage{Input: 1000}, price) + 10*chunkCost
			b := newBudget(limit)
			tok := h.issue("job-cut-"+ac.name, b)
			resp, body, readErr := do(t, ac.request(h.root, tok, ac.model, true))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if readErr == nil {
				t.Errorf("the cut stream ended cleanly; it must break off")
			}
			for _, m := range cutMarks[ac.name] {
				if !strings.Contains(body, m) {
					t.Errorf("the cut stream lacks %q:\n%s", m, tail(body))
				}
			}
			seen := strings.Count(body, deltaMarks[ac.name])
			if seen == 0 || seen >= longChunks {
				t.Errorf("the client saw %d of %d deltas; the cut must come in the middle", seen, longChunks)
			}
			tot, _ := h.proxy.Revoke(tok)
			if !tot.Cut || !tot.BudgetSpent() || !tot.Estimated {
				t.Errorf("totals %+v: want cut, budget spent, estimated", tot)
			}
			spent, debits := b.state()
			if !closeTo(spent, tot.USD) {
				t.Errorf("budget debited %v, totals say %v", spent, tot.USD)
			}
			over := spent - limit
			last := debits[len(debits)-1]
			if over < 0 || over > last || last > chunkCost*1.0001 {
				t.Errorf("overshoot %v, crossing debit %v, one chunk %v: the overshoot must be at most one chunk", over, last, chunkCost)
			}
			// The next request is refused before it reaches the provider.
			before := h.stub.MainTurns()
			resp, body, _ = do(t, ac.request(h.root, h.issue("job-cut-"+ac.name, b), ac.model, true))
			if resp.StatusCode != http.StatusPaymentRequired || !strings.Contains(body, codes.BudgetSpent) {
				t.Errorf("after the cut: %d %s", resp.StatusCode, body)
			}
			if h.stub.MainTurns() != before {
				t.Errorf("a request on a spent budget reached the provider")
			}
		})
	}
}

func tail(s string) string {
	if len(s) > 1500 {
		return "…" + s[len(s)-1500:]
	}
	return s
}

// TestWholeResponseOvershootsByItselfThenRefuses: a response that does not
// stream is paid when it arrives; it is passed on even though it spends
// the budget, and the next request is refused before forwarding.
func TestWholeResponseOvershootsByItselfThenRefuses(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: `{"action":"COMPLETED"}`, Usage: stubUsage}, nil)
	for _, ac := range apiCases {
		t.Run(ac.name, func(t *testing.T) {
			full := Cost(wantUsage, priceOf(t, ac.model))
			b := newBudget(full / 2)
			tok := h.issue("job-whole-"+ac.name, b)
			resp, body, err := do(t, ac.request(h.root, tok, ac.model, false))
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("%d %v %s", resp.StatusCode, err, body)
			}
			tot, _ := h.proxy.Totals(tok)
			if !closeTo(tot.USD, full) || tot.Cut {
				t.Errorf("totals %+v, want the full cost %v", tot, full)
			}
			before := len(h.stub.Requests())
			resp, body, _ = do(t, ac.request(h.root, tok, ac.model, false))
			if resp.StatusCode != http.StatusPaymentRequired || !strings.Contains(body, "budget is spent") {
				t.Errorf("second request: %d %s", resp.StatusCode, body)
			}
			if len(h.stub.Requests()) != before {
				t.Errorf("the refused request reached the provider")
			}
			tot, _ = h.proxy.Revoke(tok)
			if tot.Refused[codes.BudgetSpent] != 1 || tot.Requests != 1 || !tot.BudgetSpent() {
				t.Errorf("totals %+v", tot)
			}
		})
	}
}

// TestSpentBudgetRefusesBeforeForwarding: with nothing left, not even the
// first request goes out, streaming or not.
func TestSpentBudgetRefusesBeforeForwarding(t *testing.T) {
	h := newHarness(t, modelstub.Options{Answer: "x", Usage: stubUsage}, nil)
	b := newBudget(0)
	for _, ac := range apiCases {
		tok := h.issue("job-spent", b)
		for _, stream := range []bool{false, true} {
			resp, body, _ := do(t, ac.request(h.root, tok, ac.model, stream))
			if resp.StatusCode != http.StatusPaymentRequired {
				t.Errorf("%s: %d %s", ac.name, resp.StatusCode, body)
			}
		}
	}
	if n := len(h.stub.Requests()); n != 0 {
		t.Errorf("%d requests reached the provider", n)
	}
}
