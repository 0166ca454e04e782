package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
)

// Git workspaces move with the job too. A snapshot holds a workspace's
// files, never its .git; so the unit that records a recovery point of a
// git job also carries a git bundle of the workspace's refs (the job
// branch with every commit the points made, the base ref), stored as an
// object named by its SHA-256 like the snapshot's, under the same fence,
// and the bundle's name as a file of the job's folder. A node that claims
// the job restores the workspace's files from the snapshot, then its
// repository from the bundle (gitws.Unbundle), its branch at the commit
// of the job's current checkpoint (checkpointCommit: the latest point's,
// or the one a rollback returned to, as file mode's rollback leaves it):
// the job continues its branch on any node and ends with it. A rollback
// (Steer with Restore) is given the repository too, so that its file
// form moves the branch as in file mode and records the commit it leaves.
// A stop for a steward (park) carries the repository as the worker left
// it — its own commits, branches and HEAD — in a bundle of its own
// (bundleParked), which a claim restoring the parked workspace restores
// with it (restoreWorkspace decides which, once).

// gitBundleFile names, in a job's folder (outside its workspace), the
// object holding the bundle of the job's latest recovery point;
// parkedBundleFile the one of its last stop's (park), and parkedHeadFile
// holds that stop's HEAD (gitws.Head). The store's sweeps keep the
// objects the bundle files name.
const (
	gitBundleFile    = clusterstore.BundleFile
	parkedBundleFile = clusterstore.ParkedBundleFile
	parkedHeadFile   = ".git-parked-head"
)

// bundlePoint adds to u, a unit recording a recovery point of the job in
// folder dir, the bundle of its workspace's repository, if it has one
// (the object only if known lacks it; into bundles whatever known says).
func bundlePoint(ctx context.Context, dir string, known map[string]bool, u *clusterstore.Unit, bundles map[string][]byte) error {
	_, err := bundleInto(ctx, dir, known, u, gitBundleFile, bundles)
	return err
}

// bundleParked adds to u, a unit stopping the job in folder dir for a
// steward (its point the parked one), the bundle of its workspace's
// repository as the worker left it — what it staged too
// (gitws.BundleParked) — and its HEAD, if it has one (the object as
// bundlePoint adds it). unkept says why what the worker staged does not
// go with it ("" when it does, or there is none).
func bundleParked(ctx context.Context, dir string, known map[string]bool, u *clusterstore.Unit, bundles map[string][]byte) (unkept string, err error) {
	ws := filepath.Join(dir, jobstore.WorkspaceDir)
	if !isGit(ws) {
		return "", nil
	}
	head, err := gitws.Head(ctx, ws)
	if err != nil {
		return "", fmt.Errorf("git HEAD: %w", err)
	}
	b, unkept, err := gitws.BundleParked(ctx, ws)
	if err != nil {
		return "", fmt.Errorf("git bundle: %w", err)
	}
	addBundle(b, known, u, parkedBundleFile, bundles)
	u.Files[parkedHeadFile] = []byte(head + "\n")
	return unkept, nil
}

// bundleInto adds to u the bundle of the repository of the workspace of
// job folder dir, if it has one (addBundle), named by u's file name;
// false when it has none.
func bundleInto(ctx context.Context, dir string, known map[string]bool, u *clusterstore.Unit, name string, bundles map[string][]byte) (bool, error) {
	ws := filepath.Join(dir, jobstore.WorkspaceDir)
	if !isGit(ws) {
		return false, nil
	}
	b, err := gitws.Bundle(ctx, ws)
	if err != nil {
		return false, fmt.Errorf("git bundle: %w", err)
	}
	addBundle(b, known, u, name, bundles)
	return true, nil
}

// addBundle adds bundle b to u as the object its file name names (the
// object only if known lacks it). bundles gets the object whether u
// carries it or not: a unit refused because a sweep collected a bundle
// known took as stored (clusterstore.ErrMissingObject) sends it again
// from there, the bytes its file names.
func addBundle(b []byte, known map[string]bool, u *clusterstore.Unit, name string, bundles map[string][]byte) {
	s := sha256.Sum256(b)
	sum := hex.EncodeToString(s[:])
	bundles[sum] = b
	if !known[sum] {
		if u.Objects == nil {
			u.Objects = map[string][]byte{}
		}
		u.Objects[sum] = b
	}
	u.Files[name] = []byte(sum)
}

// isGit says whether workspace ws is a git workspace (one Logist may
// read: its .git a folder).
func isGit(ws string) bool {
	fi, err := os.Lstat(filepath.Join(ws, ".git"))
	return err == nil && fi.IsDir()
}

// restoreGit makes the repository of job id's workspace in folder dir
// again from the bundle its folder names (writeFolder wrote the file, the
// history and the workspace's files), adding the bundle's object to
// known. When the workspace is the one the job's last stop parked
// (parked: writeFolder's choice), that is the stop's bundle, with HEAD
// and every branch as the worker left them; otherwise the latest point's,
// its branch at the commit of the job's current checkpoint. A job
// without one has nothing to restore.
func restoreGit(ctx context.Context, s clusterstore.Store, dir, id string, known map[string]bool, parked bool) error {
	name, head := gitBundleFile, ""
	if parked {
		h, err := os.ReadFile(filepath.Join(dir, parkedHeadFile))
		switch {
		case err == nil:
			name, head = parkedBundleFile, strings.TrimSpace(string(h))
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		// No HEAD: a stop stored without its repository (a job that is
		// not a git one, or one parked before stops carried it): the
		// point's bundle, as then.
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) && head == "" {
		return nil
	}
	if err != nil {
		return err
	}
	sum := strings.TrimSpace(string(b))
	if !clusterstore.ValidSum(sum) {
		return fmt.Errorf("job %s: git bundle %q is not an object's name", id, sum)
	}
	objs, err := s.Objects(ctx, []string{sum})
	if err != nil {
		return fmt.Errorf("job %s: git bundle: %w", id, err)
	}
	if objs[sum] == nil {
		return fmt.Errorf("job %s: git bundle %s is not in the store", id, sum)
	}
	ws, branch := filepath.Join(dir, jobstore.WorkspaceDir), gitws.Branch(id)
	if head != "" {
		// The worker's repository as it left it: nothing moves.
		if err := gitws.UnbundleHead(ctx, ws, objs[sum], head); err != nil {
			return fmt.Errorf("job %s: restore the stopped workspace's repository: %w", id, err)
		}
		known[sum] = true
		return nil
	}
	if err := gitws.Unbundle(ctx, ws, objs[sum], branch); err != nil {
		return fmt.Errorf("job %s: restore the workspace's repository: %w", id, err)
	}
	known[sum] = true
	lines, err := newLines(dir, 0)
	if err != nil {
		return err
	}
	commit, err := checkpointCommit(lines)
	if err != nil {
		return fmt.Errorf("job %s: %w", id, err)
	}
	if commit == "" {
		return nil
	}
	if tip, err := gitws.Tip(ctx, ws, branch); err == nil && tip == commit {
		return nil
	}
	// A rollback returned to an earlier point than the bundle's: the
	// branch goes back to its commit, as file mode's rollback put it.
	if err := gitws.Restore(ctx, ws, branch, commit); err != nil {
		return fmt.Errorf("job %s: put the branch back at %s: %w", id, commit, err)
	}
	return nil
}

// checkpointCommit is the commit of the job's current checkpoint, the
// last record naming one with a snapshot (the rule restoreWorkspace
// applies): a git job's recovery point's commit, or the one a steward's
// rollback returned to ("" when that record names none).
func checkpointCommit(lines [][]byte) (string, error) {
	commit := ""
	for _, line := range lines {
		e, err := history.ParseLine(line)
		if err != nil {
			return "", err
		}
		if _, snap, ok := e.Checkpoint(); !ok || snap == nil {
			continue
		}
		commit = ""
		switch {
		case e.RecoveryPoint != nil && e.RecoveryPoint.Git != nil:
			commit = e.RecoveryPoint.Git.Commit
		case e.Steward != nil:
			commit, _ = e.Steward.Changes["git_commit"].(string)
		}
	}
	return commit, nil
}
