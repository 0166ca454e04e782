package cli

import (
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobview"
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
	return jobview.Points(recs), nil
}

// pointNamed is the point called cp among ps (jobview.PointNamed).
func pointNamed(id string, ps []*history.RecoveryPoint, cp string) (*history.RecoveryPoint, error) {
	return jobview.PointNamed(id, ps, cp)
}
