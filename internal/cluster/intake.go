package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
)

// Folder intake: a node may watch a local folder as file mode watches its
// jobs folder. A manifest dropped there (a *.json file at its top) is
// validated as `logist submit` validates it — the manifest package's
// rules, so the same errors as file mode — and inserted into the cluster,
// then removed: its job lives in the store. A folder dropped there with a
// job.json is a job's folder, as in file mode: submitted with its files
// (ReadJobFolder), then removed whole; move it in complete (mv within one
// file system), since a folder is taken as soon as its job.json is whole.
// The store inserts a job id once: a drop whose job id the cluster holds
// with other content is a conflict, left in place and reported (as file
// mode reports a manifest whose job exists); one with the same content is
// a drop already taken (a crash between insert and removal, or the same
// drop on two nodes), removed. An invalid drop is left in place and
// reported once per reason; a manifest still being written is left for
// the next look.

// intake looks once at the node's intake folder; problems maps a file to
// the last reason reported for it.
func (n *Node) intake(ctx context.Context, problems map[string]string) {
	ents, err := os.ReadDir(n.IntakeDir)
	if err != nil {
		n.reportIntake(problems, n.IntakeDir, err)
		return
	}
	seen := map[string]bool{}
	for _, e := range ents {
		name := e.Name()
		path := filepath.Join(n.IntakeDir, name)
		if e.IsDir() && !strings.HasPrefix(name, ".") {
			if !dropped(path) {
				continue
			}
			path = filepath.Join(path, jobstore.ManifestFile)
		} else if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		seen[name] = true
		id, err := n.intakeFile(ctx, path)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errIncomplete):
		case err != nil:
			n.reportIntake(problems, name, err)
		default:
			delete(problems, name)
			joblog.Log(n.Logger, "submitted manifest", joblog.Problem{Job: id}, "node", n.ID, "from", name)
		}
	}
	for name := range problems {
		if !seen[name] {
			delete(problems, name)
		}
	}
}

var errIncomplete = errors.New("manifest still being written")

// dropped says whether dir, a folder of the intake, is a job's folder
// dropped there: a job.json without a history. The intake is the node's
// own jobs folder too, whose job folders always have their history when
// they have a job.json (writeFolder).
func dropped(dir string) bool {
	if _, err := os.Lstat(filepath.Join(dir, jobstore.ManifestFile)); err != nil {
		return false
	}
	_, err := os.Lstat(history.Path(dir))
	return errors.Is(err, fs.ErrNotExist)
}

// intakeFile submits one dropped manifest (with its folder's files when
// it is a job folder's job.json) and removes the drop.
func (n *Node) intakeFile(ctx context.Context, path string) (string, error) {
	jf, err := ReadJobFolder(path)
	if err != nil {
		return "", err
	}
	if manifest.Incomplete(jf.Manifest) {
		return "", errIncomplete
	}
	id, _, err := submit(ctx, n.Store, jf, "")
	if errors.Is(err, clusterstore.ErrExists) {
		same, jerr := n.taken(ctx, id, jf)
		if jerr != nil {
			return "", jerr
		}
		if !same {
			return "", fmt.Errorf("%s: job %s already exists in the cluster with another manifest or other files; rename the drop or change its job_id: %w", path, id, err)
		}
		err = nil // this very drop: taken already
	}
	if err != nil {
		return "", err
	}
	drop := path
	if jf.Files != nil {
		drop = filepath.Dir(path) // the job's folder, whole
	}
	if err := os.RemoveAll(drop); err != nil {
		return "", err
	}
	return id, atomicfile.SyncDir(n.IntakeDir)
}

// taken says whether job id, which the cluster holds, is jf's drop: the
// same manifest, and its files as jf holds them.
func (n *Node) taken(ctx context.Context, id string, jf *JobFolder) (bool, error) {
	j, err := n.Store.Job(ctx, id)
	if err != nil {
		return false, err
	}
	if !bytes.Equal(j.Manifest, jf.Manifest) {
		return false, nil
	}
	if len(jf.Files) == 0 {
		return true, nil
	}
	stored, err := n.Store.Files(ctx, id)
	if err != nil {
		return false, err
	}
	for p, b := range jf.Files {
		if sb, ok := stored[p]; !ok || !bytes.Equal(sb, b) {
			return false, nil
		}
	}
	return true, nil
}

// reportIntake logs a file the intake could not take, once per reason.
func (n *Node) reportIntake(problems map[string]string, name string, err error) {
	if problems[name] == err.Error() {
		return
	}
	problems[name] = err.Error()
	joblog.Log(n.Logger, "invalid manifest", joblog.Problem{Job: name, Status: "INVALID", Code: codes.ManifestInvalid},
		"node", n.ID, "err", err.Error())
}
