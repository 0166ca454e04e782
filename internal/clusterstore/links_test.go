package clusterstore_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
)

// TestLinksAreCheckedAsTheirLines: a unit that carries its lines' links
// (the encoder's, history.Unit.Links) is held to the job's sequence and
// last hash exactly as the same unit without them, whose lines the rule
// parses: the same verdict, the same job after, the intent found alike
// (a call past the budget refused); and links that are not one per line
// are refused.
func TestLinksAreCheckedAsTheirLines(t *testing.T) {
	t.Parallel()
	now := time.Now()
	seal := func(next int64, prev string, types ...string) ([][]byte, []history.Link) {
		var recs []*history.Record
		for _, ty := range types {
			n := 0
			r := &history.Record{Type: ty, Error: &history.ErrorInfo{Code: "TEST"}}
			if ty == history.TypeIntent {
				r = &history.Record{Type: ty, Interaction: &n, Role: "worker", Request: &history.Request{Prompt: "p"}}
			}
			recs = append(recs, r)
		}
		lines, _, err := history.Seal(recs, next, prev, now, nil)
		if err != nil {
			t.Fatal(err)
		}
		var links []history.Link
		for _, line := range lines {
			e, err := history.ParseLine(line)
			if err != nil {
				t.Fatal(err)
			}
			links = append(links, history.Link{Seq: e.Seq, PrevHash: e.PrevHash, Hash: e.Hash, Type: e.Type})
		}
		return lines, links
	}
	first, firstLinks := seal(0, "", history.TypeError, history.TypeError)
	job := clusterstore.Job{ID: "a", Status: "RUNNING", Epoch: 1, Owner: "n", NextSeq: 2, LastHash: firstLinks[1].Hash, BudgetMicros: 100, SpentMicros: 50}
	lease := &clusterstore.Lease{Job: "a", Node: "n", Epoch: 1}
	good, goodLinks := seal(2, job.LastHash, history.TypeError, history.TypeIntent)
	gap, gapLinks := seal(3, job.LastHash, history.TypeError)
	fork, forkLinks := seal(2, firstLinks[0].Hash, history.TypeError)
	for _, c := range []struct {
		name  string
		lines [][]byte
		links []history.Link
		debit int64
		want  error
	}{
		{"continues", good, goodLinks, 0, nil},
		{"a call past the budget", good, goodLinks, 50, clusterstore.ErrBudget},
		{"a debit past what an int64 holds", good, goodLinks, math.MaxInt64, clusterstore.ErrBudget},
		{"a gap", gap, gapLinks, 0, clusterstore.ErrConflict},
		{"a fork", fork, forkLinks, 0, clusterstore.ErrConflict},
		{"the history again", first, firstLinks, 0, clusterstore.ErrConflict},
	} {
		parsed, perr := clusterstore.Apply(job, lease, &clusterstore.Unit{Lines: c.lines, DebitMicros: c.debit}, now)
		linked, lerr := clusterstore.Apply(job, lease, &clusterstore.Unit{Lines: c.lines, Links: c.links, DebitMicros: c.debit}, now)
		if !errors.Is(perr, c.want) || (c.want == nil && perr != nil) {
			t.Fatalf("%s, parsed: %v, want %v", c.name, perr, c.want)
		}
		if !errors.Is(lerr, c.want) || (c.want == nil && lerr != nil) {
			t.Fatalf("%s, linked: %v, want %v", c.name, lerr, c.want)
		}
		if perr == nil && (parsed.NextSeq != linked.NextSeq || parsed.LastHash != linked.LastHash || parsed.NextSeq != 4 || parsed.LastHash != goodLinks[1].Hash) {
			t.Fatalf("%s: parsed to %d %s, linked to %d %s", c.name, parsed.NextSeq, parsed.LastHash, linked.NextSeq, linked.LastHash)
		}
	}
	for _, links := range [][]history.Link{goodLinks[:1], {}, append(goodLinks, goodLinks[1])} {
		if _, err := clusterstore.Apply(job, lease, &clusterstore.Unit{Lines: good, Links: links}, now); !errors.Is(err, clusterstore.ErrConflict) {
			t.Fatalf("%d links for %d lines: %v, want ErrConflict", len(links), len(good), err)
		}
	}
}
