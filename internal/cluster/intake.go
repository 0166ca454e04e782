package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/manifest"
)

// Folder intake: a node may watch a local folder as file mode watches its
// jobs folder. A manifest dropped there (a *.json file at its top) is
// validated as `logist submit` validates it — the manifest package's
// rules, so the same errors as file mode — and inserted into the cluster,
// then removed: its job lives in the store. The store inserts a job id
// once: a file whose job id the cluster holds with other content is a
// conflict, left in place and reported (as file mode reports a manifest
// whose job exists); one with the same content is a drop already taken
// (a crash between insert and removal, or the same file dropped on two
// nodes), removed. An invalid file is left in place and reported once per
// reason; one still being written is left for the next look.

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
		if !e.Type().IsRegular() || !strings.HasSuffix(name, ".json") || strings.HasPrefix(name, ".") {
			continue
		}
		seen[name] = true
		id, err := n.intakeFile(ctx, filepath.Join(n.IntakeDir, name))
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

// intakeFile submits one dropped manifest and removes it.
func (n *Node) intakeFile(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	data, err := io.ReadAll(io.LimitReader(f, manifest.MaxSize+1))
	_ = f.Close() // read-only
	if err != nil {
		return "", err
	}
	if len(data) > manifest.MaxSize {
		return "", &manifest.Error{File: path, Reason: fmt.Sprintf("file is larger than %d bytes; not submitted", manifest.MaxSize)}
	}
	if manifest.Incomplete(data) {
		return "", errIncomplete
	}
	id, _, err := submit(ctx, n.Store, path, strings.TrimSuffix(filepath.Base(path), ".json"), "", data)
	if errors.Is(err, clusterstore.ErrExists) {
		j, jerr := n.Store.Job(ctx, id)
		if jerr != nil {
			return "", jerr
		}
		if !bytes.Equal(j.Manifest, data) {
			return "", fmt.Errorf("%s: job %s already exists in the cluster with another manifest; rename the file or change its job_id: %w", path, id, err)
		}
		err = nil // this very manifest: taken already
	}
	if err != nil {
		return "", err
	}
	if err := os.Remove(path); err != nil {
		return "", err
	}
	return id, atomicfile.SyncDir(n.IntakeDir)
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
