package cli

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/steward"
	"github.com/logist/logist/internal/textsafe"
)

// logist play: a person plays a game's party (provider "human"): the
// party's view and waiting turn, and seed 004's controls — answer, skip
// the turn, end the private conversation early.
var cmdPlay = &command{
	name: "play", args: "JOB --as PARTY [--say TEXT [--issues ID,...] [--concede ISSUE:OPTION:toward|away]... | --vote YES|NO [--reason TEXT] | --answer JSON | --skip | --end-conversation] [--prompt]",
	summary: "play a game's party (provider human): without an action, what the party may see and its waiting turn; with one, its move",
	example: "  logist play talks --as estoria\n  logist play talks --as estoria --say 'We can live with 2035.' --issues emissions --concede emissions:e2:toward\n" +
		"  logist play talks --as estoria --vote YES --reason 'A date we can meet.'\n  logist play talks --as estoria --end-conversation\n  logist play talks --as estoria --skip\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("as", "", "the party you play (required)")
		fs.String("say", "", "your message or speech")
		fs.StringSlice("issues", nil, "with --say: the issues your message addresses")
		fs.StringArray("concede", nil, "with --say: a move of your own position, ISSUE:OPTION:toward|away (repeatable)")
		fs.String("vote", "", "your vote: YES or NO")
		fs.String("reason", "", "with --vote: your public reason")
		fs.String("answer", "", "the whole answer JSON for the turn")
		fs.Bool("skip", false, "skip your turn (it is recorded as skipped and passes on)")
		fs.Bool("end-conversation", false, "end your private conversation now")
		fs.Bool("prompt", false, "show the whole prompt of your waiting turn")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		party, _ := e.fs.GetString("as")
		if party == "" {
			return nil, usagef("--as PARTY is required")
		}
		answer, action, err := playAction(e.fs)
		if err != nil {
			return nil, err
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		if action == "" {
			v, err := st.PlayView(id, party)
			if err != nil {
				return nil, err
			}
			full, _ := e.fs.GetBool("prompt")
			return &Result{Text: playText(id, v, full), Data: map[string]any{"view": v}}, nil
		}
		mv := steward.Move{Control: action, Answer: answer}
		m, err := st.Play(id, party, mv)
		if err != nil {
			return nil, err
		}
		return changed(e, m, mv.News(id, party)), nil
	},
}

// playAction is the one move the flags ask for (a steward.Move's
// control, "" for none: show the view) and, for an answer, its JSON.
func playAction(fs *pflag.FlagSet) ([]byte, string, error) {
	say, _ := fs.GetString("say")
	issues, _ := fs.GetStringSlice("issues")
	concede, _ := fs.GetStringArray("concede")
	vote, _ := fs.GetString("vote")
	reason, _ := fs.GetString("reason")
	raw, _ := fs.GetString("answer")
	skip, _ := fs.GetBool("skip")
	end, _ := fs.GetBool("end-conversation")
	var moves []string
	for name, set := range map[string]bool{"--say": say != "", "--vote": vote != "", "--answer": raw != "", "--skip": skip, "--end-conversation": end} {
		if set {
			moves = append(moves, name)
		}
	}
	if len(moves) > 1 {
		slices.Sort(moves)
		return nil, "", usagef("one move at a time: %s", strings.Join(moves, ", "))
	}
	if (len(issues) > 0 || len(concede) > 0) && say == "" {
		return nil, "", usagef("--issues and --concede go with --say")
	}
	if reason != "" && vote == "" {
		return nil, "", usagef("--reason goes with --vote")
	}
	switch {
	case skip:
		return nil, steward.ControlSkip, nil
	case end:
		return nil, "end_conversation", nil
	case raw != "":
		return []byte(raw), steward.ControlAnswer, nil
	case vote != "":
		v := strings.ToUpper(vote)
		if v != "YES" && v != "NO" {
			return nil, "", usagef("--vote %q: YES or NO", vote)
		}
		if err := steward.CheckVoteReason(reason); err != nil {
			return nil, "", flagError(err)
		}
		ans := map[string]any{"vote": v}
		if reason != "" {
			ans["reason"] = reason
		}
		b, err := json.Marshal(ans)
		return b, steward.ControlAnswer, err
	case say != "":
		ans := map[string]any{"text": say}
		if len(issues) > 0 {
			ans["issues"] = issues
		}
		var cs []map[string]string
		for _, c := range concede {
			p := strings.Split(c, ":")
			if len(p) != 3 || (p[2] != "toward" && p[2] != "away") {
				return nil, "", usagef("--concede %q: ISSUE:OPTION:toward or ISSUE:OPTION:away", c)
			}
			cs = append(cs, map[string]string{"issue": p[0], "option": p[1], "direction": p[2]})
		}
		if len(cs) > 0 {
			ans["concessions"] = cs
		}
		b, err := json.Marshal(ans)
		return b, steward.ControlAnswer, err
	}
	return nil, "", nil
}

// playText is a party's view for a person: game text is data, each
// message on a line of its own (textsafe.Line), so no agent's text can
// pass for another line.
func playText(id string, v *steward.PlayView, fullPrompt bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Job %s: you play %s (%s), role %s\n", id, textsafe.Line(v.Name), v.Participant, v.Role)
	fmt.Fprintf(&b, "Status: %s; game: %s\n\n", v.Status, textsafe.Line(v.State))
	b.WriteString(strings.TrimRight(v.Private, "\n") + "\n\n")
	fmt.Fprintf(&b, "What you may see (%d messages):\n", len(v.Messages))
	for _, m := range v.Messages {
		text, _ := m.Content["text"].(string)
		private := ""
		if len(m.Audience) > 0 {
			private = ", private"
		}
		fmt.Fprintf(&b, "  [round %d%s] %s %s: %s\n", m.Round, private, textsafe.Line(m.From), textsafe.Line(m.Type), textsafe.Line(text))
	}
	b.WriteString("\n")
	if v.Turn == nil {
		b.WriteString("It is not your turn.\n")
		return b.String()
	}
	fmt.Fprintf(&b, "Your turn (interaction %d, answer schema %s):\n", v.Turn.Interaction, v.Turn.Schema)
	b.WriteString(strings.TrimRight(v.Turn.Instruction(fullPrompt), "\n") + "\n\n")
	fmt.Fprintf(&b, "Move: logist play %s --as %s %s\n", id, v.Participant, strings.Join(playFlags(v), " | "))
	return b.String()
}

// playFlags are the flags of the moves open to the party now
// (PlayView.Controls): a game's input KIND is the flag --KIND, with
// dashes.
func playFlags(v *steward.PlayView) []string {
	var out []string
	for _, c := range v.Controls {
		switch {
		case c == steward.ControlAnswer && strings.Contains(v.Turn.Schema, "vote"):
			out = append(out, "--vote YES|NO [--reason TEXT]")
		case c == steward.ControlAnswer:
			out = append(out, "--say TEXT [--issues ID,...] [--concede ISSUE:OPTION:toward|away]")
		default:
			out = append(out, "--"+strings.ReplaceAll(c, "_", "-"))
		}
	}
	return out
}
