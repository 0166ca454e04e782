package negotiation

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/logist/logist/internal/deliberation"
	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/regfile"
	"github.com/logist/logist/schemas"
)

// Schema files of the game (schemas/).
const (
	SchemaConfig    = "negotiation-config.json"
	SchemaScenario  = "negotiation-scenario.json"
	SchemaStatement = "negotiation-statement.json"
	SchemaVote      = "negotiation-vote.json"
	SchemaHelper    = "negotiation-helper.json"
)

// Config is the manifest's "game" object.
type Config struct {
	// Scenario is the scenario file, relative to the job folder.
	Scenario string `json:"scenario"`
	// Conversations are the Round 2 pairs in order (first speaks first);
	// empty means a seeded schedule.
	Conversations [][]string `json:"conversations,omitempty"`
	// MessagesPerSide is the exchange cap before the chair interrupts
	// (1..5, default 5).
	MessagesPerSide int `json:"messages_per_side,omitempty"`
	// Speakers is the Round 3 order for every issue; empty means a seeded
	// order of all parties, drawn per issue.
	Speakers []string `json:"speakers,omitempty"`
	// Agents maps a party to the manifest agent playing it (default: the
	// party id).
	Agents map[string]string `json:"agents,omitempty"`
	// Helper is the manifest agent of the optional stance helper.
	Helper string `json:"helper,omitempty"`
	// Window is how many rounds an agent sees in full (default 2).
	Window int `json:"window,omitempty"`
	// MaxSentences is the sentence budget per message (0: none).
	MaxSentences int `json:"max_sentences,omitempty"`
}

// Scenario is the game's content (the scenario file).
type Scenario struct {
	Title       string  `json:"title"`
	Description string  `json:"description,omitempty"`
	Chair       Chair   `json:"chair"`
	Parties     []Party `json:"parties"`
	Issues      []Issue `json:"issues"`
	// Assessment is a document the parties may cite only through its
	// approved excerpts (seed 004 §3.2's IMA Assessment); its own text
	// never reaches a prompt.
	Assessment *Assessment `json:"assessment,omitempty"`
	// Excerpts are the approved excerpts (seed 004's ima_excerpts table):
	// the only parts of the assessment a prompt may carry, by id.
	Excerpts []Excerpt `json:"ima_excerpts,omitempty"`
}

// Assessment is the document behind the approved excerpts.
type Assessment struct {
	Title string `json:"title"`
	// File, if set, is the document (relative to the job folder): each
	// approved excerpt must be a passage of it, word for word. The game
	// reads it for that check only.
	File string `json:"file,omitempty"`
}

// Excerpt is one approved passage of the assessment.
type Excerpt struct {
	ID string `json:"id"`
	// Section says where in the assessment the passage is.
	Section string `json:"section,omitempty"`
	Text    string `json:"text"`
}

// Chair moderates only: its words come from its line library.
type Chair struct {
	ID    string             `json:"id"`
	Name  string             `json:"name"`
	Lines deliberation.Lines `json:"lines,omitempty"`
}

// Party is a negotiating party; only voting parties vote.
type Party struct {
	ID       string             `json:"id"`
	Name     string             `json:"name"`
	Voting   bool               `json:"voting"`
	Brief    string             `json:"brief,omitempty"`
	Openings []Variant          `json:"openings"`
	Stances  map[string]*Stance `json:"stances"`
}

// Variant is a prewritten opening.
type Variant struct {
	ID   string `json:"id"`
	Text string `json:"text"`
}

// Issue is decided by one proposal and one vote.
type Issue struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	Description string   `json:"description,omitempty"`
	Options     []Option `json:"options"`
	// Excerpts are the ids of the approved excerpts that bear on the
	// issue: each must be listed in ima_excerpts.
	Excerpts []string `json:"excerpts,omitempty"`
}

// Option is one way to settle an issue.
type Option struct {
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
}

// Stance is a party's position on one issue. A nil acceptance means the
// option is unacceptable, and stays so.
type Stance struct {
	Preferred  string              `json:"preferred"`
	Firmness   float64             `json:"firmness"`
	Acceptance map[string]*float64 `json:"acceptance"`
	Fallbacks  []string            `json:"fallbacks,omitempty"`
	Conditions []string            `json:"conditions,omitempty"`
}

// Situations of the chair's line library (the scenario may override any).
var situations = []string{"round_start", "conversation_start", "interruption", "conversation_end",
	"conversation_ended_early", "issue_intro", "speaker_call", "skip", "proposal", "vote_call",
	"result_adopted", "result_failed", "review"}

// defaultLines are procedural and neutral: the chair never argues.
var defaultLines = deliberation.Lines{
	"round_start":              {"Round {round} is open: {title}.", "We now begin Round {round}: {title}."},
	"conversation_start":       {"{a} and {b}, your private conversation may begin. {a} speaks first."},
	"interruption":             {"Time. {a} and {b}, one final message each, please.", "The chair must interrupt. One final message each, {a} then {b}."},
	"conversation_end":         {"The conversation between {a} and {b} is closed."},
	"conversation_ended_early": {"The conversation between {a} and {b} is closed early at the request of {by}."},
	"issue_intro":              {"We turn to {issue}: {title}. The speaking order is {speakers}."},
	"speaker_call":             {"{party}, you have the floor on {issue}.", "The floor goes to {party} on {issue}."},
	"skip":                     {"{party} has not taken the turn; the turn is recorded as skipped and passes on."},
	"proposal":                 {"On {issue}, the chair puts forward {option}, the option with the widest support among the voting parties."},
	"vote_call":                {"We now vote on {option} for {issue}. Voting parties, YES or NO. Adoption requires unanimity."},
	"result_adopted":           {"{option} is adopted on {issue}: {yes} of {needed} voting parties in favour."},
	"result_failed":            {"{option} is not adopted on {issue}: {yes} of {needed} required votes in favour. The issue is closed."},
	"review":                   {"The negotiation is concluded. Adopted: {adopted}. Not adopted: {failed}."},
}

// game is a loaded config and scenario with what follows from them.
type game struct {
	cfg     Config
	sc      *Scenario
	seed    int64
	sha     string // of the scenario file: pinned by the first message
	lines   deliberation.Lines
	parties map[string]*Party
	ids     []string // party ids, sorted
	voters  []string // voting party ids, sorted
	issues  map[string]int
	pairs   [][2]string
}

// ParseConfig decodes and checks the "game" object (without the scenario).
func ParseConfig(data []byte) (*Config, error) {
	if len(bytes.TrimSpace(data)) == 0 || string(bytes.TrimSpace(data)) == "null" {
		return nil, errors.New("game: missing (the negotiation needs at least {\"scenario\": \"scenario.json\"})")
	}
	if err := schemas.ValidateJSON(SchemaConfig, data); err != nil {
		return nil, fmt.Errorf("game: %w", err)
	}
	var c Config
	if err := strictDecode(data, &c); err != nil {
		return nil, fmt.Errorf("game: %w", err)
	}
	if c.MessagesPerSide == 0 {
		c.MessagesPerSide = 5
	}
	if c.Window == 0 {
		c.Window = 2
	}
	return &c, nil
}

// ParseScenario decodes and checks a scenario file's content; name is the
// file's name for the errors.
func ParseScenario(name string, data []byte) (*Scenario, error) {
	if err := schemas.ValidateJSON(SchemaScenario, data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var s Scenario
	if err := strictDecode(data, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

func strictDecode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("field %s: want %s, got %s", te.Field, te.Type, te.Value)
		}
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// check is what the schema cannot say: uniqueness and cross-references.
func (s *Scenario) check() error {
	reserved := map[string]bool{deliberation.Steward: true, system: true}
	if reserved[s.Chair.ID] {
		return fmt.Errorf("chair.id: %q is reserved", s.Chair.ID)
	}
	seen := map[string]bool{s.Chair.ID: true}
	voters := 0
	if len(s.Excerpts) > 0 && s.Assessment == nil {
		return errors.New("ima_excerpts: excerpts of no assessment (add \"assessment\")")
	}
	excerpts := map[string]bool{}
	for i, e := range s.Excerpts {
		if excerpts[e.ID] {
			return fmt.Errorf("ima_excerpts[%d].id: duplicate %q", i, e.ID)
		}
		excerpts[e.ID] = true
	}
	issueOpts := map[string]map[string]bool{}
	for i, is := range s.Issues {
		if issueOpts[is.ID] != nil {
			return fmt.Errorf("issues[%d].id: duplicate %q", i, is.ID)
		}
		opts := map[string]bool{}
		for j, o := range is.Options {
			if opts[o.ID] {
				return fmt.Errorf("issues[%d].options[%d].id: duplicate %q", i, j, o.ID)
			}
			opts[o.ID] = true
		}
		issueOpts[is.ID] = opts
		for j, id := range is.Excerpts {
			if !excerpts[id] {
				return fmt.Errorf("issues[%d].excerpts[%d]: %q is not an approved excerpt (ima_excerpts)", i, j, id)
			}
		}
	}
	for i, p := range s.Parties {
		at := fmt.Sprintf("parties[%d]", i)
		if reserved[p.ID] || seen[p.ID] {
			return fmt.Errorf("%s.id: %q is reserved, the chair's or a duplicate", at, p.ID)
		}
		seen[p.ID] = true
		if p.Voting {
			voters++
		}
		vs := map[string]bool{}
		for j, v := range p.Openings {
			if vs[v.ID] {
				return fmt.Errorf("%s.openings[%d].id: duplicate %q", at, j, v.ID)
			}
			vs[v.ID] = true
		}
		for id := range p.Stances {
			if issueOpts[id] == nil {
				return fmt.Errorf("%s.stances.%s: no such issue", at, id)
			}
		}
		for _, is := range s.Issues {
			st := p.Stances[is.ID]
			sat := fmt.Sprintf("%s.stances.%s", at, is.ID)
			if st == nil {
				return fmt.Errorf("%s: missing (every party needs a stance on every issue)", sat)
			}
			if err := checkStance(st, is, sat); err != nil {
				return err
			}
		}
	}
	if voters == 0 {
		return errors.New("parties: no voting party")
	}
	return nil
}

func checkStance(st *Stance, is Issue, at string) error {
	if math.IsNaN(st.Firmness) || st.Firmness < 0 || st.Firmness > 1 {
		return fmt.Errorf("%s.firmness: %v is not in [0,1]", at, st.Firmness)
	}
	opts := map[string]bool{}
	for _, o := range is.Options {
		opts[o.ID] = true
		a, ok := st.Acceptance[o.ID]
		if !ok {
			return fmt.Errorf("%s.acceptance.%s: missing (list every option; null means unacceptable)", at, o.ID)
		}
		if a != nil && (math.IsNaN(*a) || *a < 0 || *a > 1) {
			return fmt.Errorf("%s.acceptance.%s: %v is not in [0,1]", at, o.ID, *a)
		}
	}
	for id := range st.Acceptance {
		if !opts[id] {
			return fmt.Errorf("%s.acceptance.%s: not an option of issue %s", at, id, is.ID)
		}
	}
	if !opts[st.Preferred] {
		return fmt.Errorf("%s.preferred: %q is not an option of issue %s", at, st.Preferred, is.ID)
	}
	if st.Acceptance[st.Preferred] == nil {
		return fmt.Errorf("%s.preferred: %q is marked unacceptable (null)", at, st.Preferred)
	}
	for j, f := range st.Fallbacks {
		if !opts[f] {
			return fmt.Errorf("%s.fallbacks[%d]: %q is not an option of issue %s", at, j, f, is.ID)
		}
		if st.Acceptance[f] == nil {
			return fmt.Errorf("%s.fallbacks[%d]: %q is marked unacceptable (null)", at, j, f)
		}
	}
	return nil
}

// maxGameFile bounds a file the game reads (its scenario, the scenario's
// assessment), read at every turn.
const maxGameFile = 16 << 20

// gameFile resolves name, a file of the game's named relative to the job
// folder, as a role's prompt file is resolved: inside the workspace when
// it lies there (the agents' folder: a link they made must not lead to
// another role's private home or the history), else inside the job
// folder.
func gameFile(env deliberation.Env, name string) (string, error) {
	root, rel := env.Dir, name
	if env.Workspace != "" && !filepath.IsAbs(name) {
		if r, err := filepath.Rel(env.Workspace, filepath.Join(env.Dir, name)); err == nil && pathguard.Lexical(r) == nil {
			root, rel = env.Workspace, r
		}
	}
	p, _, err := pathguard.Resolve(root, rel)
	return p, err
}

// readGameFile reads a file of the game's, named relative to the job
// folder and so perhaps in the agents' workspace: a named pipe there is
// refused rather than waited on (regfile), a file past maxGameFile too.
func readGameFile(path string) ([]byte, error) {
	b, err := regfile.ReadLimited(path, maxGameFile)
	if err == nil && len(b) > maxGameFile {
		err = fmt.Errorf("%s is larger than %d bytes", filepath.Base(path), maxGameFile)
	}
	return b, err
}

// load reads the config and the scenario and derives the schedule.
func load(env deliberation.Env) (*game, error) {
	cfg, err := ParseConfig(env.Config)
	if err != nil {
		return nil, err
	}
	path, err := gameFile(env, cfg.Scenario)
	if err != nil {
		return nil, fmt.Errorf("game.scenario: %w", err)
	}
	data, err := readGameFile(path)
	if err != nil {
		return nil, fmt.Errorf("game.scenario: %w", err)
	}
	sum := sha256.Sum256(data)
	key := cfg.Scenario + "\x00" + hex.EncodeToString(sum[:])
	sc, ok := scenarios.Load(key)
	if !ok {
		parsed, err := ParseScenario(cfg.Scenario, data)
		if err != nil {
			return nil, err
		}
		if err := checkExcerpts(env, cfg.Scenario, parsed); err != nil {
			return nil, err
		}
		sc, _ = scenarios.LoadOrStore(key, parsed)
	}
	return newGame(cfg, sc.(*Scenario), env.Seed, data)
}

// checkExcerpts holds each approved excerpt to the assessment's file, if
// the scenario names one: an excerpt is a passage of it, word for word
// (white space aside). Nothing of the file is kept.
func checkExcerpts(env deliberation.Env, name string, sc *Scenario) error {
	if sc.Assessment == nil || sc.Assessment.File == "" {
		return nil
	}
	path, err := gameFile(env, sc.Assessment.File)
	if err != nil {
		return fmt.Errorf("%s: assessment.file: %w", name, err)
	}
	doc, err := readGameFile(path)
	if err != nil {
		return fmt.Errorf("%s: assessment.file: %w", name, err)
	}
	words := strings.Join(strings.Fields(string(doc)), " ")
	for i, e := range sc.Excerpts {
		if !strings.Contains(words, strings.Join(strings.Fields(e.Text), " ")) {
			return fmt.Errorf("%s: ima_excerpts[%d] (%s): not a passage of %s", name, i, e.ID, sc.Assessment.File)
		}
	}
	return nil
}

// scenarios caches parsed scenarios by name and content: the engine loads
// the session every step, and a parsed scenario is never modified (stances
// are copied into the state).
var scenarios sync.Map

func newGame(cfg *Config, sc *Scenario, seed int64, raw []byte) (*game, error) {
	sum := sha256.Sum256(raw)
	g := &game{cfg: *cfg, sc: sc, seed: seed, sha: hex.EncodeToString(sum[:]),
		parties: map[string]*Party{}, issues: map[string]int{}, lines: deliberation.Lines{}}
	for k, v := range defaultLines {
		g.lines[k] = v
	}
	for k, v := range sc.Chair.Lines {
		g.lines[k] = v
	}
	for i := range sc.Parties {
		p := &sc.Parties[i]
		g.parties[p.ID] = p
		g.ids = append(g.ids, p.ID)
		if p.Voting {
			g.voters = append(g.voters, p.ID)
		}
	}
	sort.Strings(g.ids)
	sort.Strings(g.voters)
	for i, is := range sc.Issues {
		g.issues[is.ID] = i
	}
	party := func(field, id string) error {
		if g.parties[id] == nil {
			return fmt.Errorf("game.%s: %q is not a party of %s (parties: %s)", field, id, cfg.Scenario, strings.Join(g.ids, ", "))
		}
		return nil
	}
	for i, pr := range cfg.Conversations {
		for j, id := range pr {
			if err := party(fmt.Sprintf("conversations[%d][%d]", i, j), id); err != nil {
				return nil, err
			}
		}
		if pr[0] == pr[1] {
			return nil, fmt.Errorf("game.conversations[%d]: a party cannot converse with itself (%q)", i, pr[0])
		}
		g.pairs = append(g.pairs, [2]string{pr[0], pr[1]})
	}
	if len(cfg.Conversations) == 0 {
		// Seeded schedule: the sorted parties shuffled, paired in turn (an
		// odd one out has no conversation).
		perm := deliberation.RNG(seed, "round2/pairs").Perm(len(g.ids))
		for i := 0; i+1 < len(perm); i += 2 {
			g.pairs = append(g.pairs, [2]string{g.ids[perm[i]], g.ids[perm[i+1]]})
		}
	}
	dup := map[string]bool{}
	for i, id := range cfg.Speakers {
		if err := party(fmt.Sprintf("speakers[%d]", i), id); err != nil {
			return nil, err
		}
		if dup[id] {
			return nil, fmt.Errorf("game.speakers[%d]: %q is listed twice", i, id)
		}
		dup[id] = true
	}
	for _, id := range slices.Sorted(maps.Keys(cfg.Agents)) {
		if err := party("agents."+id, id); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// speakers is the Round 3 order for an issue.
func (g *game) speakers(issue string) []string {
	if len(g.cfg.Speakers) > 0 {
		return append([]string(nil), g.cfg.Speakers...)
	}
	perm := deliberation.RNG(g.seed, "round3/speakers/"+issue).Perm(len(g.ids))
	out := make([]string, len(perm))
	for i, j := range perm {
		out[i] = g.ids[j]
	}
	return out
}

// agent is the manifest agent that plays a party.
func (g *game) agent(party string) string {
	if a := g.cfg.Agents[party]; a != "" {
		return a
	}
	return party
}

func (g *game) name(id string) string {
	if id == g.sc.Chair.ID {
		return g.sc.Chair.Name
	}
	if p := g.parties[id]; p != nil {
		return p.Name
	}
	return id
}

func (g *game) issue(id string) *Issue {
	if i, ok := g.issues[id]; ok {
		return &g.sc.Issues[i]
	}
	return nil
}

func (g *game) optionTitle(issue, opt string) string {
	if is := g.issue(issue); is != nil {
		for _, o := range is.Options {
			if o.ID == opt {
				return o.Title
			}
		}
	}
	return opt
}

func (g *game) line(salt, situation string, vars map[string]string) string {
	return g.lines.Line(g.seed, salt, situation, vars)
}
