package parliament

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/schemas/schemastest"
)

const minimalGame = `{"representatives":[{"id":"rep_1","motives":["cost"]},{"id":"rep_2","motives":["speed"]}]}`

func TestConfigDefaultsAndErrors(t *testing.T) {
	c, err := ParseConfig(json.RawMessage(minimalGame))
	if err != nil {
		t.Fatal(err)
	}
	if c.MaxRounds != 6 || c.VoteRule.Rule != "majority" || c.VoteRule.Tie != "fails" || c.Representatives[0].Name != "rep_1" ||
		c.Representatives[0].Agent != "rep_1" || *c.Representatives[1].Temperature != 50 {
		t.Errorf("defaults %+v", c)
	}
	rep := func(extra string) string {
		return `{"representatives":[{"id":"rep_1","motives":["cost"]` + extra + `},{"id":"rep_2","motives":["speed"]}]`
	}
	for raw, want := range map[string]string{
		``:                                     "game: missing",
		`null`:                                 "game: missing",
		`{"representatives":[]}`:               "game.representatives: 0 members",
		`{"bogus":1,"representatives":[]}`:     `game: unknown field "bogus"`,
		rep(`,"colour":"red"`) + `}`:           `game: unknown field "colour"`,
		rep(``) + `,"max_rounds":0}`:           "",
		rep(``) + `,"max_rounds":99}`:          "game.max_rounds: 99",
		rep(``) + `,"max_rounds":"6"}`:         "game: cannot unmarshal string",
		rep(``) + `,"vote_rule":{"rule":"x"}}`: "game.vote_rule.rule",
		rep(``) + `,"vote_rule":{"tie":"x"}}`:  "game.vote_rule.tie",
		rep(``) + `,"drafter":"rep_9"}`:        "game.drafter",
		rep(``) + `,"speaker":"Bad Name"}`:     "game.speaker",
		rep(``) + `,"files":["../x"]}`:         "game.files[0]",
		rep(``) + `,"files":["/etc/x"]}`:       "game.files[0]",
		rep(``) + `,"lines":{"skip":[]}}`:      "game.lines.skip",
		rep(``) + `} trailing`:                 "game: trailing data",
		`{"representatives":[{"id":"Rep 1","motives":["a"]},{"id":"rep_2","motives":["b"]}]}`:     "game.representatives[0].id",
		`{"representatives":[{"id":"speaker","motives":["a"]},{"id":"rep_2","motives":["b"]}]}`:   "game.representatives[0].id: \"speaker\" is reserved",
		`{"representatives":[{"id":"rep_1","motives":["a"]},{"id":"rep_1","motives":["b"]}]}`:     "game.representatives[1].id: \"rep_1\" appears twice",
		`{"representatives":[{"id":"rep_1","motives":[]},{"id":"rep_2","motives":["b"]}]}`:        "game.representatives[0].motives",
		`{"representatives":[{"id":"rep_1","motives":["a","a"]},{"id":"rep_2","motives":["b"]}]}`: "game.representatives[0].motives[1]",
		`{"representatives":[{"id":"rep_1","motives":[" "]},{"id":"rep_2","motives":["b"]}]}`:     "game.representatives[0].motives[0]",
		rep(`,"temperature":101`) + `}`: "game.representatives[0].temperature",
	} {
		_, err := ParseConfig(json.RawMessage(raw))
		if want == "" {
			if err != nil {
				t.Errorf("%s: %v", raw, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want %q", raw, err, want)
		}
	}
	// A bad config fails the load, naming the field.
	if _, err := (Game{}).Load(deliberation.Env{Config: json.RawMessage(`{"representatives":[{"id":"rep_1"}]}`)}); err == nil || !strings.Contains(err.Error(), "game.") {
		t.Errorf("load with a bad config: %v", err)
	}
}

func TestSpeakerFromManifest(t *testing.T) {
	c, _ := ParseConfig(json.RawMessage(minimalGame))
	dir := t.TempDir()
	if got := speakerAgent(c, dir); got != "" {
		t.Errorf("no manifest: %q", got)
	}
	h := &harness{ws: dir}
	writeWS(t, h, "job.json", `{"agents":{"speaker":{"provider":"script"},"rep_1":{}}}`)
	if got := speakerAgent(c, dir); got != "speaker" {
		t.Errorf("manifest speaker agent: %q", got)
	}
	c.Speaker = "builtin"
	if got := speakerAgent(c, dir); got != "" {
		t.Errorf("builtin forced: %q", got)
	}
	c.Speaker = "chair"
	if got := speakerAgent(c, dir); got != "chair" {
		t.Errorf("named: %q", got)
	}
}

// FuzzParliamentConfig: the decoder never panics, and what it accepts
// loads and plays its first steps.
func FuzzParliamentConfig(f *testing.F) {
	f.Add([]byte(minimalGame))
	f.Add([]byte(`{"representatives":[{"id":"a","motives":["x"],"temperature":0},{"id":"b","motives":["y"]}],"max_rounds":1,"vote_rule":{"rule":"unanimity"},"files":["a/b.md"],"lines":{"skip":["{name}"]}}`))
	f.Add([]byte(`{"representatives":[{"id":"a","motives":["x"]}]}`))
	f.Add([]byte(`{"representatives":null}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer schemastest.NoFault(t)()
		c, err := ParseConfig(json.RawMessage(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "game") {
				t.Fatalf("error without the field: %v", err)
			}
			return
		}
		if len(c.Representatives) < 2 || c.MaxRounds < 1 {
			t.Fatalf("accepted %+v", c)
		}
		s, err := Game{}.Load(deliberation.Env{Config: json.RawMessage(data), Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		var msgs []deliberation.Message
		for i := 0; i < 3; i++ {
			st, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Turns) > 0 || st.Wait != "" {
				return
			}
			msgs = append(msgs, st.Emit...)
			if s, err = (Game{}).Load(deliberation.Env{Config: json.RawMessage(data), Messages: msgs, Now: fixedNow}); err != nil {
				t.Fatal(err)
			}
		}
	})
}
