package history

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
)

// The history's files, all in the job folder, are named here and only
// here: no other package builds their paths or matches their names (a
// test in this package greps the repository to keep it so). Others ask
// through Path, Present, Files, IsFile and Follower.

// FileName is the active append-only log inside the job folder. Code
// outside this package uses Path; the name is exported for tests that
// damage the file on purpose.
const FileName = "history.jsonl"

// IndexFile lists the rotated archives of a history (exported for tests,
// as FileName).
const IndexFile = "history-index.json"

// JobHistoryFile is the seed-format history kept current at safe
// boundaries (WriteJobHistory).
const JobHistoryFile = "jobHistory.json"

// HeadFile holds the signed head of the history: the sequence number and
// hash of the newest record every append left (head.go). A log that ends
// before its head lost committed records.
const HeadFile = "history-head.json"

// MarkFile is the scan mark that spares an open reading the whole active
// file (mark.go): a cache, rewritten in place, never the record.
const MarkFile = "history-mark.json"

// Archives are named archiveName(n), n counting from 1: plain while a
// rotation has renamed the active file but not yet sealed it, then
// compressed (archiveGz) and listed in the index. archiveRE is the one
// pattern that recognises them.
const archiveGz = ".gz"

func archiveName(n int) string { return fmt.Sprintf("history-%06d.jsonl", n) }

var archiveRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^history-(\d{6,})\.jsonl(` + regexp.QuoteMeta(archiveGz) + `)?$`)
})

// plainArchive parses the name of an archive a rotation has not sealed.
func plainArchive(name string) (n int, ok bool) {
	m := archiveRE().FindStringSubmatch(name)
	if m == nil || m[2] != "" {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil
}

// runFileRE matches every file the history writes in a job folder: the
// active file, the index, archives (plain or sealed), the materialised
// jobHistory.json, the scan mark, and the temporary files their writers rename into
// place (".<name>.tmp" or atomicfile's ".<name>.tmp-<n>"), which a crash
// may leave behind.
var runFileRE = sync.OnceValue(func() *regexp.Regexp {
	names := regexp.QuoteMeta(FileName) + "|" + regexp.QuoteMeta(IndexFile) + "|" + regexp.QuoteMeta(JobHistoryFile) + "|" + regexp.QuoteMeta(MarkFile) +
		"|" + regexp.QuoteMeta(HeadFile) +
		`|history-\d{6,}\.jsonl(?:` + regexp.QuoteMeta(archiveGz) + `)?`
	return regexp.MustCompile(`^(?:` + names + `)$|^\.(?:` + names + `)\.tmp(?:-\d+)?$`)
})

// Path returns the path of the active file of the history in the job
// folder dir (for messages, and for tests that damage it).
func Path(dir string) string { return filepath.Join(dir, FileName) }

// IsFile reports whether name, a file's name in a job folder, is one of
// the history's files (see runFileRE): part of a job's run, never of its
// definition.
func IsFile(name string) bool { return runFileRE().MatchString(name) }

// Files lists the history's files present in the job folder dir (IsFile),
// sorted by name: the active file, the index, archives, jobHistory.json
// and any temporary file a writer left. None is not an error.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read job folder: %w", err)
	}
	var out []string
	for _, e := range ents {
		if IsFile(e.Name()) {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// Present reports whether the job folder dir holds a history with
// records, as far as its files tell without reading them: a non-empty
// active file; an empty one that a rotation started (the index exists);
// or no active file while a rotation a crash cut short has the records in
// a plain archive (opening the history finishes it). false: no history,
// or an empty one. An error is one other than a missing file, from
// looking at the active file: the caller cannot tell.
func Present(dir string) (bool, error) {
	fi, err := os.Stat(Path(dir))
	switch {
	case err == nil && fi.Size() > 0:
		return true, nil
	case err == nil:
		_, ierr := os.Stat(filepath.Join(dir, IndexFile))
		return ierr == nil, nil
	case errors.Is(err, fs.ErrNotExist):
		return rotating(dir), nil
	default:
		return false, fmt.Errorf("stat history: %w", err)
	}
}

// rotating reports a rotation under way, or one a crash cut short: the
// active file renamed into a plain archive that is not yet sealed.
func rotating(dir string) bool {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(ents, func(e os.DirEntry) bool { _, ok := plainArchive(e.Name()); return ok })
}
