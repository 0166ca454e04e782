package agent

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

// fakeMeter records the grants it is given and answers Close with totals.
type fakeMeter struct {
	grants []MeterGrant
	closed []string
	totals MeterTotals
}

func (f *fakeMeter) Open(g MeterGrant) (string, error) {
	f.grants = append(f.grants, g)
	return "logist-meter-tok", nil
}
func (f *fakeMeter) Close(tok string) MeterTotals {
	f.closed = append(f.closed, tok)
	return f.totals
}
func (f *fakeMeter) Root() string { return "http://127.0.0.1:9999" }
func (f *fakeMeter) BaseURL(root, api string) string {
	if api == APIOpenAI {
		return root + "/v1"
	}
	return root
}
func (f *fakeMeter) Compare(t MeterTotals, reported float64) (bool, string) {
	return t.USD != reported, "metered vs reported"
}

// A metered preset call: the program gets the proxy as its base URL and
// a call token as its key (never the steward's key, which goes to the
// proxy with the steward's base URL as the upstream); the proxy's figures
// are the result's cost and tokens, the program's own report kept and
// compared.
func TestPresetCommandMetered(t *testing.T) {
	prog, req := setupFake(t)
	var seen map[string]string
	p := fakePreset(func(out *RunOutput) (*Parsed, error) {
		seen = envOf(t, out)
		return &Parsed{Answer: []byte(`{"action":"COMPLETED"}`), Tokens: &history.Tokens{Input: 1, Output: 1}, CostUSD: 0.5, CostReported: true}, nil
	})
	p.API, p.KeyVar = APIOpenAI, "FAKE_API_KEY"
	env := map[string]string{"FAKE_API_KEY": "k-123", "PATH": os.Getenv("PATH")}
	fm := &fakeMeter{totals: MeterTotals{USD: 0.25, Tokens: history.Tokens{Input: 100, Output: 10}, Requests: 2}}
	price := &manifest.Price{InputPerMTok: 2, OutputPerMTok: 10}
	base := listeningURL(t, "/v1")
	c := &PresetCommand{Preset: p, Model: "m1", Getenv: func(k string) string { return env[k] },
		Cfg: manifest.Command{Preset: "fake", Program: prog, BaseURL: base, Price: price}}
	res, err := c.Call(WithMeter(context.Background(), fm, NewBudget(1)), req)
	if err != nil {
		t.Fatal(err)
	}
	if seen["key"] != "logist-meter-tok" || seen["base"] != "http://127.0.0.1:9999/v1" {
		t.Errorf("the program got key %q base %q; want the token and the proxy", seen["key"], seen["base"])
	}
	if len(fm.grants) != 1 || len(fm.closed) != 1 {
		t.Fatalf("grants %+v closed %v", fm.grants, fm.closed)
	}
	g := fm.grants[0]
	if g.Key != "k-123" || g.BaseURL != base || g.API != APIOpenAI || g.Job != "j" || g.Call != "000003" ||
		g.Model != "m1" || g.Price != price || g.Budget == nil {
		t.Errorf("grant %+v", g)
	}
	if res.CostUSD != 0.25 || res.Tokens == nil || res.Tokens.Input != 100 || res.Metered == nil ||
		res.Metered.ReportedUSD == nil || *res.Metered.ReportedUSD != 0.5 || res.Metered.Disagreement == "" {
		t.Errorf("result cost %v tokens %+v metered %+v", res.CostUSD, res.Tokens, res.Metered)
	}
}

// A call that met a spent budget fails BUDGET_SPENT (not retried) with
// the proxy's cost, whatever the program made of the cut stream; one
// refused for an unpriced model fails MODEL_UNPRICED.
func TestPresetCommandMeteredRefusals(t *testing.T) {
	for _, c := range []struct {
		totals MeterTotals
		code   string
	}{
		{MeterTotals{USD: 0.03, Cut: true, BudgetSpent: true, Requests: 1}, codes.BudgetSpent},
		{MeterTotals{Refused: map[string]int{codes.ModelUnpriced: 1}}, codes.ModelUnpriced},
	} {
		prog, req := setupFake(t)
		p := fakePreset(func(out *RunOutput) (*Parsed, error) {
			return &Parsed{Err: &Error{Code: codes.APIError, Transient: true, Msg: "stream ended"}}, nil
		})
		p.API, p.KeyVar = APIAnthropic, "FAKE_API_KEY"
		fm := &fakeMeter{totals: c.totals}
		pc := &PresetCommand{Preset: p, Getenv: func(k string) string { return map[string]string{"PATH": os.Getenv("PATH")}[k] },
			Cfg: manifest.Command{Preset: "fake", Program: prog}}
		_, err := pc.Call(WithMeter(context.Background(), fm, nil), req)
		ae, ok := AsError(err)
		if !ok || ae.Code != c.code || ae.Transient || ae.CostUSD != c.totals.USD || ae.Metered == nil || !strings.Contains(ae.Msg, "stream ended") {
			t.Errorf("%s: %+v", c.code, err)
		}
		if g := fm.grants[0]; g.BaseURL != "" || g.Key != "" {
			t.Errorf("grant without base URL or key: %+v", g)
		}
	}
}

// The budget a step's calls share: debits add up, and it is spent once
// nothing is left.
func TestBudget(t *testing.T) {
	b := NewBudget(0.01)
	if left, ok := b.Debit(0.004); !ok || left < 0.0059 || left > 0.0061 {
		t.Fatalf("after $0.004: %v %v", left, ok)
	}
	if _, ok := b.Debit(0.006); ok {
		t.Fatal("a spent budget says ok")
	}
	if _, ok := b.Debit(-0.001); !ok {
		t.Fatal("a give-back does not reopen the budget")
	}
}

// A refusal for an unpriced model tells the steward the field that
// prices the agent: http.price for the http provider, command.price for a
// preset.
func TestMeterRefusalNamesThePriceField(t *testing.T) {
	for _, c := range []struct{ field, want string }{{"http.price", "set http.price "}, {"", "set command.price "}} {
		mc := &meterCall{m: &fakeMeter{totals: MeterTotals{Refused: map[string]int{codes.ModelUnpriced: 1}}}, token: "t", priceField: c.field}
		_, err := mc.settle(nil, &Error{Code: codes.APIError, Msg: "HTTP 400"}, nil)
		ae, ok := AsError(err)
		if !ok || ae.Code != codes.ModelUnpriced || !strings.Contains(ae.Msg, c.want) {
			t.Errorf("%q: %+v", c.field, err)
		}
	}
}
