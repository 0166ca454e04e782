package parliament

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/regfile"
)

// Config is the manifest's "game" section for "workflow": "parliament"
// (docs/parliament.md).
type Config struct {
	// ParliamentID names the session in the files (default "parl-" and the
	// job folder's name).
	ParliamentID string `json:"parliament_id,omitempty"`
	// ProblemStatement defaults to the job's task description.
	ProblemStatement  string   `json:"problem_statement,omitempty"`
	ConstituentIssues []string `json:"constituent_issues,omitempty"`
	// MaxRounds is the round limit of the debate (default 6): in the last
	// round a vote may be called whatever the motive scores.
	MaxRounds int `json:"max_rounds,omitempty"`
	// Drafter is the representative who drafts the bill (default: one
	// picked with the seeded RNG when the openings are evaluated).
	Drafter string `json:"drafter,omitempty"`
	// VoteRule decides bill and amendment votes (default majority, a tie
	// fails).
	VoteRule        deliberation.VoteRule `json:"vote_rule,omitempty"`
	Representatives []RepConfig           `json:"representatives"`
	// Speaker is who plays the Speaker: "builtin" (the deterministic
	// policy), or the name of a manifest agent that answers with tool
	// calls. Empty: the manifest's "speaker" agent if there is one, else
	// the built-in policy.
	Speaker string `json:"speaker,omitempty"`
	// Summarizer is the manifest agent (a "clerk", say) that writes each
	// round's narrative summary in seed 000's shape once the round ends.
	// Empty, or an answer that fails its schema: the Clerk's deterministic
	// summary stands.
	Summarizer string `json:"summarizer,omitempty"`
	// Files are workspace files the House governs: shared with every
	// member when the session opens and again after each change, and the
	// target of the tabled bill.
	Files []string `json:"files,omitempty"`
	// AwaitOpeningGuidance makes the session wait in setup for the Prime
	// Minister's opening guidance.
	AwaitOpeningGuidance bool `json:"await_opening_guidance,omitempty"`
	// Lines adds to or replaces the Speaker's procedural line library.
	Lines deliberation.Lines `json:"lines,omitempty"`
}

// RepConfig is one representative.
type RepConfig struct {
	ID      string   `json:"id"`
	Name    string   `json:"name,omitempty"`
	Motives []string `json:"motives"`
	// Temperature (0-100, default 50) is how hard the member pushes back;
	// it moves with the stances the member takes (docs/parliament.md).
	Temperature *int `json:"temperature,omitempty"`
	// Agent is the manifest agent that plays the member (default ID).
	Agent string `json:"agent,omitempty"`
	// Brief is the member's private brief: only its own prompts show it.
	Brief string `json:"brief,omitempty"`
}

const (
	speakerID    = "speaker"
	pmID         = "prime_minister"
	builtinName  = "builtin"
	maxReps      = 50
	maxRoundsCap = 50
)

var idRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`) })

// ParseConfig decodes and checks the "game" section strictly; errors name
// the field. An empty section is refused: a parliament needs members.
func ParseConfig(raw json.RawMessage) (*Config, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, errors.New("game: missing (the parliament needs game.representatives)")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("game: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("game: trailing data after the object")
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return &c, nil
}

func (c *Config) check() error {
	if c.MaxRounds == 0 {
		c.MaxRounds = 6
	}
	if c.MaxRounds < 1 || c.MaxRounds > maxRoundsCap {
		return fmt.Errorf("game.max_rounds: %d is not in 1..%d", c.MaxRounds, maxRoundsCap)
	}
	switch c.VoteRule.Rule {
	case "":
		c.VoteRule.Rule = deliberation.RuleMajority
	case deliberation.RuleMajority, deliberation.RuleQuorum, deliberation.RuleUnanimity:
	default:
		return fmt.Errorf("game.vote_rule.rule: %q is not majority, quorum or unanimity", c.VoteRule.Rule)
	}
	switch c.VoteRule.Tie {
	case "":
		c.VoteRule.Tie = deliberation.TieFails
	case deliberation.TieFails, deliberation.TiePasses:
	default:
		return fmt.Errorf("game.vote_rule.tie: %q is not fails or passes", c.VoteRule.Tie)
	}
	if len(c.Representatives) < 2 || len(c.Representatives) > maxReps {
		return fmt.Errorf("game.representatives: %d members, need 2..%d", len(c.Representatives), maxReps)
	}
	seen := map[string]bool{}
	for i := range c.Representatives {
		r := &c.Representatives[i]
		f := fmt.Sprintf("game.representatives[%d]", i)
		if !idRe().MatchString(r.ID) {
			return fmt.Errorf("%s.id: %q must match %s", f, r.ID, idRe())
		}
		if r.ID == speakerID || r.ID == pmID || r.ID == deliberation.Steward {
			return fmt.Errorf("%s.id: %q is reserved", f, r.ID)
		}
		if seen[r.ID] {
			return fmt.Errorf("%s.id: %q appears twice", f, r.ID)
		}
		seen[r.ID] = true
		if r.Name == "" {
			r.Name = r.ID
		}
		if r.Agent == "" {
			r.Agent = r.ID
		}
		if len(r.Motives) == 0 {
			return fmt.Errorf("%s.motives: at least one motive is needed", f)
		}
		ms := map[string]bool{}
		for j, m := range r.Motives {
			if strings.TrimSpace(m) == "" || len(m) > 200 {
				return fmt.Errorf("%s.motives[%d]: must be 1..200 characters", f, j)
			}
			if ms[m] {
				return fmt.Errorf("%s.motives[%d]: %q appears twice", f, j, m)
			}
			ms[m] = true
		}
		if r.Temperature == nil {
			t := 50
			r.Temperature = &t
		}
		if *r.Temperature < 0 || *r.Temperature > 100 {
			return fmt.Errorf("%s.temperature: %d is not in 0..100", f, *r.Temperature)
		}
	}
	if c.Drafter != "" && !seen[c.Drafter] {
		return fmt.Errorf("game.drafter: %q is not a representative", c.Drafter)
	}
	if c.Speaker != "" && c.Speaker != builtinName && !idRe().MatchString(c.Speaker) {
		return fmt.Errorf("game.speaker: %q is neither %q nor an agent name", c.Speaker, builtinName)
	}
	if c.Summarizer != "" && !idRe().MatchString(c.Summarizer) {
		return fmt.Errorf("game.summarizer: %q is not an agent name", c.Summarizer)
	}
	for i, f := range c.Files {
		if f == "" || filepath.IsAbs(f) || f == ".." || strings.HasPrefix(filepath.Clean(f), "..") {
			return fmt.Errorf("game.files[%d]: %q must be a path inside the workspace", i, f)
		}
		c.Files[i] = cleanPath(f)
	}
	for k, vs := range c.Lines {
		if len(vs) == 0 {
			return fmt.Errorf("game.lines.%s: needs at least one line", k)
		}
	}
	return nil
}

func cleanPath(p string) string { return filepath.ToSlash(filepath.Clean(p)) }

// speakerAgent is the manifest agent playing the Speaker, "" for the
// built-in policy: the config decides, else a "speaker" agent in the
// job's manifest.
func speakerAgent(c *Config, dir string) string {
	switch c.Speaker {
	case builtinName:
		return ""
	case "":
	default:
		return c.Speaker
	}
	if dir == "" {
		return ""
	}
	// At most manifest.MaxSize (a package this one does not import):
	// logist reads no larger manifest; a named pipe is refused.
	b, err := regfile.ReadLimited(filepath.Join(dir, "job.json"), 1<<20)
	if err != nil || len(b) > 1<<20 {
		return ""
	}
	var m struct {
		Agents map[string]json.RawMessage `json:"agents"`
	}
	if json.Unmarshal(b, &m) == nil {
		if _, ok := m.Agents[speakerID]; ok {
			return speakerID
		}
	}
	return ""
}
