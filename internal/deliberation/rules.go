package deliberation

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"unicode"
)

// RNG is the random source for one choice of a run: seeded from the job's
// seed and a salt naming the choice (e.g. "opening/rep_2"), so every
// choice is reproducible and independent of the order others are made in.
func RNG(seed int64, salt string) *rand.Rand {
	h := sha256.Sum256([]byte(fmt.Sprintf("%d/%s", seed, salt)))
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(h[:8]), binary.LittleEndian.Uint64(h[8:16])))
}

// Pick chooses one of n items (sorted by the caller for stability) with
// the seeded RNG for salt.
func Pick(seed int64, salt string, n int) int {
	if n <= 0 {
		return -1
	}
	return RNG(seed, salt).IntN(n)
}

// Vote rules.
const (
	RuleMajority  = "majority"  // more YES than NO among the votes cast
	RuleQuorum    = "quorum"    // YES from at least floor(N/2)+1 of the N voters
	RuleUnanimity = "unanimity" // every voter YES
)

// Ties (majority rule only: YES == NO).
const (
	TieFails  = "fails"
	TiePasses = "passes"
)

// VoteRule is a workflow's vote rule.
type VoteRule struct {
	Rule string `json:"rule"`
	// Tie is what a majority tie does (default fails).
	Tie string `json:"tie,omitempty"`
}

// Vote values.
const (
	Yes     = "YES"
	No      = "NO"
	Abstain = "ABSTAIN"
)

// Tally is a vote's result.
type Tally struct {
	Yes     []string `json:"yes_votes"`
	No      []string `json:"no_votes"`
	Abstain []string `json:"abstentions"`
	// Missing are voters who did not vote (a skipped turn).
	Missing []string `json:"missing,omitempty"`
	Passed  bool     `json:"passed"`
	Tie     bool     `json:"tie,omitempty"`
	Rule    string   `json:"rule"`
	// Needed is how many YES votes the rule required.
	Needed int `json:"needed"`
}

// Count tallies votes (participant → YES/NO/ABSTAIN) of the voters under
// the rule; votes of non-voters are ignored.
func Count(votes map[string]string, voters []string, r VoteRule) Tally {
	t := Tally{Yes: []string{}, No: []string{}, Abstain: []string{}, Rule: r.Rule}
	vs := append([]string(nil), voters...)
	sort.Strings(vs)
	for _, v := range vs {
		switch strings.ToUpper(votes[v]) {
		case Yes:
			t.Yes = append(t.Yes, v)
		case No:
			t.No = append(t.No, v)
		case Abstain:
			t.Abstain = append(t.Abstain, v)
		default:
			t.Missing = append(t.Missing, v)
		}
	}
	n := len(vs)
	switch r.Rule {
	case RuleUnanimity:
		t.Needed = n
		t.Passed = n > 0 && len(t.Yes) == n
	case RuleQuorum:
		t.Needed = n/2 + 1
		t.Passed = len(t.Yes) >= t.Needed
	default: // majority
		t.Needed = len(t.No) + 1
		switch {
		case len(t.Yes) > len(t.No):
			t.Passed = true
		case len(t.Yes) == len(t.No) && len(t.Yes) > 0:
			t.Tie = true
			t.Passed = r.Tie == TiePasses
		}
	}
	return t
}

// Sentences counts the sentences of a text: runs ending in . ! or ?
// followed by a space or the end (a last run without one counts too).
func Sentences(s string) int {
	return len(splitSentences(s))
}

func splitSentences(s string) []string {
	var out []string
	rs := []rune(strings.TrimSpace(s))
	start := 0
	for i, r := range rs {
		if (r == '.' || r == '!' || r == '?') && (i+1 == len(rs) || unicode.IsSpace(rs[i+1])) {
			if part := strings.TrimSpace(string(rs[start : i+1])); part != "" {
				out = append(out, part)
			}
			start = i + 1
		}
	}
	if part := strings.TrimSpace(string(rs[start:])); part != "" {
		out = append(out, part)
	}
	return out
}

// Budget enforces the debate clock's per-answer sentence budget: the first
// max sentences are kept and the rest cut off. It reports whether it cut.
func Budget(s string, max int) (string, bool) {
	if max <= 0 {
		return s, false
	}
	parts := splitSentences(s)
	if len(parts) <= max {
		return s, false
	}
	return strings.Join(parts[:max], " "), true
}

// Lines is the chair's procedural line library: situation → variants.
type Lines map[string][]string

// Line picks the chair's line for a situation, reproducibly, with
// {placeholders} filled from vars. An unknown situation falls back to a
// plain statement of it, so a missing line never stops a session.
func (l Lines) Line(seed int64, salt, situation string, vars map[string]string) string {
	vs := l[situation]
	text := "[" + situation + "]"
	if len(vs) > 0 {
		text = vs[Pick(seed, salt+"/"+situation, len(vs))]
	}
	for k, v := range vars {
		text = strings.ReplaceAll(text, "{"+k+"}", v)
	}
	return text
}

// Window is the context windowing rule: an agent sees the messages of the
// last keep rounds in full and, for older rounds, only their summaries.
func Window(msgs []Message, summaries map[int]string, current, keep int) (recent []Message, older []string) {
	cut := current - keep + 1
	rounds := []int{}
	for r := range summaries {
		if r < cut {
			rounds = append(rounds, r)
		}
	}
	sort.Ints(rounds)
	for _, r := range rounds {
		older = append(older, fmt.Sprintf("Round %d: %s", r, summaries[r]))
	}
	for _, m := range msgs {
		if m.Round >= cut || summaries[m.Round] == "" {
			recent = append(recent, m)
		}
	}
	return recent, older
}
