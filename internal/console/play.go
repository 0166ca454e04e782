package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/logist/logist/internal/steward"
)

// A person plays a game's party (provider "human") from the console as
// with logist play: the party's view is the steward's PlayView (what the
// party may see, nothing more), and the page offers the moves of its
// Controls, no other, each posted to /api/v1/jobs/{id}/play, which makes
// it through steward.Play as the CLI does.

// playGames are the workflows whose parties a person may play (their
// effect is an effect.Viewer): the job page offers their play page.
var playGames = []string{"negotiation"}

// playMessage is one message of a party's view, as the page shows it
// (agent text stays text: the template escapes it).
type playMessage struct {
	ID, From, Type, Text string
	Round                int
	Private              bool
}

// playControl is one move the page offers.
type playControl struct {
	Control string
	Label   string
	Fields  []formField // the answer's form (ControlAnswer)
}

// party is the ?as= of a play request: there and given once, as its
// routes' query table (playQuery) holds it before the handler runs.
func party(r *http.Request) string { return r.URL.Query().Get("as") }

// playView is the job id and the party's view a play request (API or
// page) asks for.
func (c *Console) playView(r *http.Request) (string, *steward.PlayView, error) {
	id, err := jobID(r)
	if err != nil {
		return "", nil, err
	}
	v, err := c.o.Steward.PlayView(id, party(r))
	return id, v, err
}

func (c *Console) apiPlay(w http.ResponseWriter, r *http.Request) {
	id, v, err := c.playView(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	ok(w, "", map[string]any{"job_id": id, "view": v})
}

func (c *Console) pagePlay(w http.ResponseWriter, r *http.Request) {
	id, v, err := c.playView(r)
	if err != nil {
		c.failErr(w, r, err)
		return
	}
	msgs := make([]playMessage, 0, len(v.Messages))
	for _, m := range v.Messages {
		text, _ := m.Content["text"].(string)
		msgs = append(msgs, playMessage{ID: m.ID, From: m.From, Type: m.Type, Text: text, Round: m.Round, Private: len(m.Audience) > 0})
	}
	d := map[string]any{"ID": id, "View": v, "Messages": msgs, "Done": r.URL.Query().Get("done")}
	if v.Turn != nil {
		d["Instruction"] = v.Turn.Instruction(false)
		d["Prompt"] = v.Turn.Prompt
	}
	if !c.disabled("play") {
		d["Controls"] = playControls(v)
	}
	c.render(w, r, "play", d)
}

// playControls are the forms of the moves v.Controls opens, in its order.
func playControls(v *steward.PlayView) []playControl {
	out := make([]playControl, 0, len(v.Controls))
	for _, ctl := range v.Controls {
		pc := playControl{Control: ctl}
		switch ctl {
		case steward.ControlAnswer:
			pc.Label, pc.Fields = "Your move", formFields(v.Turn.Schema)
		case steward.ControlSkip:
			pc.Label = "Skip your turn"
		default:
			pc.Label = strings.ToUpper(ctl[:1]) + strings.ReplaceAll(ctl[1:], "_", " ")
		}
		out = append(out, pc)
	}
	return out
}

// playMove is the steward.Move a play action's body asks for: its move
// (a control; "answer" when it carries only an answer).
func playMove(b ActionBody) (steward.Move, error) {
	mv := steward.Move{Control: b.Move, Answer: b.Answer}
	if mv.Control == "" && len(b.Answer) > 0 {
		mv.Control = steward.ControlAnswer
	}
	switch {
	case mv.Control == "":
		return mv, usagef("move is required: %s, or a game's input such as end_conversation", strings.Join([]string{steward.ControlAnswer, steward.ControlSkip}, ", "))
	case mv.Control == steward.ControlAnswer && len(mv.Answer) == 0:
		return mv, usagef("answer (the answer's JSON, or the form's fields) is required")
	case mv.Control != steward.ControlAnswer && len(mv.Answer) > 0:
		return mv, usagef("an answer goes with move %q only", steward.ControlAnswer)
	}
	if err := mv.Check(); err != nil {
		return mv, usagef("%v", err) // as checkTexts says a reason over its limit
	}
	return mv, nil
}

func isPlayGame(workflow string) bool { return slices.Contains(playGames, workflow) }
