package cluster

import (
	"context"
	"encoding/json"
	"path/filepath"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/lifecycle"
)

// OwnCommit is the history's commit hook (history.Options.Commit) of file
// mode's logistd, the owner of env's jobs folder: every unit its engine,
// steward and scheduler append is committed through the folder's store —
// a clusterstore.FolderStore opened on it with OwnFolder — under the
// owner's lease, with the manifest its commit record holds, and is
// written by the store's commit (Unit.Write: the unit's one write and
// fsync). So file mode's engine and a cluster node's commit each unit
// through the same Store.Commit.
func OwnCommit(env *jobtx.Env) func(history.Unit) error {
	store := clusterstore.OwnFolder(env.Store)
	return func(hu history.Unit) error {
		id := filepath.Base(hu.Dir)
		u := clusterstore.Unit{Lines: hu.Lines, Links: hu.Links, Write: hu.Write}
		if c := hu.Records[len(hu.Records)-1].Commit; c != nil {
			// The store reads the job's status, budget and spending
			// from it (its compact form: the file is jobtx's to write).
			m := c.Plain
			if m == nil {
				var err error
				if m, err = env.CommittedManifest(id, c); err != nil {
					return err
				}
			}
			u.Manifest = m
			if c.Plain != nil {
				u.Said = c.Said
			}
		}
		return store.Commit(context.Background(), store.Own(id), u)
	}
}

// committed sets what u commits when its last record commits a manifest
// (jobtx): the manifest as its file holds it, the status and the budget
// it says. A unit that commits none changes neither.
func committed(env *jobtx.Env, id string, recs []*history.Record, u *clusterstore.Unit) error {
	last := recs[len(recs)-1]
	if last.Commit == nil {
		return nil
	}
	file, err := env.CommittedFile(id, last.Commit)
	if err != nil {
		return err
	}
	var head struct {
		Status lifecycle.Status `json:"status"`
	}
	if err := json.Unmarshal(file, &head); err != nil {
		return err
	}
	budget := clusterstore.BudgetMicros(file)
	u.Manifest, u.Status, u.BudgetMicros = file, head.Status, &budget
	return nil
}
