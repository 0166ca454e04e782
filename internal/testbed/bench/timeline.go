package bench

// Scenario 6's excess over its ideal, taken apart from the jobs' own
// histories after a round: how long the first wave took to start, what the
// hand-overs between waves added, and what came after the last start. The
// three parts sum to the measured total minus the ideal, so a bench run
// says where goal 6's excess went, not only how large it was
// (docs/performance.md, goal 6).
//
// A job's start is its first intent record's time: the records of the
// unit that makes the first call durable are stamped as they are encoded,
// before that unit's fsync, after which the agent starts. The response's
// time less the call's duration would be later by whatever delayed the
// outcome's transaction after the agent returned (the CPU gate puts the
// next wave's starts first), so it is not used.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/logist/logist/internal/history"
)

// concParts is a round's excess over waves × agent time, in milliseconds.
type concParts struct {
	// Ramp: the renames began → the p-th job's start (the first wave
	// started).
	Ramp float64
	// Handovers: the last job's start − the p-th job's start − (waves −
	// 1) × the agent's time: what the hand-overs from one wave's jobs to
	// the next added along the slowest slot.
	Handovers float64
	// Tail: the last job seen ended − the last job's start − the agent's
	// time (that start's fsync, the outcome, the supervisor's turn, the
	// end's commit and the harness's poll).
	Tail float64
}

// jobStarts is each job's start (its first intent's time), in order.
// jobs holds the folders of list.
func jobStarts(jobs string, list []string) ([]time.Time, error) {
	out := make([]time.Time, 0, len(list))
	for _, id := range list {
		t, err := firstIntent(history.Path(filepath.Join(jobs, id)))
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", id, err)
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out, nil
}

// firstIntent is the time of the first intent record in history file p.
func firstIntent(p string) (time.Time, error) {
	f, err := os.Open(p)
	if err != nil {
		return time.Time{}, err
	}
	defer func() { _ = f.Close() }() // read only
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var line struct {
			Rec struct {
				Type string    `json:"type"`
				TS   time.Time `json:"ts"`
			} `json:"rec"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		if line.Rec.Type == "intent" {
			return line.Rec.TS, nil
		}
	}
	if err := sc.Err(); err != nil {
		return time.Time{}, err
	}
	return time.Time{}, fmt.Errorf("%s: no intent recorded", p)
}

// splitExcess takes a round apart: began is when the renames began, total
// the round's measured time, starts the jobs' starts in order (one per
// job), p the parallelism and agent each worker's time.
func splitExcess(began time.Time, total time.Duration, starts []time.Time, p int, agent time.Duration) (concParts, error) {
	n := len(starts)
	if n == 0 || p < 1 {
		return concParts{}, fmt.Errorf("no agent starts")
	}
	if p > n {
		p = n
	}
	waves := (n + p - 1) / p
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	full, last := starts[p-1], starts[n-1]
	return concParts{
		Ramp:      ms(full.Sub(began)),
		Handovers: ms(last.Sub(full) - time.Duration(waves-1)*agent),
		Tail:      ms(total - last.Sub(began) - agent),
	}, nil
}
