package console

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/testkit"
)

// writeHumanMercury writes the shipped jobs/demo-mercury as job id in the
// jobs folder dir, with its party Estoria played by a person (provider
// human).
func writeHumanMercury(t testing.TB, dir, id string) {
	t.Helper()
	root := filepath.Join("..", "..", "jobs", "demo-mercury")
	b, err := os.ReadFile(filepath.Join(root, "job.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	m["job_id"] = id
	m["agents"].(map[string]any)["estoria"] = map[string]any{"provider": "human"}
	testkit.WriteJob(t, dir, id, m)
	for _, f := range []string{"scenario.json", "ima-assessment.md"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, id, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// playView is GET /api/v1/jobs/{id}/play?as=party's view.
func (w *world) playView(id, party string) (int, map[string]any) {
	w.t.Helper()
	code, body := w.call("GET", "/api/v1/jobs/"+id+"/play?as="+url.QueryEscape(party), viewerTok, nil)
	v, _ := body["view"].(map[string]any)
	if code == 200 && v == nil {
		w.t.Fatalf("play view of %s: no view in %v", party, body)
	}
	if code != 200 {
		return code, body
	}
	return code, v
}

func controls(v map[string]any) []string {
	out := []string{}
	for _, c := range v["controls"].([]any) {
		out = append(out, c.(string))
	}
	return out
}

// Issue 20 item 6: a person plays a negotiation party from the console's
// API as with logist play: the view holds only what the party may see
// and offers only the moves open now; each move goes through the steward
// (a signed record, the job back to PENDING) and the game takes it.
func TestPlayAPI(t *testing.T) {
	w := newWorld(t)
	writeHumanMercury(t, w.k.Dir, "m")
	w.k.Run("m")
	if m := w.k.Load("m"); m.Run.ErrorCode != "AWAITING_REPLY" {
		t.Fatalf("m is %s %s", m.Status, m.Run.ErrorCode)
	}

	// Estoria's turn in its private conversation: answer, skip or end it.
	code, v := w.playView("m", "estoria")
	if code != 200 {
		t.Fatalf("view: %d %v", code, v)
	}
	if got := controls(v); !slices.Equal(got, []string{"answer", "skip", "end_conversation"}) {
		t.Errorf("controls in the conversation %v", got)
	}
	raw, _ := json.Marshal(v)
	for _, hidden := range []string{"Federation, Caldera will not let a ban", "Arvania wants limits by 2030", "STANCE_UPDATE", "Belmora burns coal"} {
		if strings.Contains(string(raw), hidden) {
			t.Errorf("Estoria's view shows %q", hidden)
		}
	}
	if p, _ := v["private"].(string); !strings.Contains(p, "Estoria's coast has the highest mercury levels") {
		t.Errorf("Estoria's view lacks its brief: %q", p)
	}
	// Its partner waits for nothing: no move is open to it.
	if code, v := w.playView("m", "riverwatch"); code != 200 || len(controls(v)) != 0 || v["turn"] != nil {
		t.Errorf("riverwatch's view: %d %v", code, v)
	}
	// The chair is no party; a party must be named.
	if code, body := w.playView("m", "japan"); code != 400 {
		t.Errorf("the chair's view: %d %v", code, body)
	}
	if code, body := w.call("GET", "/api/v1/jobs/m/play", viewerTok, nil); code != 400 {
		t.Errorf("no party: %d %v", code, body)
	}

	// Moves refused: a viewer's, another party's, an unknown one, none.
	if code, _ := w.call("POST", "/api/v1/jobs/m/play", viewerTok, map[string]any{"as": "estoria", "move": "skip"}); code != 403 {
		t.Errorf("a viewer's move: %d", code)
	}
	if code, body := w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "riverwatch", "answer": map[string]any{"text": "mine"}}); code != 409 {
		t.Errorf("a move out of turn: %d %v", code, body)
	}
	if code, body := w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "estoria", "move": "shout"}); code != 400 {
		t.Errorf("an unknown move: %d %v", code, body)
	}
	if code, body := w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "estoria"}); code != 400 {
		t.Errorf("no move: %d %v", code, body)
	}
	if code, body := w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "estoria", "answer": map[string]any{"vote": "YES"}}); code != 400 || errCode(body) != "invalid_reply" && !strings.Contains(body["error"].(map[string]any)["message"].(string), "not a valid answer") {
		t.Errorf("an answer off the turn's schema: %d %v", code, body)
	}
	if m := w.k.Load("m"); m.Run.ErrorCode != "AWAITING_REPLY" {
		t.Fatalf("a refused move changed m: %s %s", m.Status, m.Run.ErrorCode)
	}

	// Estoria's message (agent text: hostile markup), filed as a reply.
	code, body := w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "estoria", "move": "answer",
		"answer": map[string]any{"text": "Coalition, stand with us. " + hostile, "issues": []string{"emissions"}}})
	if code != 200 || jobStatus(body) != "PENDING" {
		t.Fatalf("estoria's message: %d %v", code, body)
	}
	w.k.Run("m")
	// Its partner sees it, escaped on the page.
	if _, v := w.playView("m", "riverwatch"); !strings.Contains(mustJSON(t, v), "Coalition, stand with us.") {
		t.Errorf("riverwatch does not see Estoria's message: %v", v)
	}
	cl := w.browser()
	w.login(cl, viewerTok)
	_, page := get(t, cl, w.srv.URL+"/jobs/m/play?as=riverwatch")
	if !strings.Contains(page, "Coalition, stand with us. &lt;script&gt;") || strings.Contains(page, "<script>alert") || strings.ContainsAny(page, "\x1b\x07") {
		t.Errorf("the play page does not escape a message:\n%s", page)
	}
	if strings.Contains(page, `id="form-`) {
		t.Error("a viewer is offered a move")
	}

	// Its final word's turn: it ends the conversation early instead.
	if _, v := w.playView("m", "estoria"); !slices.Contains(controls(v), "end_conversation") {
		t.Fatalf("estoria's final turn: %v", v)
	}
	code, body = w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "estoria", "move": "end_conversation"})
	if code != 200 || jobStatus(body) != "PENDING" || !strings.Contains(body["message"].(string), "ended the private conversation") {
		t.Fatalf("end the conversation: %d %v", code, body)
	}
	w.k.Run("m")
	// In the debate no conversation is open: ending one is not offered,
	// and refused if asked.
	_, v = w.playView("m", "estoria")
	if got := controls(v); !slices.Equal(got, []string{"answer", "skip"}) {
		t.Errorf("controls in the debate %v", got)
	}
	if code, body := w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "estoria", "move": "end_conversation"}); code != 409 {
		t.Errorf("end a conversation in the debate: %d %v", code, body)
	}
	if code, body := w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "estoria", "move": "skip"}); code != 200 {
		t.Fatalf("skip: %d %v", code, body)
	}
	w.k.Run("m")
	// The vote: its answer through JSON.
	_, v = w.playView("m", "estoria")
	if turn, _ := v["turn"].(map[string]any); turn == nil || turn["schema"] != "negotiation-vote.json" {
		t.Fatalf("the vote's turn: %v", v)
	}
	if code, body := w.call("POST", "/api/v1/jobs/m/play", stewardTok, map[string]any{"as": "estoria", "answer": map[string]any{"vote": "YES"}}); code != 200 {
		t.Fatalf("vote: %d %v", code, body)
	}

	// Each move is a signed steward record by the console, naming the party.
	moves := map[string]int{}
	entries, err := history.ReadEntries(filepath.Join(w.k.Dir, "m"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range entries {
		if r.Type == history.TypeSteward && r.Steward.Changes["participant"] == "estoria" {
			if r.Steward.User != "console" || r.Sig == "" {
				t.Errorf("move record %+v", r.Steward)
			}
			moves[r.Steward.Command]++
		}
	}
	if moves["reply"] != 3 || moves["decide"] != 1 {
		t.Errorf("move records %v, want 3 replies (message, skip, vote) and 1 decide", moves)
	}
	ledger := readAll(t, filepath.Join(w.k.Dir, "m", "negotiation", "ledger.json"))
	for _, want := range []string{`"ended_by": "estoria"`, "TURN_PASSED: estoria skipped the turn"} {
		if !strings.Contains(ledger, want) {
			t.Errorf("the ledger lacks %s", want)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
