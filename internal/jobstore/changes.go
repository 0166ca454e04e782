package jobstore

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// The change journal: every process that writes a job's manifest through
// a Store (the daemon's engine, a steward's command, the CLI) appends the
// job's id, one a line, to IndexDir/changes after the write. A listing
// that finds the index's journal mark still current reads only the
// journal's new lines and re-reads only those jobs: no stat of every
// manifest (docs/performance.md, "The manifest index").
//
// The journal is a cache's, like the index: not fsync'd (an index written
// in another boot does not trust it), and never created by a writer (no
// journal: no index trusts one). Its header holds a random generation; an
// indexer replaces it (a new generation) when it has grown, holding it
// exclusively (flock) while writers hold it shared, so that no line is
// written into a journal that is being dropped.

const (
	changesName   = "changes"
	journalMagic  = "LGCHANGE"
	journalHeader = 16 // magic, generation
	// journalMax is the size past which an indexer starts a new journal.
	journalMax = 1 << 20
)

func (s *Store) changesPath() string { return filepath.Join(s.Dir, IndexDir, changesName) }

// NoteChanged records that job id's manifest file changed (after the
// change). Store's own writes call it; the daemon calls it for a change
// it hears of from outside (a hand edit), and a writer of job folders
// that bypasses Store (cluster mode's mirror) calls it too. Best effort:
// a journal it cannot write to is removed, so no index trusts it.
func (s *Store) NoteChanged(id string) {
	if s.KeepJournalOpen {
		s.noteKept(id)
		return
	}
	p := s.changesPath()
	for try := 0; try < 3; try++ {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			return // no journal: nothing trusts one
		}
		if flock(f, syscall.LOCK_SH) != nil {
			_ = f.Close() // not written
			_ = os.Remove(p)
			return
		}
		mine, err := f.Stat()
		cur, cerr := os.Stat(p)
		if err != nil || cerr != nil || !os.SameFile(mine, cur) {
			_ = f.Close() // replaced meanwhile: write to the new one
			continue
		}
		_, werr := f.Write([]byte(id + "\n"))
		if err := errors.Join(werr, f.Close()); err != nil {
			_ = os.Remove(p) // a line may be lost: trust no index on it
		}
		return
	}
}

// journalWriter holds the journal open between the notes of a Store with
// KeepJournalOpen: a note then costs a lock, a stat, a write and an
// unlock, where an open per note cost about three times the system calls
// (docs/performance.md, "Kernel time per job"). The rules are
// NoteChanged's: the line is written holding the journal shared, and only
// into the file that is still the journal's path (an indexer may have
// replaced it, holding it exclusively while it did). A shared lock is its
// descriptor's, so notes made at the same time take a descriptor each
// from a free list rather than queueing for one.
type journalWriter struct {
	mu   sync.Mutex
	free []keptJournal // unlocked
}

// keptJournal is a descriptor open on the journal (or one since
// replaced), with the file's identity as opened.
type keptJournal struct {
	f  *os.File
	fi os.FileInfo
}

func (j *journalWriter) get() (keptJournal, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if n := len(j.free); n > 0 {
		k := j.free[n-1]
		j.free = j.free[:n-1]
		return k, true
	}
	return keptJournal{}, false
}

func (j *journalWriter) put(k keptJournal) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.free = append(j.free, k)
}

// drain closes every free descriptor: one was found no longer the
// journal's, and the others are as old.
func (j *journalWriter) drain() {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, k := range j.free {
		_ = k.f.Close() // unlocked, nothing pending
	}
	j.free = nil
}

func (s *Store) noteKept(id string) {
	p := s.changesPath()
	for try := 0; try < 3; try++ {
		k, ok := s.journal.get()
		if !ok {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return // no journal: nothing trusts one
			}
			fi, err := f.Stat()
			if err != nil {
				_ = f.Close() // not written: try again, as for a replaced one
				continue
			}
			k = keptJournal{f, fi}
		}
		if flock(k.f, syscall.LOCK_SH) != nil {
			_ = k.f.Close() // not written
			_ = os.Remove(p)
			return
		}
		if cur, err := os.Stat(p); err != nil || !os.SameFile(k.fi, cur) {
			_ = k.f.Close() // replaced (or removed) meanwhile: write to the new one
			s.journal.drain()
			continue
		}
		_, werr := k.f.Write([]byte(id + "\n"))
		if err := errors.Join(werr, flock(k.f, syscall.LOCK_UN)); err != nil {
			_ = k.f.Close()
			_ = os.Remove(p) // a line may be lost: trust no index on it
			return
		}
		s.journal.put(k)
		return
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// journal is the change journal as a listing found it.
type journal struct {
	f    *os.File
	gen  uint64
	size uint64
}

// openJournal opens the change journal, creating it if there is none; nil
// if neither works (a read-only folder: the index is then checked by a
// stat per job). A listing opens it before it reads any manifest, so that
// a change after that read is in the journal past the size it notes.
func (s *Store) openJournal() *journal {
	p := s.changesPath()
	f, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		if newJournal(p, false) == nil {
			f, err = os.Open(p)
		}
	}
	if err != nil {
		return nil
	}
	var h [journalHeader]byte
	fi, serr := f.Stat()
	if _, err := f.ReadAt(h[:], 0); err != nil || serr != nil || string(h[:8]) != journalMagic {
		_ = f.Close() // read-only
		return nil
	}
	return &journal{f: f, gen: binary.LittleEndian.Uint64(h[8:]), size: uint64(fi.Size())}
}

func (j *journal) close() {
	if j != nil {
		_ = j.f.Close() // read-only
	}
}

// newJournal makes a journal of a new generation at p: beside an existing
// one only if replace.
func newJournal(p string, replace bool) error {
	if err := mkIndexDir(filepath.Dir(p)); err != nil {
		return err
	}
	var h [journalHeader]byte
	copy(h[:], journalMagic)
	if _, err := rand.Read(h[8:]); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), changesName+".tmp-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(h[:])
	err = errors.Join(err, tmp.Close())
	if err == nil {
		if replace {
			err = os.Rename(tmp.Name(), p)
		} else {
			err = os.Link(tmp.Name(), p) // fails if another made one
		}
	}
	_ = os.Remove(tmp.Name()) // the link's other name, or a failed write
	return err
}

// changed returns the ids the journal names between off and its size as
// opened, and how far that reaches (a torn last line is left for later).
func (j *journal) changed(off uint64) (map[string]bool, uint64, bool) {
	if off < journalHeader || off > j.size {
		return nil, 0, false
	}
	b := make([]byte, j.size-off)
	if _, err := j.f.ReadAt(b, int64(off)); err != nil && !errors.Is(err, io.EOF) {
		return nil, 0, false
	}
	end := bytes.LastIndexByte(b, '\n') + 1
	ids := map[string]bool{}
	for _, l := range strings.Split(string(b[:end]), "\n") {
		if l != "" {
			ids[l] = true
		}
	}
	return ids, off + uint64(end), true
}

// bootID identifies this boot of the machine (zero if unknown).
func bootID() [16]byte {
	var id [16]byte
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return id
	}
	h, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
	if err == nil && len(h) == len(id) {
		copy(id[:], h)
	}
	return id
}

// renewJournal replaces a grown journal with a new generation when it can
// take it exclusively at once and it still ends where the listing read
// it (covered): mark then names the new one. The returned func releases
// the old one once the index naming the new one is written; nil if not
// renewed.
func (s *Store) renewJournal(j *journal, covered uint64, mark *indexMark) func() {
	if syscall.Flock(int(j.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return nil
	}
	unlock := func() { _ = syscall.Flock(int(j.f.Fd()), syscall.LOCK_UN) }
	p := s.changesPath()
	cur, err := os.Stat(p)
	mine, merr := j.f.Stat()
	if err != nil || merr != nil || !os.SameFile(cur, mine) || uint64(cur.Size()) != covered || newJournal(p, true) != nil {
		unlock()
		return nil
	}
	nj := s.openJournal()
	if nj == nil {
		unlock()
		return nil
	}
	defer nj.close()
	mark.Gen, mark.Off = nj.gen, journalHeader
	return unlock
}

// mkIndexDir makes IndexDir in an existing jobs folder (never the folder
// itself: a listing of a folder that is not there makes nothing).
func mkIndexDir(p string) error {
	if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return nil
}
