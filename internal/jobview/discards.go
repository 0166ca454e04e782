package jobview

import (
	"fmt"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/steward"
)

// Discard is what one rollback took out of the workspace that no
// recovery point held (steward.keepDiscarded records it): the files
// changed since the job's checkpoint, and the snapshot that keeps them
// or why none does.
type Discard struct {
	CommandID string `json:"command_id"`
	Time      string `json:"ts"`
	User      string `json:"user,omitempty"`
	// To is the checkpoint the rollback restored.
	To string `json:"checkpoint_id"`
	// Files are the changed paths: added, modified or deleted.
	Files []string `json:"discarded_files"`
	// Snapshot names the snapshot that holds them (snapshots/NAME.json);
	// "" when none does: NotKept says why, or every change was a
	// deletion of a file the checkpoint has.
	Snapshot string `json:"discarded_snapshot,omitempty"`
	NotKept  string `json:"discarded_not_kept,omitempty"`
}

// Discards are the rollbacks in recs that discarded something, in the
// order recorded. A rollback that changed nothing since the checkpoint
// is not among them.
func Discards(recs []history.Record) []Discard {
	var out []Discard
	for _, r := range recs {
		st := r.Steward
		if st == nil || st.Command != history.CommandRollback {
			continue
		}
		d := Discard{CommandID: st.CommandID, Time: r.Time, User: st.User}
		d.To, _ = st.Changes["checkpoint_id"].(string)
		files, _ := st.Changes["discarded_files"].([]any)
		for _, f := range files {
			if s, ok := f.(string); ok {
				d.Files = append(d.Files, s)
			}
		}
		d.Snapshot, _ = st.Changes["discarded_snapshot"].(string)
		d.NotKept, _ = st.Changes["discarded_not_kept"].(string)
		if len(d.Files) == 0 && d.NotKept == "" {
			continue
		}
		out = append(out, d)
	}
	return out
}

// DiscardNamed is the rollback of ds whose command id is name ("" names
// the last one); a rollback-ID snapshot's name is taken for its ID.
func DiscardNamed(id string, ds []Discard, name string) (*Discard, error) {
	if len(ds) == 0 {
		return nil, fmt.Errorf("job %s has no rollback that discarded changes: %w", id, jobstore.ErrNotFound)
	}
	if name == "" {
		return &ds[len(ds)-1], nil
	}
	name = strings.TrimPrefix(name, steward.DiscardedPrefix)
	known := make([]string, 0, len(ds))
	for i := range ds {
		if ds[i].CommandID == name {
			return &ds[i], nil
		}
		known = append(known, ds[i].CommandID)
	}
	return nil, fmt.Errorf("job %s has no rollback %q that discarded changes (it has: %s): %w", id, name, strings.Join(known, ", "), jobstore.ErrNotFound)
}
