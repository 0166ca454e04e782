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
	m, err := manifest.Decode("manifest", file)
	if err != nil {
		return "", err
	}
	if err := manifest.ValidID(m.JobID); err != nil {
		return "", err
	}
	switch {
	case m.EncryptHistory:
		// Each node has its own content key: a sealed history written by
		// one could not be read by the next.
		return "", fmt.Errorf("job %s: encrypt_history: %w", m.JobID, ErrUnsupported)
	case m.Schedule != nil && m.Schedule.ConcurrencyPolicy == "Replace":
		return "", fmt.Errorf("job %s: schedule concurrency_policy Replace: %w", m.JobID, ErrUnsupported)
	case m.Status != lifecycle.Pending && m.Status != lifecycle.Draft:
		return "", fmt.Errorf("job %s: a new job is PENDING or DRAFT, not %s", m.JobID, m.Status)
	}
	if err := s.Submit(ctx, m.JobID, m.Status, file, 0); err != nil {
		return "", err
	}
	return m.JobID, nil
}
