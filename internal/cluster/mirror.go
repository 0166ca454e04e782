package cluster

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// Mirror keeps jobs of the store in folder form in a local jobs folder,
// for the readers of file mode (logs -f, watch, history): each Sync
// appends the records a job gained to its history.jsonl and replaces its
// job.json when the stored manifest changed, so a reader following the
// folder sees the job as it goes on. Jobs are those named, or every job.
type Mirror struct {
	Store clusterstore.Store
	Dir   string
	Jobs  []string
	// Also names the points whose objects a job's folder gets besides
	// its current checkpoint's (writeFolder; nil: none), for a reader of
	// their snapshots' files (logist discarded --into).
	Also func(cp string) bool
	// mu serialises syncs (a follower's and its owner's own).
	mu   sync.Mutex
	seen map[string]mirrored
}

type mirrored struct {
	records  int64
	manifest []byte
}

// Sync brings the folder up to the store once.
func (m *Mirror) Sync(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.start(ctx); err != nil {
		return err
	}
	ids := m.Jobs
	if ids == nil {
		js, err := m.Store.Jobs(ctx)
		if err != nil {
			return err
		}
		for _, j := range js {
			ids = append(ids, j.ID)
		}
	}
	return m.syncJobs(ctx, ids)
}

// SyncJobs brings jobs ids of the folder up to the store.
func (m *Mirror) SyncJobs(ctx context.Context, ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.start(ctx); err != nil {
		return err
	}
	return m.syncJobs(ctx, ids)
}

// start writes the keyring at the first sync.
func (m *Mirror) start(ctx context.Context) error {
	if m.seen != nil {
		return nil
	}
	if err := writeKeyring(ctx, m.Store, m.Dir); err != nil {
		return err
	}
	m.seen = map[string]mirrored{}
	return nil
}

func (m *Mirror) syncJobs(ctx context.Context, ids []string) error {
	for _, id := range ids {
		if err := m.syncJob(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

func (m *Mirror) syncJob(ctx context.Context, id string) error {
	had, ok := m.seen[id]
	if !ok {
		j, _, err := writeFolder(ctx, m.Store, m.Dir, id, m.Also, true)
		if err != nil {
			return err
		}
		m.seen[id] = mirrored{records: j.NextSeq, manifest: j.Manifest}
		return nil
	}
	j, err := m.Store.Job(ctx, id)
	if err != nil {
		return err
	}
	dir := filepath.Join(m.Dir, id)
	if j.NextSeq > had.records {
		lines, err := m.Store.History(ctx, id)
		if err != nil {
			return err
		}
		if int64(len(lines)) < j.NextSeq {
			return nil // read between a commit's row and lines: next time
		}
		f, err := os.OpenFile(history.Path(dir), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		_, werr := f.Write(bytes.Join(lines[had.records:j.NextSeq], nil))
		if err := errors.Join(werr, f.Close()); err != nil {
			return err
		}
		had.records = j.NextSeq
	}
	if !bytes.Equal(j.Manifest, had.manifest) {
		err := atomicfile.WriteFile(filepath.Join(dir, jobstore.ManifestFile), j.Manifest, 0o600)
		jobstore.New(m.Dir).NoteChanged(id) // for listings of the folder
		if err != nil {
			return err
		}
		had.manifest = j.Manifest
	}
	m.seen[id] = had
	return nil
}

// Follow syncs until ctx ends: at once the jobs the store says changed
// (clusterstore.Notifier), every job after its listening connection came
// back ("": whatever was missed meanwhile), and every job every interval
// besides, a fallback poll (FollowEvery says how often). Errors are
// retried (the database may be away for a while), the last one is
// returned.
func (m *Mirror) Follow(ctx context.Context, every time.Duration) error {
	wake := make(chan struct{}, 1)
	var mu sync.Mutex
	changed, all := map[string]bool{}, false
	if n, ok := m.Store.(clusterstore.Notifier); ok {
		ctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = n.Notify(ctx, func(id string) {
				if id != "" && m.Jobs != nil && !slices.Contains(m.Jobs, id) {
					return
				}
				mu.Lock()
				if id == "" {
					all = true
				} else {
					changed[id] = true
				}
				mu.Unlock()
				select {
				case wake <- struct{}{}:
				default: // a sync is due already
				}
			})
		}()
		defer func() { cancel(); <-done }()
	}
	var last error
	var retry <-chan time.Time // after a failed sync: all again, soon
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		whole := false
		select {
		case <-ctx.Done():
			return last
		case <-t.C:
			whole = true
		case <-retry:
			whole, retry = true, nil
		case <-wake:
		}
		mu.Lock()
		ids := slices.Sorted(maps.Keys(changed))
		whole = whole || all
		changed, all = map[string]bool{}, false
		mu.Unlock()
		if whole {
			last = m.Sync(ctx)
		} else {
			last = m.SyncJobs(ctx, ids)
		}
		if last != nil && retry == nil {
			retry = time.After(followRetry)
		}
	}
}

// FollowEvery is how often a follower of s polls it: slowly when s
// notifies (a poll only makes up for a notice lost), often when it does
// not.
func FollowEvery(s clusterstore.Store) time.Duration {
	if _, ok := s.(clusterstore.Notifier); ok {
		return followFallback
	}
	return followPoll
}

const (
	followPoll     = 500 * time.Millisecond
	followFallback = 10 * time.Second
	followRetry    = time.Second
)
