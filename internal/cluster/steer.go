package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/jobview"
	"github.com/logist/logist/internal/lifecycle"
)

// Steering is a steward's command on one job of the cluster.
type Steering struct {
	Job string
	// Key is the command's idempotency key; Command what the key is bound
	// to (the command and its arguments, in words).
	Key, Command string
	// Restore is a checkpoint whose snapshot the command reads besides
	// the current one (rollback --to): its objects are written into the
	// folder too.
	Restore string
	// Apply runs the command, unchanged from file mode, on the job in
	// folder form in jobsDir (a temporary jobs folder); it may be called
	// again when the job moved on meanwhile.
	Apply func(jobsDir string) error
}

// Steered is a steering's outcome.
type Steered struct {
	// Repeat: the key was used before by the same command, whose outcome
	// this is; nothing was changed now.
	Repeat bool
	Status lifecycle.Status
	Epoch  int64
}

// steerTries bounds how often a steering is recomputed because the job's
// history moved on (its node appended) between the read and the write.
const steerTries = 20

// Steer applies a steward's command to a job of the cluster: the job is
// written in folder form into a temporary folder from the store, the
// command runs there as in file mode (signed records, checks of status,
// its effects on the manifest), and what it appended — its records, the
// manifest it committed, the files it wrote — goes to the store in one
// Store.Steer under the key. That bumps the job's epoch: a node running
// the job (a halt) is fenced at its next heartbeat or write and kills its
// agent. A job whose history moved on in between is read again and the
// command recomputed, so it always applies to the job as it is. A key used
// before by the same command returns its first outcome; by another one,
// clusterstore.ErrIdempotency.
func Steer(ctx context.Context, s clusterstore.Store, st Steering) (*Steered, error) {
	probe := clusterstore.Steering{Job: st.Job, Key: st.Key, Command: st.Command}
	for try := 0; ; try++ {
		use, err := s.SteerKey(ctx, st.Key)
		if err != nil {
			return nil, err
		}
		if use != nil {
			if err := clusterstore.KeyReuse(use, &probe); err != nil {
				return nil, err
			}
			return &Steered{Repeat: true, Status: use.Status, Epoch: use.Epoch}, nil
		}
		out, err := steerOnce(ctx, s, st)
		if err == nil || !errors.Is(err, clusterstore.ErrConflict) || try+1 >= steerTries {
			return out, err
		}
		select { // the job moved on: read it again
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(try+1) * 20 * time.Millisecond):
		}
	}
}

func steerOnce(ctx context.Context, s clusterstore.Store, st Steering) (*Steered, error) {
	tmp, err := os.MkdirTemp("", "logist-steer-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	// The workspace is the one the job would resume with — what its last
	// stop parked, when newer than its checkpoint — as file mode's
	// command finds it: a rollback keeps what it discards of it
	// (steward.keepDiscarded), which the steering stores (kept).
	j, w, err := writeFolder(ctx, s, tmp, st.Job, func(cp string) bool { return cp == st.Restore }, true)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(tmp, st.Job)
	if st.Restore != "" {
		// A rollback moves a git job's branch: its file form needs the
		// repository, the one the workspace goes with (a stop's, as the
		// worker left it: the commit the rollback leaves is its tip).
		// The steering stores it as the rollback leaves it (below).
		if err := restoreGit(ctx, s, dir, st.Job, map[string]bool{}, w.parked); err != nil {
			return nil, err
		}
	}
	before, err := folderFiles(dir)
	if err != nil {
		return nil, err
	}
	if err := st.Apply(tmp); err != nil {
		return nil, err
	}
	lines, err := newLines(dir, j.NextSeq)
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("job %s: the command recorded nothing", st.Job)
	}
	file, err := os.ReadFile(filepath.Join(dir, jobstore.ManifestFile))
	if err != nil {
		return nil, err
	}
	var head struct {
		Status lifecycle.Status `json:"status"`
	}
	if err := json.Unmarshal(file, &head); err != nil {
		return nil, fmt.Errorf("job %s: manifest after the command: %w", st.Job, err)
	}
	after, err := folderFiles(dir)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for p, b := range after {
		if old, ok := before[p]; !ok || !bytes.Equal(old, b) {
			files[p] = b
		}
	}
	_, last, err := clusterstore.Continue(j, lines)
	if err != nil {
		return nil, err
	}
	point, objects, err := kept(dir, lines, w.known)
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", st.Job, err)
	}
	bundles := map[string][]byte{}
	if st.Restore != "" {
		// The repository as the rollback left it — the branch at the
		// checkpoint's commit, the commit it left kept by its ref
		// (gitws.AbandonedRef), the worker's commits and branches — is
		// the job's bundle from here on (restoreGit), so every later
		// bundle carries the abandoned commit, as file mode's repository
		// keeps it.
		u := clusterstore.Unit{Files: files, Objects: objects}
		if _, err := bundleInto(ctx, dir, w.known, &u, gitBundleFile, bundles); err != nil {
			return nil, fmt.Errorf("job %s: the rolled-back repository: %w", st.Job, err)
		}
		objects = u.Objects
	}
	// The point's objects and the bundle may have been collected since
	// the folder was written: the steering is sent again with them as a
	// node's unit is.
	var out *clusterstore.Job
	err = sendNamed(dir, point, files, objects, bundles, func(objects map[string][]byte) error {
		var err error
		out, err = s.Steer(ctx, clusterstore.Steering{Job: st.Job, Key: st.Key, Command: st.Command,
			From: j.Status, To: head.Status, Lines: lines, Manifest: file, Files: files,
			Point: point, Objects: objects})
		return err
	})
	if err != nil {
		return nil, err
	}
	// A steering racing this one under the same key stored its own
	// records first (the store then answers the job as it is): a repeat.
	return &Steered{Repeat: out.LastHash != last, Status: out.Status, Epoch: out.Epoch}, nil
}

// kept is the snapshot a steward's records (lines, of job folder dir)
// name as the work a rollback discarded (jobview.Discards: the listing
// steward.keepDiscarded wrote into the folder's snapshots), as the point
// the steering stores, at the record naming it, with its objects not in
// known; nil when none does. A steering keeps at most one.
func kept(dir string, lines [][]byte, known map[string]bool) (*clusterstore.RecoveryPoint, map[string][]byte, error) {
	var p *clusterstore.RecoveryPoint
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			return nil, nil, err
		}
		for _, d := range jobview.Discards([]history.Record{e.Record}) {
			if d.Snapshot == "" {
				continue
			}
			if p != nil {
				return nil, nil, fmt.Errorf("a steering keeps two snapshots (%s, %s)", p.ID, d.Snapshot)
			}
			p = &clusterstore.RecoveryPoint{ID: d.Snapshot, Seq: e.Seq}
		}
	}
	if p == nil {
		return nil, nil, nil
	}
	objects, err := withListing(dir, p, known)
	if err != nil {
		return nil, nil, err
	}
	return p, objects, nil
}

// newLines are the records of dir's history from sequence next on.
func newLines(dir string, next int64) ([][]byte, error) {
	b, err := os.ReadFile(history.Path(dir))
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, line := range bytes.SplitAfter(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		e, err := history.ParseLine(line)
		if err != nil {
			return nil, err
		}
		if e.Seq >= next {
			out = append(out, line)
		}
	}
	return out, nil
}

// folderFiles are the files of a job's folder that a command may write
// besides its manifest and history (replies, a game's files), by path
// relative to the folder; the workspace and its snapshots move with the
// job through recovery points, not through a command.
func folderFiles(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if runDir(rel) {
				return filepath.SkipDir // the workspace and its snapshots: not a command's
			}
			return nil
		}
		if !d.Type().IsRegular() || runFile(rel) {
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	})
	return out, err
}
