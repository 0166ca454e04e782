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
	id, _, err := submit(ctx, s, "manifest", "", "", file)
	return id, err
}

// SubmitKeyed is Submit under idempotency key key (Store.SubmitKeyed,
// bound to the job id and the file's hash): repeat says the same
// submission was made before with the key, and nothing was inserted now.
func SubmitKeyed(ctx context.Context, s clusterstore.Store, key string, file []byte) (id string, repeat bool, err error) {
	return submit(ctx, s, "manifest", "", key, file)
}

// submit is the one rule of cluster intake, for `logist submit` and a
// node's intake folder: name is what errors call the file, fallback the
// job id when the manifest names none (file mode's rule: the file's name),
// key the idempotency key ("": none, the job id is the key).
func submit(ctx context.Context, s clusterstore.Store, name, fallback, key string, file []byte) (string, bool, error) {
	m, err := manifest.Decode(name, file)
	if err != nil {
		return "", false, err
	}
	id := m.JobID
	if id == "" {
		id = fallback
	}
	if err := manifest.ValidID(id); err != nil {
		return "", false, err
	}
	switch {
	case m.Status != lifecycle.Pending && m.Status != lifecycle.Draft:
		return "", false, fmt.Errorf("job %s: a new job is PENDING or DRAFT, not %s", id, m.Status)
	}
	if key != "" {
		repeat, err := s.SubmitKeyed(ctx, clusterstore.Submission{Key: key, Command: clusterstore.SubmitCommand(id, file),
			ID: id, Status: m.Status, Manifest: file, BudgetMicros: clusterstore.BudgetMicros(file)})
		return id, repeat, err
	}
	return id, false, s.Submit(ctx, id, m.Status, file, clusterstore.BudgetMicros(file))
}
