package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/regfile"
)

// Prepare makes, ahead of a new job's first open, the files its history
// starts with: the active file and the head, both empty. A job's start
// otherwise creates them on the path of its first agent call, in the
// burst when a wave of jobs ends and the next begins; made while the
// machine is calm (the scheduler's preparation, runner's ahead.go), the
// start creates nothing.
//
// An empty history is no history to every reader (Present, ReadAll,
// ReadEntries, verify) and an empty head is none (ReadHead): a job whose
// files were prepared looks exactly like one that has not started, and
// one removed, edited or cancelled before its start keeps them
// harmlessly.
//
// The new file's entry is noted (atomicfile.MarkCreated) so that the
// caller's fsync of dir settles it, and OpenWith then knows it durable:
// the first unit needs no folder fsync for it. Without that fsync, or in
// another process (one that died after Prepare), OpenWith settles the
// empty file as it would a new one.
//
// made is false, and nothing is made, when dir holds any of the history's
// files already (a history, even an empty one, or its head or index).
// The caller holds the job's lock.
func Prepare(dir string) (made bool, err error) {
	for _, name := range []string{FileName, HeadFile, IndexFile} {
		if _, err := os.Lstat(filepath.Join(dir, name)); !errors.Is(err, fs.ErrNotExist) {
			if err != nil {
				return false, fmt.Errorf("prepare history: %w", err)
			}
			return false, nil
		}
	}
	f, err := regfile.OpenFile(Path(dir), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("prepare history: %w", err)
	}
	_ = f.Close() // empty; nothing written
	atomicfile.MarkCreated(Path(dir))
	// The head's entry needs no fsync (head.go: a lost head file is no
	// head); one that cannot be made now is made by the first append.
	if h, err := regfile.OpenFile(filepath.Join(dir, HeadFile), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		_ = h.Close()
	}
	return true, nil
}
