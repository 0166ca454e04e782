package cli

import (
	"fmt"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// jobPoints are job id's recovery points, in the order recorded (a point
// recorded twice, by a restarted job, counts once: the last). logist result
// and logist diff read checkpoints and commits from here.
func (e *env) jobPoints(id string) ([]*history.RecoveryPoint, error) {
	if _, err := e.store.Load(id); err != nil {
		return nil, err
	}
	recs, err := history.ReadAll(e.store.JobDir(id))
	if err != nil {
		return nil, err
	}
	var out []*history.RecoveryPoint
	at := map[string]int{}
	for _, r := range recs {
		p := r.RecoveryPoint
		if r.Type != history.TypeRecoveryPoint || p == nil {
			continue
		}
		if i, ok := at[p.CheckpointID]; ok {
			out[i] = p
			continue
		}
		at[p.CheckpointID] = len(out)
		out = append(out, p)
	}
	return out, nil
}

// pointNamed is the point called cp among ps.
func pointNamed(id string, ps []*history.RecoveryPoint, cp string) (*history.RecoveryPoint, error) {
	var known []string
	for _, p := range ps {
		if p.CheckpointID == cp {
			return p, nil
		}
		known = append(known, p.CheckpointID)
	}
	return nil, fmt.Errorf("job %s has no checkpoint %q (it has: %s): %w", id, cp, strings.Join(known, ", "), jobstore.ErrNotFound)
}
