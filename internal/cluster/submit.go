package cluster

import (
	"context"
	"fmt"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// Submit checks a manifest file as intake does and inserts it as a new
// job (PENDING unless it says DRAFT). The file is stored as given.
func Submit(ctx context.Context, s clusterstore.Store, file []byte) (string, error) {
	id, _, err := submit(ctx, s, &JobFolder{Path: "manifest", Manifest: file}, "")
	return id, err
}

// SubmitKeyed is Submit of a manifest with its folder's files
// (ReadJobFolder) under idempotency key key (Store.SubmitKeyed, bound to
// the job id and the hashes of the manifest and the files; "": no key):
// repeat says the same submission was made before with the key, and
// nothing was inserted now.
func SubmitKeyed(ctx context.Context, s clusterstore.Store, key string, jf *JobFolder) (id string, repeat bool, err error) {
	return submit(ctx, s, jf, key)
}

// submit is the one rule of cluster intake, for `logist submit` and a
// node's intake folder: jf's Path is what errors call the file, its
// Fallback the job id when the manifest names none (file mode's rule),
// key the idempotency key ("": none, the job id is the key).
func submit(ctx context.Context, s clusterstore.Store, jf *JobFolder, key string) (string, bool, error) {
	m, err := manifest.Decode(jf.Path, jf.Manifest)
	if err != nil {
		return "", false, err
	}
	id := m.JobID
	if id == "" {
		id = jf.Fallback
	}
	if err := manifest.ValidID(id); err != nil {
		return "", false, err
	}
	switch {
	case m.Status != lifecycle.Pending && m.Status != lifecycle.Draft:
		return "", false, fmt.Errorf("job %s: a new job is PENDING or DRAFT, not %s", id, m.Status)
	}
	repeat, err := s.SubmitKeyed(ctx, clusterstore.Submission{Key: key, Command: clusterstore.SubmitCommand(id, jf.Manifest, jf.Files),
		ID: id, Status: m.Status, Manifest: jf.Manifest, BudgetMicros: clusterstore.BudgetMicros(jf.Manifest), Files: jf.Files})
	return id, repeat, err
}
