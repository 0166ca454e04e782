package jobstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/regfile"
	"golang.org/x/sys/unix"
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
//
// A full disk is the very stall it most often reports: a write that the
// disk refuses gives back part of the stall folder's reserve
// (ReserveStallSpace) and is tried again, until none is left.
func (s *Store) WriteStall(id string, st Stall) error {
	if err := manifest.ValidID(id); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, stallDir), 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(st) // plain fields: cannot fail
	for {
		err := atomicfile.WriteCopy(s.stallPath(id), b, 0o600, nil)
		if err == nil || !(errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) || !s.releaseReserve() {
			return err
		}
	}
}

// The stall folder's reserve: a file of reserveBytes allocated while
// there is space, so that the notes of jobs stalled on a full disk can
// still be written (reserveStep at a time is given back for them).
const (
	reserveFile  = ".reserve" // no job id starts with a dot
	reserveBytes = 64 << 10
	reserveStep  = 4 << 10 // a block or page: about what a note takes
)

// ReserveStallSpace allocates the stall folder's reserve, or tops it up
// (the daemon at start, and as a stall ends). On a full disk it fails,
// keeping what it had.
func (s *Store) ReserveStallSpace() error {
	if err := os.MkdirAll(filepath.Join(s.Dir, stallDir), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.Dir, stallDir, reserveFile), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // nothing written to lose: the blocks are allocated or not
	err = unix.Fallocate(int(f.Fd()), 0, 0, reserveBytes)
	if errors.Is(err, unix.EOPNOTSUPP) {
		// No fallocate (some file systems): blocks written are allocated.
		_, err = f.WriteAt(make([]byte, reserveBytes), 0)
	}
	return err
}

// releaseReserve gives reserveStep bytes of the reserve back to the file
// system; false when there were none to give.
func (s *Store) releaseReserve() bool {
	p := filepath.Join(s.Dir, stallDir, reserveFile)
	fi, err := os.Stat(p)
	if err != nil || fi.Size() == 0 {
		return false
	}
	return os.Truncate(p, max(fi.Size()-reserveStep, 0)) == nil
}

// ClearStall removes job id's stall note, if any.
func (s *Store) ClearStall(id string) error {
	err := os.Remove(s.stallPath(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		if fi, serr := os.Stat(filepath.Join(s.Dir, stallDir, reserveFile)); serr == nil && fi.Size() < reserveBytes {
			_ = s.ReserveStallSpace() // best effort: the space may not be back yet
		}
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

// probeBytes is what ProbeSpace asks of the file system: more than an
// answer's history records and the manifest take, so that a disk with
// less free does not make a job's next attempt call its agent only to
// drop the answer.
const probeBytes = 64 << 10

// ProbeSpace says whether the jobs folder's storage takes a write again
// after refusing one (full, over quota, read-only): it allocates
// probeBytes in a file of the stall folder, syncs it and removes it. A
// job stalled on a full disk is run again (its agent asked again) only
// once the probe passes.
func (s *Store) ProbeSpace() error {
	if err := os.MkdirAll(filepath.Join(s.Dir, stallDir), 0o700); err != nil {
		return err
	}
	p := filepath.Join(s.Dir, stallDir, ".probe")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer os.Remove(p) //nolint:errcheck // a probe left is removed by the next
	err = unix.Fallocate(int(f.Fd()), 0, 0, probeBytes)
	if errors.Is(err, unix.EOPNOTSUPP) {
		// No fallocate (some file systems): blocks written are allocated.
		_, err = f.WriteAt(make([]byte, probeBytes), 0)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("storage probe: %w", err)
	}
	return nil
}
