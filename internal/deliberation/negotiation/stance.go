package negotiation

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/logist/logist/internal/deliberation"
)

// Stance bounds per committed message (seed 004 §5).
const (
	stepAcceptance = 0.10
	stepFirmness   = 0.05
	sourceRule     = "rule"
	sourceHelper   = "helper"
	eps            = 1e-9
)

// round4 keeps stance values free of float noise, so sums compare
// exactly and ledgers stay byte-identical.
func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

func clamp01(x float64) float64 { return math.Max(0, math.Min(1, x)) }

// propose is the chair's proposal for an issue: the option with the most
// support (sum of the voting parties' acceptance), never one a voting
// party finds unacceptable while another exists; ties go to the lowest
// option id.
func (st *state) propose(is Issue) (string, map[string]float64, []string) {
	support := map[string]float64{}
	var candidates, excluded []string
	for _, o := range is.Options {
		sum, null := 0.0, false
		for _, v := range st.g.voters {
			if a := st.stances[v][is.ID].Acceptance[o.ID]; a == nil {
				null = true
			} else {
				sum += *a
			}
		}
		support[o.ID] = round4(sum)
		if null {
			excluded = append(excluded, o.ID)
		} else {
			candidates = append(candidates, o.ID)
		}
	}
	if len(candidates) == 0 {
		for _, o := range is.Options {
			candidates = append(candidates, o.ID)
		}
	}
	sort.Strings(candidates)
	best := candidates[0]
	for _, c := range candidates[1:] {
		if support[c] > support[best] { // strictly more: a tie keeps the lower id
			best = c
		}
	}
	sort.Strings(excluded)
	return best, support, excluded
}

// ruleUpdate is the rule-based stance change after a committed message
// (index target) by party: each option the message concedes toward
// (away from) gains (loses) 0.10, netted per option, clamped to [0,1];
// null acceptances never change; firmness drops 0.05 on an issue where the
// party softened (toward a non-preferred option or away from its
// preferred) and rises 0.05 where it hardened; the preferred option
// follows the highest acceptance. Only allowed issues may change. It
// returns nil when the message made no concession.
func (st *state) ruleUpdate(party string, allowed []string, cs []Concession, target, round int, why string) *deliberation.Message {
	if len(cs) == 0 {
		return nil
	}
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[a] = true
	}
	type key struct{ issue, option string }
	net := map[key]int{}
	var keys []key
	var skips []Skip
	for _, c := range cs {
		is := st.g.issue(c.Issue)
		switch {
		case is == nil:
			skips = append(skips, Skip{Issue: c.Issue, Option: c.Option, Reason: "unknown issue"})
			continue
		case !ok[c.Issue]:
			skips = append(skips, Skip{Issue: c.Issue, Option: c.Option, Reason: why})
			continue
		}
		acc, known := st.stances[party][c.Issue].Acceptance[c.Option]
		switch {
		case !known:
			skips = append(skips, Skip{Issue: c.Issue, Option: c.Option, Reason: "unknown option"})
			continue
		case acc == nil:
			skips = append(skips, Skip{Issue: c.Issue, Option: c.Option, Reason: "unacceptable (null) acceptance is immutable"})
			continue
		}
		d := 0
		switch c.Direction {
		case "toward":
			d = 1
		case "away":
			d = -1
		default:
			skips = append(skips, Skip{Issue: c.Issue, Option: c.Option, Reason: "direction must be toward or away"})
			continue
		}
		k := key{c.Issue, c.Option}
		if _, seen := net[k]; !seen {
			keys = append(keys, k)
		}
		net[k] += d
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].issue != keys[j].issue {
			return st.g.issues[keys[i].issue] < st.g.issues[keys[j].issue]
		}
		return keys[i].option < keys[j].option
	})
	work := map[string]*Stance{}
	soft := map[string]int{}
	var issues []string
	var changes []Change
	var reasons []string
	for _, k := range keys {
		n := net[k]
		if n == 0 {
			skips = append(skips, Skip{Issue: k.issue, Option: k.option, Reason: "toward and away cancel out"})
			continue
		}
		s := work[k.issue]
		if s == nil {
			s = copyStance(st.stances[party][k.issue])
			work[k.issue] = s
			issues = append(issues, k.issue)
		}
		sign, dir := 1.0, "toward"
		if n < 0 {
			sign, dir = -1.0, "away from"
		}
		old := *s.Acceptance[k.option]
		nv := round4(clamp01(old + sign*stepAcceptance))
		if nv == old {
			skips = append(skips, Skip{Issue: k.issue, Option: k.option, Reason: fmt.Sprintf("acceptance already at %v", old)})
			continue
		}
		*s.Acceptance[k.option] = nv
		delta := round4(nv - old)
		changes = append(changes, Change{Issue: k.issue, Field: "acceptance", Option: k.option, From: old, To: nv, Delta: &delta})
		reasons = append(reasons, fmt.Sprintf("%s moved %s %s on %s (%s)", party, dir, k.option, k.issue, why2(round)))
		if (k.option == s.Preferred) == (sign > 0) {
			soft[k.issue]-- // toward the preferred or away from another: firmer
		} else {
			soft[k.issue]++
		}
	}
	for _, id := range issues {
		s := work[id]
		orig := st.stances[party][id]
		if soft[id] != 0 {
			d := stepFirmness
			if soft[id] > 0 {
				d = -stepFirmness
			}
			nv := round4(clamp01(s.Firmness + d))
			if nv != s.Firmness {
				delta := round4(nv - s.Firmness)
				changes = append(changes, Change{Issue: id, Field: "firmness", From: s.Firmness, To: nv, Delta: &delta})
				s.Firmness = nv
			}
		}
		if p := preferredOf(s); p != orig.Preferred {
			changes = append(changes, Change{Issue: id, Field: "preferred", From: orig.Preferred, To: p})
			reasons = append(reasons, fmt.Sprintf("%s now prefers %s on %s (highest acceptance)", party, p, id))
		}
	}
	c := content{Party: party, Source: sourceRule, Target: &target, Changes: changes, Skips: skips, Reasons: reasons}
	c.Text = summarize(party, changes, skips)
	m := msg(tStanceUpdate, system, round, []string{deliberation.Steward}, c)
	return &m
}

func why2(round int) string {
	if round == 2 {
		return "conceded in a private conversation"
	}
	return "conceded in the public debate"
}

// preferredOf is the option with the highest acceptance; the current
// preferred option keeps its place on a tie, else the lowest id wins.
func preferredOf(s *Stance) string {
	best, bv := s.Preferred, -1.0
	if a := s.Acceptance[s.Preferred]; a != nil {
		bv = *a
	}
	for _, id := range slices.Sorted(maps.Keys(s.Acceptance)) {
		if a := s.Acceptance[id]; a != nil && *a > bv+eps {
			best, bv = id, *a
		}
	}
	return best
}

func summarize(party string, changes []Change, skips []Skip) string {
	var parts []string
	for _, c := range changes {
		switch c.Field {
		case "acceptance":
			parts = append(parts, fmt.Sprintf("%s %s %v→%v", c.Issue, c.Option, c.From, c.To))
		case "firmness":
			parts = append(parts, fmt.Sprintf("%s firmness %v→%v", c.Issue, c.From, c.To))
		case "preferred":
			parts = append(parts, fmt.Sprintf("%s preferred %v→%v", c.Issue, c.From, c.To))
		}
	}
	for _, s := range skips {
		parts = append(parts, fmt.Sprintf("ignored %s/%s: %s", s.Issue, s.Option, s.Reason))
	}
	if len(parts) == 0 {
		return party + ": no stance change"
	}
	return party + ": " + strings.Join(parts, "; ")
}

// allowedIssues are the issues the message at index i may change for its
// author: those it names (Round 2) or the active issue (Round 3).
func (st *state) allowedIssues(i int) []string {
	c, err := readContent(st.msgs[i])
	if err != nil {
		return nil
	}
	if st.msgs[i].Type == tSpeech {
		return []string{c.Issue}
	}
	return c.Issues
}

// helperUpdate turns the stance helper's answer about the message at
// index target into a STANCE_UPDATE, or a HELPER_IGNORED saying why not:
// missing, failed, invalid, out of scope, touching a null acceptance or
// beyond the bounds. It never blocks the game.
func (st *state) helperUpdate(target int, r *deliberation.Result) deliberation.Message {
	round := st.round
	ignore := func(reason string) deliberation.Message {
		c := content{Target: &target, Reason: reason, Text: "stance helper ignored: " + reason}
		if target >= 0 && target < len(st.msgs) {
			c.Party = st.msgs[target].From
		}
		return msg(tHelperIgnored, system, round, []string{deliberation.Steward}, c)
	}
	if r == nil {
		return ignore("missing: no helper result in this step")
	}
	if r.Late {
		return ignore("late: the step's party turns ended first; the game never waits for the helper")
	}
	if r.Error != "" {
		return ignore("failed: " + r.Error)
	}
	changed, _ := r.Answer["changed"].(bool)
	if !changed {
		return ignore("no change proposed")
	}
	party := st.msgs[target].From
	allowed := map[string]bool{}
	for _, id := range st.allowedIssues(target) {
		allowed[id] = true
	}
	deltas, _ := r.Answer["deltas"].(map[string]any)
	if len(deltas) == 0 {
		return ignore("invalid: changed without deltas")
	}
	var reasons []string
	if rs, ok := r.Answer["reasons"].([]any); ok {
		for _, x := range rs {
			if s, ok := x.(string); ok && strings.TrimSpace(s) != "" {
				reasons = append(reasons, "helper: "+s)
			}
		}
	}
	if len(reasons) == 0 {
		return ignore("invalid: no reason given")
	}
	var changes []Change
	for _, id := range slices.Sorted(maps.Keys(deltas)) {
		if !allowed[id] {
			return ignore(fmt.Sprintf("invalid: issue %q is outside the message's scope", id))
		}
		d, ok := deltas[id].(map[string]any)
		if !ok {
			return ignore(fmt.Sprintf("invalid: deltas.%s is not an object", id))
		}
		for k := range d {
			if k != "acceptance" && k != "firmness" {
				return ignore(fmt.Sprintf("invalid: deltas.%s.%s is not acceptance or firmness", id, k))
			}
		}
		orig := st.stances[party][id]
		s := copyStance(orig)
		acc, _ := d["acceptance"].(map[string]any)
		for _, opt := range slices.Sorted(maps.Keys(acc)) {
			cur, known := s.Acceptance[opt]
			if !known {
				return ignore(fmt.Sprintf("invalid: %s has no option %q", id, opt))
			}
			if cur == nil {
				return ignore(fmt.Sprintf("invalid: proposes a change to the null acceptance of %s/%s", id, opt))
			}
			dv, ok := toFloat(acc[opt])
			if !ok || math.Abs(dv) > stepAcceptance+eps {
				return ignore(fmt.Sprintf("invalid: delta %v for %s/%s exceeds ±%v", acc[opt], id, opt, stepAcceptance))
			}
			old := *cur
			nv := round4(clamp01(old + dv))
			if nv != old {
				delta := round4(nv - old)
				*cur = nv
				changes = append(changes, Change{Issue: id, Field: "acceptance", Option: opt, From: old, To: nv, Delta: &delta})
			}
		}
		if fv, present := d["firmness"]; present {
			dv, ok := toFloat(fv)
			if !ok || math.Abs(dv) > stepFirmness+eps {
				return ignore(fmt.Sprintf("invalid: firmness delta %v for %s exceeds ±%v", fv, id, stepFirmness))
			}
			nv := round4(clamp01(s.Firmness + dv))
			if nv != s.Firmness {
				delta := round4(nv - s.Firmness)
				changes = append(changes, Change{Issue: id, Field: "firmness", From: s.Firmness, To: nv, Delta: &delta})
				s.Firmness = nv
			}
		}
		if p := preferredOf(s); p != orig.Preferred {
			changes = append(changes, Change{Issue: id, Field: "preferred", From: orig.Preferred, To: p})
		}
	}
	if len(changes) == 0 {
		return ignore("no effective change")
	}
	c := content{Party: party, Source: sourceHelper, Target: &target, Changes: changes, Reasons: reasons}
	c.Text = summarize(party, changes, nil)
	return msg(tStanceUpdate, system, round, []string{deliberation.Steward}, c)
}

func toFloat(v any) (float64, bool) {
	var f float64
	switch x := v.(type) {
	case float64:
		f = x
	case int:
		f = float64(x)
	case int64:
		f = float64(x)
	case json.Number:
		var err error
		if f, err = x.Float64(); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	return f, !math.IsNaN(f) && !math.IsInf(f, 0)
}
