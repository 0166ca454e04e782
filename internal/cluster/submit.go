package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// ErrUnsupported is a manifest that asks for what cluster mode does not
// do yet.
var ErrUnsupported = errors.New("not supported in cluster mode yet")

// Submit checks a manifest file as intake does and inserts it as a new
// job (PENDING unless it says DRAFT). The file is stored as given.
func Submit(ctx context.Context, s clusterstore.Store, file []byte) (string, error) {
	return submit(ctx, s, "manifest", "", file)
}

// submit is the one rule of cluster intake, for `logist submit` and a
// node's intake folder: name is what errors call the file, fallback the
// job id when the manifest names none (file mode's rule: the file's name).
func submit(ctx context.Context, s clusterstore.Store, name, fallback string, file []byte) (string, error) {
	m, err := manifest.Decode(name, file)
	if err != nil {
		return "", err
	}
	id := m.JobID
	if id == "" {
		id = fallback
	}
	if err := manifest.ValidID(id); err != nil {
		return "", err
	}
	switch {
	case m.Schedule != nil && m.Schedule.ConcurrencyPolicy == "Replace":
		return "", fmt.Errorf("job %s: schedule concurrency_policy Replace: %w", id, ErrUnsupported)
	case m.Status != lifecycle.Pending && m.Status != lifecycle.Draft:
		return "", fmt.Errorf("job %s: a new job is PENDING or DRAFT, not %s", id, m.Status)
	}
	if err := s.Submit(ctx, id, m.Status, file, budgetMicros(file)); err != nil {
		return id, err
	}
	return id, nil
}
