package negotiation

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas/schemastest"
)

func TestConfigErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name string
		cfg  map[string]any
		edit func(sc map[string]any)
		want []string // substrings of the error
	}{
		{"unknown config field", map[string]any{"speaker": []any{"aster"}}, nil, []string{"game", "speaker"}},
		{"cap above the seed's 5", map[string]any{"messages_per_side": 6}, nil, []string{"game", "/messages_per_side"}},
		{"conversation with a stranger", map[string]any{"conversations": []any{[]any{"aster", "zorro"}}}, nil, []string{"game.conversations[0][1]", "zorro", "scenario.json"}},
		{"conversation with oneself", map[string]any{"conversations": []any{[]any{"aster", "aster"}}}, nil, []string{"game.conversations[0]", "itself"}},
		{"speaker listed twice", map[string]any{"speakers": []any{"aster", "aster"}}, nil, []string{"game.speakers[1]", "twice"}},
		{"agent for a stranger", map[string]any{"agents": map[string]any{"zorro": "x"}}, nil, []string{"game.agents.zorro"}},
		{"scenario outside the job", map[string]any{"scenario": "../scenario.json"}, nil, []string{"game.scenario", "outside"}},
		{"scenario missing", map[string]any{"scenario": "nope.json"}, nil, []string{"game.scenario", "nope.json"}},
		{"unknown scenario field", nil, func(sc map[string]any) { sc["rounds"] = 3 }, []string{"scenario.json", "rounds"}},
		{"acceptance above 1", nil, func(sc map[string]any) {
			stance(sc, 0, "allocation")["acceptance"].(map[string]any)["a1"] = 1.5
		}, []string{"scenario.json", "/parties/0/stances/allocation/acceptance/a1", "1"}},
		{"option missing from acceptance", nil, func(sc map[string]any) {
			delete(stance(sc, 1, "allocation")["acceptance"].(map[string]any), "a3")
		}, []string{"scenario.json", "parties[1].stances.allocation.acceptance.a3", "missing"}},
		{"acceptance of no option", nil, func(sc map[string]any) {
			stance(sc, 1, "allocation")["acceptance"].(map[string]any)["m1"] = 0.5
		}, []string{"scenario.json", "parties[1].stances.allocation.acceptance.m1", "not an option"}},
		{"preferred unacceptable", nil, func(sc map[string]any) {
			stance(sc, 1, "allocation")["preferred"] = "a3"
		}, []string{"scenario.json", "parties[1].stances.allocation.preferred", "null"}},
		{"fallback unknown", nil, func(sc map[string]any) {
			stance(sc, 0, "allocation")["fallbacks"] = []any{"a9"}
		}, []string{"scenario.json", "parties[0].stances.allocation.fallbacks[0]", "a9"}},
		{"stance missing", nil, func(sc map[string]any) {
			delete(party(sc, 2)["stances"].(map[string]any), "monitoring")
		}, []string{"scenario.json", "parties[2].stances.monitoring", "missing"}},
		{"duplicate party", nil, func(sc map[string]any) { party(sc, 1)["id"] = "aster" }, []string{"scenario.json", "parties[1].id", "duplicate"}},
		{"party named like the chair", nil, func(sc map[string]any) { party(sc, 1)["id"] = "chair" }, []string{"parties[1].id"}},
		{"party named steward", nil, func(sc map[string]any) { party(sc, 1)["id"] = "steward" }, []string{"parties[1].id", "reserved"}},
		{"unknown line situation", nil, func(sc map[string]any) {
			sc["chair"].(map[string]any)["lines"] = map[string]any{"persuade": []any{"Vote YES."}}
		}, []string{"scenario.json", "/chair/lines"}},
		{"no voting party", nil, func(sc map[string]any) {
			for i := range sc["parties"].([]any) {
				party(sc, i)["voting"] = false
			}
		}, []string{"scenario.json", "no voting party"}},
		{"duplicate opening id", nil, func(sc map[string]any) {
			party(sc, 0)["openings"] = []any{map[string]any{"id": "x", "text": "a"}, map[string]any{"id": "x", "text": "b"}}
		}, []string{"parties[0].openings[1].id", "duplicate"}},
		{"one option", nil, func(sc map[string]any) {
			sc["issues"].([]any)[0].(map[string]any)["options"] = []any{map[string]any{"id": "a1", "title": "A"}}
		}, []string{"scenario.json", "/issues/0/options"}},
	}
	for _, c := range cases {
		sc := demoScenario(t)
		if c.edit != nil {
			c.edit(sc)
		}
		env := setup(t, sc, c.cfg, 1)
		_, err := Game{}.Load(env)
		if err == nil {
			t.Errorf("%s: accepted", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
	if _, err := (Game{}).Load(deliberation.Env{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "game: missing") {
		t.Errorf("no game config: %v", err)
	}
	if _, err := ParseConfig([]byte(`{"scenario": "s.json"} {}`)); err == nil {
		t.Error("trailing data accepted")
	}
}

func party(sc map[string]any, i int) map[string]any {
	return sc["parties"].([]any)[i].(map[string]any)
}

func stance(sc map[string]any, i int, issue string) map[string]any {
	return party(sc, i)["stances"].(map[string]any)[issue].(map[string]any)
}

func FuzzNegotiationConfig(f *testing.F) {
	raw, err := os.ReadFile("../../../jobs/demo-negotiation/scenario.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"scenario": "scenario.json", "conversations": [["aster", "brenn"]], "messages_per_side": 2, "speakers": ["delm"], "helper": "h", "window": 1, "max_sentences": 3}`))
	f.Add([]byte(`{"scenario": ""}`))
	f.Add([]byte(`null`))
	f.Add(raw)
	f.Add([]byte(`{"title":"t","chair":{"id":"c","name":"C"},"parties":[{"id":"a","name":"A","voting":true,"openings":[{"id":"1","text":"x"}],"stances":{}}],"issues":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer schemastest.NoFault(t)()
		if c, err := ParseConfig(data); err == nil {
			if c.Scenario == "" || c.MessagesPerSide < 1 || c.MessagesPerSide > 5 || c.Window < 1 {
				t.Fatalf("accepted config %+v", c)
			}
			for _, p := range c.Conversations {
				if len(p) != 2 {
					t.Fatalf("accepted pair %v", p)
				}
			}
		}
		sc, err := ParseScenario("scenario.json", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "scenario.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		// An accepted scenario is playable: every party has a stance per
		// issue over exactly its options, in [0,1] or null.
		for _, p := range sc.Parties {
			for _, is := range sc.Issues {
				s := p.Stances[is.ID]
				if s == nil || len(s.Acceptance) != len(is.Options) || s.Acceptance[s.Preferred] == nil {
					t.Fatalf("accepted stance %s/%s: %+v", p.ID, is.ID, s)
				}
				for _, a := range s.Acceptance {
					if a != nil && (*a < 0 || *a > 1) {
						t.Fatalf("accepted acceptance %v", *a)
					}
				}
			}
		}
		cfg, _ := ParseConfig([]byte(`{"scenario": "scenario.json"}`))
		g, err := newGame(cfg, sc, 1, data)
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := newState(g).next(); m == nil {
			t.Fatal("a new game does not start")
		}
		b, _ := json.Marshal(sc)
		if _, err := ParseScenario("scenario.json", b); err != nil {
			t.Fatalf("re-encoded scenario rejected: %v", err)
		}
	})
}

// The scenario may be named in the agents' workspace: a named pipe there is
// refused, naming the field, not waited on at every turn.
func TestScenarioThatIsANamedPipe(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(map[string]any{"scenario": "pipe.json"})
	done := make(chan error, 1)
	go func() {
		_, err := (Game{}).Load(deliberation.Env{Dir: dir, Config: cfg})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "game.scenario") || !strings.Contains(err.Error(), "named pipe") {
			t.Errorf("Load: %v, want game.scenario refused as a named pipe", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Load still waiting on the named pipe after 10 s")
	}
}

// A scenario named in the workspace resolves inside it, as a role's prompt
// file does: there it loads, and a link an agent made from there to
// another role's private home is refused, not read.
func TestScenarioInTheWorkspaceStaysInIt(t *testing.T) {
	raw, err := os.ReadFile("../../../jobs/demo-negotiation/scenario.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ws := filepath.Join(dir, "workspace")
	home := filepath.Join(dir, "agent-home", "other")
	for _, d := range []string{ws, home} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, "scenario.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "secret.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../agent-home/other/secret.json", filepath.Join(ws, "linked.json")); err != nil {
		t.Fatal(err)
	}
	env := func(name string) deliberation.Env {
		cfg, _ := json.Marshal(map[string]any{"scenario": name})
		return deliberation.Env{Dir: dir, Workspace: ws, Config: cfg}
	}
	if _, err := (Game{}).Load(env("workspace/scenario.json")); err != nil {
		t.Fatalf("a scenario in the workspace: %v", err)
	}
	if _, err := (Game{}).Load(env("workspace/linked.json")); err == nil || !strings.Contains(err.Error(), "game.scenario") || !strings.Contains(err.Error(), "outside") {
		t.Errorf("a scenario linked out of the workspace: %v, want it refused", err)
	}
}
