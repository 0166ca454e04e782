package jobstore

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/regfile"
)

// A job the daemon cannot run for now because its storage refuses it (a
// full disk, a folder made read-only) is stalled: the scheduler retries it
// with backoff. Its manifest may be the very file that cannot be written,
// so the stall is noted in the jobs folder's own stall folder, which
// `logist status` reads; the note goes when the job runs again.
//
// A run the daemon refuses and does not retry (a history that lost
// committed records, a corrupt one: HISTORY_MISSING, HISTORY_CORRUPT) is
// noted the same way, marked Refused, so that status says why a job that
// shows RUNNING does not move; it goes when a run of the job succeeds.

// stallDir holds one note per stalled job (hidden: never a job).
const stallDir = ".stalled"

// Stall is why a job is stalled and when it is tried again.
type Stall struct {
	Code    string `json:"error_code"`
	Reason  string `json:"reason"`
	Since   string `json:"since"`
	RetryAt string `json:"retry_at"`
	Attempt int    `json:"attempt"`
	// Refused: the daemon will not run the job again by itself (RetryAt is
	// empty); a human must repair what Reason names.
	Refused bool `json:"refused,omitempty"`
}

func (s *Store) stallPath(id string) string { return filepath.Join(s.Dir, stallDir, id+".json") }

// WriteStall notes that job id is stalled. Not durable: a crash forgets
// it, and the restarted daemon finds out again.
func (s *Store) WriteStall(id string, st Stall) error {
	if err := manifest.ValidID(id); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, stallDir), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(st) // plain fields: cannot fail
	return atomicfile.WriteCopy(s.stallPath(id), b, 0o600, nil)
}

// ClearStall removes job id's stall note, if any.
func (s *Store) ClearStall(id string) error {
	err := os.Remove(s.stallPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// ClearStalls removes every stall note: a daemon starting finds out anew
// which jobs are stalled (a note the last daemon left may be stale).
func (s *Store) ClearStalls() error { return os.RemoveAll(filepath.Join(s.Dir, stallDir)) }

// ReadStall returns job id's stall note, if it is stalled.
func (s *Store) ReadStall(id string) (*Stall, bool) {
	if manifest.ValidID(id) != nil {
		return nil, false
	}
	b, err := regfile.ReadLimited(s.stallPath(id), 64<<10)
	if err != nil {
		return nil, false
	}
	var st Stall
	if json.Unmarshal(b, &st) != nil || st.Code == "" {
		return nil, false
	}
	return &st, true
}
