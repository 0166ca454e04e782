package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/regfile"
	"github.com/logist/logist/internal/snapshot"
)

// A job's folder goes with its manifest. A manifest named job.json is a
// job's folder, as in file mode (whose jobs folder holds one a job): its
// other files — a game's scenario.json and the excerpts it cites, prompts,
// scripts — are what the manifest names relative to the folder, so they
// are submitted with it (Store.SubmitKeyed, in one transaction with the
// job, and part of what an idempotency key is bound to) and stored as the
// job's files (Store.Files): a node that claims the job writes them into
// its folder before running it (writeFolder), and a schedule's run gets
// its template's (cron.go). A manifest of another name is submitted alone,
// as before: the folder around it is not a job's. The folder is read
// strictly: regular files only (a symbolic link or a FIFO is refused,
// named), within the limits below, and none of what a job's folder holds
// of its own run (runFile, runDir): a folder with a history has run, and
// is refused.

// Limits of a submitted job folder's files.
const (
	// MaxFolderFile is the largest file submitted with a manifest.
	MaxFolderFile = 4 << 20
	// MaxFolderBytes is the most all of them may hold together.
	MaxFolderBytes = 16 << 20
	// MaxFolderFiles is how many there may be.
	MaxFolderFiles = 1000
)

// JobFolder is a manifest as submitted, with its folder's files.
type JobFolder struct {
	// Path is the manifest's file (what errors name).
	Path     string
	Manifest []byte
	// Files are the folder's files by path relative to it (nil: a
	// manifest submitted alone).
	Files map[string][]byte
	// Fallback is the job id when the manifest names none (file mode's
	// rule: the folder's name for a job.json, else the file's name).
	Fallback string
}

// ReadJobFolder reads the manifest at path and, when it is a job folder's
// job.json, the folder's files.
func ReadJobFolder(path string) (*JobFolder, error) {
	data, err := regfile.ReadLimited(path, manifest.MaxSize)
	if err != nil {
		return nil, err
	}
	if len(data) > manifest.MaxSize {
		return nil, &manifest.Error{File: path, Reason: fmt.Sprintf("file is larger than %d bytes; not submitted", manifest.MaxSize)}
	}
	jf := &JobFolder{Path: path, Manifest: data, Fallback: strings.TrimSuffix(filepath.Base(path), ".json")}
	if filepath.Base(path) != jobstore.ManifestFile {
		return jf, nil
	}
	dir := filepath.Dir(path)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	jf.Fallback = filepath.Base(abs)
	jf.Files, err = folderOwnFiles(dir)
	return jf, err
}

// folderOwnFiles reads the files of job folder dir that define the job
// besides its manifest, within the limits; errors name the file and why.
func folderOwnFiles(dir string) (map[string][]byte, error) {
	refuse := func(p, reason string) error {
		return &manifest.Error{File: p, Reason: reason + "; the job's folder is not submitted"}
	}
	if _, err := os.Lstat(history.Path(dir)); err == nil {
		return nil, refuse(history.Path(dir), "the job has a history: it has run already (submit a copy of its definition, without its history)")
	}
	out := map[string][]byte{}
	total := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return refuse(p, "a symbolic link (only regular files inside the folder are submitted)")
		case d.IsDir() && runDir(rel):
			return filepath.SkipDir
		case d.IsDir() || runFile(rel):
			return nil
		case !d.Type().IsRegular():
			return refuse(p, "not a regular file")
		case len(out) == MaxFolderFiles:
			return refuse(p, fmt.Sprintf("more than %d files", MaxFolderFiles))
		}
		b, err := regfile.ReadLimited(p, MaxFolderFile)
		if errors.Is(err, regfile.ErrNotRegular) {
			return refuse(p, err.Error())
		}
		if err != nil {
			return err
		}
		if len(b) > MaxFolderFile {
			return refuse(p, fmt.Sprintf("larger than %d bytes", MaxFolderFile))
		}
		if total += len(b); total > MaxFolderBytes {
			return refuse(p, fmt.Sprintf("the folder's files hold more than %d bytes together", MaxFolderBytes))
		}
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// runDir says whether rel, a folder of a job's folder, holds what the job
// makes as it runs (its workspace and snapshots), never its definition:
// those move with the job through recovery points.
func runDir(rel string) bool { return rel == jobstore.WorkspaceDir || rel == snapshot.Dir }

// runFile says whether rel, a file of a job's folder, is its manifest or
// a file of its run (the folder's lock, the history's files, the names of
// its repository's bundles and its stop's HEAD), which the job's own
// records carry.
func runFile(rel string) bool {
	return rel == jobstore.ManifestFile || rel == ".lock" || rel == gitBundleFile ||
		rel == parkedBundleFile || rel == parkedHeadFile || history.IsFile(rel)
}
