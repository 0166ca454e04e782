package cluster

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/logist/logist/internal/atomicfile"
	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
)

// readTries bounds how often readJob reads a job again whose history
// moved on between its row and its lines.
const readTries = 5

// readJob reads job id's row and its history as of one moment: the two
// are two reads, and a commit between them (another node's steering, the
// owner's next unit) leaves more lines than the row counted. It reads
// both again then, a few times, before it gives up.
func readJob(ctx context.Context, s clusterstore.Store, id string) (*clusterstore.Job, [][]byte, error) {
	for try := 1; ; try++ {
		j, err := s.Job(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		lines, err := s.History(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if int64(len(lines)) == j.NextSeq {
			return j, lines, nil
		}
		if try >= readTries {
			return nil, nil, fmt.Errorf("job %s: history moved while read, %d times; try again", id, try)
		}
	}
}

// writeFolder writes job id as the store holds it in folder form under
// jobsDir: <id>/job.json (the manifest of the last commit, byte for byte),
// <id>/history.jsonl (the records as stored), the files the records
// depend on (Store.Files: replies, the protocol's artifacts and role
// keys), the recovery points' snapshots and the workspace restored from
// the current checkpoint (restoreWorkspace, with the objects of the
// points also names; the workspace the job's last stop parked when
// parked says so and it is newer), replacing whatever was there.
// Everything is fsync'd. It returns the job and what restoreWorkspace
// made of its workspace (the snapshot objects written, which workspace).
func writeFolder(ctx context.Context, s clusterstore.Store, jobsDir, id string, also func(cp string) bool, parked bool) (*clusterstore.Job, restored, error) {
	j, lines, err := readJob(ctx, s, id)
	if err != nil {
		return nil, restored{}, err
	}
	dir := filepath.Join(jobsDir, id)
	// The manifest goes first and comes back last: a folder of the node's
	// with a job.json always has its history, which a job's folder dropped
	// into the intake (the same folder) has not.
	if err := os.Remove(filepath.Join(dir, jobstore.ManifestFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, restored{}, err
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, restored{}, err
	}
	if err := atomicfile.MkdirAll(filepath.Join(dir, jobstore.WorkspaceDir), 0o700); err != nil {
		return nil, restored{}, err
	}
	w, err := restoreWorkspace(ctx, s, dir, id, lines, also, parked)
	if err != nil {
		return nil, restored{}, err
	}
	if err := atomicfile.WriteFile(history.Path(dir), bytes.Join(lines, nil), 0o600); err != nil {
		return nil, restored{}, err
	}
	files, err := s.Files(ctx, id)
	if err != nil {
		return nil, restored{}, err
	}
	for p, b := range files {
		if !filepath.IsLocal(p) {
			return nil, restored{}, fmt.Errorf("job %s: stored file %q is not inside the job's folder", id, p)
		}
		if err := atomicfile.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o700); err != nil {
			return nil, restored{}, err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, p), b, 0o600); err != nil {
			return nil, restored{}, err
		}
	}
	err = atomicfile.WriteFile(filepath.Join(dir, jobstore.ManifestFile), j.Manifest, 0o600)
	jobstore.New(jobsDir).NoteChanged(id) // for listings of the folder
	if err != nil {
		return nil, restored{}, err
	}
	return j, w, atomicfile.SyncDir(jobsDir)
}

// Export writes job id in folder form under jobsDir (its workspace as
// its current checkpoint holds it, and every point's snapshot, so that a
// rollback works on the export), with jobHistory.json
// and, in jobsDir/.logist/signing.pub, the public keys of every node that
// signed its history (one a line), so that `logist verify` checks it
// offline: `logist --jobs-dir DIR verify JOB`.
func Export(ctx context.Context, s clusterstore.Store, id, jobsDir string) error {
	if err := atomicfile.MkdirAll(jobsDir, 0o700); err != nil {
		return err
	}
	j, _, err := writeFolder(ctx, s, jobsDir, id, func(string) bool { return true }, true)
	if err != nil {
		return err
	}
	dir := filepath.Join(jobsDir, id)
	var head struct {
		CreatedAt string `json:"created_at"`
	}
	_ = json.Unmarshal(j.Manifest, &head)
	if err := history.WriteJobHistory(dir, id, head.CreatedAt, filepath.Join(dir, jobstore.WorkspaceDir)); err != nil {
		return err
	}
	return writeKeyring(ctx, s, jobsDir)
}

// writeKeyring writes the public keys of every registered node and
// steward into jobsDir/.logist/signing.pub (one a line).
func writeKeyring(ctx context.Context, s clusterstore.Store, jobsDir string) error {
	nodes, err := s.Nodes(ctx)
	if err != nil {
		return err
	}
	var keys []ed25519.PublicKey
	for _, n := range nodes {
		keys = append(keys, n.Public)
	}
	if err := atomicfile.MkdirAll(filepath.Join(jobsDir, signing.Dir), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(jobsDir, signing.Dir, signing.PublicFile), signing.EncodeKeyring(keys), 0o600)
}
