package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Bundle returns a git bundle of every ref of the workspace dir (the job
// branch, the base ref, the source's branches): what another machine
// needs to make the workspace's repository again (Unbundle). Cluster
// nodes store it with a recovery point, so that a git job moves with its
// branch. It never carries ParkedIndexRef (only BundleParked's does).
func Bundle(ctx context.Context, dir string) ([]byte, error) {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return nil, err
	}
	return bundle(ctx, c, false)
}

// ParkedIndexRef names, in the bundle of a stopped worker's repository
// (BundleParked), the commit that records its index when the index is not
// HEAD's tree: what the worker staged (git add) but did not commit. As git
// stash records an index, the commit's tree is the index's (git
// write-tree: every blob it names is in the bundle, and no node's stat
// data is) and its parent HEAD. No tree holds an intent-to-add entry
// (git add -N: a path in the index with no content yet), so the commit's
// message lists them (parkedMessage), and an index whose only change is
// such entries is recorded too. No repository an agent sees keeps the
// ref: BundleParked deletes it once the bundle is written, UnbundleHead
// once the index is read back from it.
const ParkedIndexRef = "refs/logist/parked-index"

// The parked index's commit message: its subject, then trailers, one a
// line: the format (parkedFormatKey; a commit without one is of format 1,
// before intent-to-add entries were carried) and each intent-to-add path
// (parkedITAKey), Go-quoted in ASCII (a path may hold a newline, or bytes
// that are not UTF-8). A reader takes the lines it knows and ignores
// the others, so a later format may add lines; a line it cannot read is
// skipped (that path comes back untracked, as before format 2).
const (
	parkedSubject   = "logist: the index of a stopped worker"
	parkedFormatKey = "Logist-Parked-Index-Format: "
	parkedITAKey    = "Logist-Intent-To-Add: "
	parkedFormat    = 2
)

// parkedMessage is the parked index's commit message for its intent-to-add
// paths.
func parkedMessage(ita []string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\n%s%d\n", parkedSubject, parkedFormatKey, parkedFormat)
	for _, p := range ita {
		b.WriteString(parkedITAKey + strconv.QuoteToASCII(p) + "\n")
	}
	return []byte(b.String())
}

// parkedITA reads the intent-to-add paths from the raw commit object
// (git cat-file commit) of a parked index: none from a format-1 one.
// Only a path that names a file inside the repository is taken.
func parkedITA(raw []byte) []string {
	_, msg, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(msg), "\n") {
		q, ok := strings.CutPrefix(l, parkedITAKey)
		if !ok {
			continue
		}
		p, err := strconv.Unquote(q)
		if err != nil || !repoPath(p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// repoPath says whether p is a path git's index may hold: relative,
// slash-separated, no empty, "." or ".." component, nothing in .git.
func repoPath(p string) bool {
	if p == "" || strings.ContainsRune(p, 0) {
		return false
	}
	for _, c := range strings.Split(p, "/") {
		if c == "" || c == "." || c == ".." || strings.EqualFold(c, ".git") {
			return false
		}
	}
	return true
}

// intentToAdd lists the intent-to-add entries of the index withIdx
// reads, tree being what git write-tree made of it: the paths of the
// index no tree holds (write-tree leaves out those entries, and only
// those once unmerged ones are refused).
func intentToAdd(ctx context.Context, c, withIdx cmd, tree string) ([]string, error) {
	inIndex, err := withIdx.run(ctx, "ls-files", "-z", "--full-name")
	if err != nil {
		return nil, err
	}
	inTree, err := c.run(ctx, "ls-tree", "-r", "-z", "--full-tree", "--name-only", tree)
	if err != nil {
		return nil, err
	}
	held := map[string]bool{}
	for _, p := range strings.Split(string(inTree), "\x00") {
		held[p] = true
	}
	var out []string
	for _, p := range strings.Split(string(inIndex), "\x00") {
		if p != "" && !held[p] {
			out = append(out, p)
		}
	}
	return out, nil
}

// addIntentToAdd makes paths intent-to-add entries of the index of
// repository c (git add -N), as a parked index lists them: those whose
// file is in the workspace (git add -N needs one; a worker may have
// removed it since). A path git refuses (beyond a link, say) is left out,
// the others added.
func addIntentToAdd(ctx context.Context, c cmd, paths []string) {
	var present []string
	for _, p := range paths {
		if fi, err := os.Lstat(filepath.Join(c.dir, filepath.FromSlash(p))); err == nil && !fi.IsDir() {
			present = append(present, p)
		}
	}
	add := func(ps []string) error {
		a := cmd{dir: c.dir, env: append(slices.Clone(c.env), "GIT_LITERAL_PATHSPECS=1"), stdin: []byte(strings.Join(ps, "\x00"))}
		_, err := a.run(ctx, "add", "--intent-to-add", "--force", "--pathspec-from-file=-", "--pathspec-file-nul")
		return err
	}
	if len(present) == 0 || add(present) == nil {
		return
	}
	for _, p := range present { // all or nothing: one at a time
		_ = add([]string{p})
	}
}

// BundleParked is Bundle of the repository of the workspace dir as a
// stopped worker leaves it, its index too (ParkedIndexRef), so that
// UnbundleHead makes it again with what the worker staged still staged.
// An index that is HEAD's tree adds nothing. One whose tree cannot be
// recorded — unmerged entries (a conflict the worker left), or git
// failing — is not carried: the bundle is Bundle's (the index comes back
// as HEAD's tree, the files as the worker left them), and unkept says why.
func BundleParked(ctx context.Context, dir string) (b []byte, unkept string, err error) {
	c, gd, err := workspace(ctx, dir)
	if err != nil {
		return nil, "", err
	}
	// Made for this bundle only; one a crash left is not today's index.
	defer func() { _, _ = c.run(ctx, "update-ref", "-d", ParkedIndexRef) }()
	unkept, err = parkIndex(ctx, c, gd)
	if err != nil {
		return nil, "", err
	}
	b, err = bundle(ctx, c, unkept == "")
	return b, unkept, err
}

// parkIndex points ParkedIndexRef at a commit of the index of repository
// c (git dir gd), as BundleParked says, or deletes the ref: when the index
// is HEAD's tree ("" returned), or cannot be recorded (why returned).
func parkIndex(ctx context.Context, c cmd, gd string) (string, error) {
	if _, err := c.run(ctx, "update-ref", "-d", ParkedIndexRef); err != nil {
		return "", err
	}
	// A copy of the index, as Commit's: the worker's is not written (a
	// write-tree may).
	idx, withIdx, err := scratchIndex(c.dir, gd, "logist-park-index", true)
	if err != nil {
		return "", err
	}
	defer func() { _ = os.Remove(idx) }()
	notKept := "what the worker staged does not go with its repository (it comes back unstaged, its files as the worker left them): "
	out, err := withIdx.run(ctx, "ls-files", "--unmerged")
	if err != nil {
		return notKept + err.Error(), nil
	}
	if len(bytes.TrimSpace(out)) > 0 {
		return notKept + "the index has unmerged entries (a conflict in progress), which no tree can record", nil
	}
	out, err = withIdx.run(ctx, "write-tree")
	if err != nil {
		return notKept + err.Error(), nil
	}
	tree := strings.TrimSpace(string(out))
	parent := head(ctx, c.dir)
	var headTree []byte
	if parent != "" {
		headTree, err = c.run(ctx, "rev-parse", "--verify", parent+"^{tree}")
	} else { // an unborn branch: the empty tree
		headTree, err = (cmd{dir: c.dir, stdin: []byte{}}).run(ctx, "hash-object", "-t", "tree", "--stdin")
	}
	if err != nil {
		return notKept + err.Error(), nil
	}
	ita, err := intentToAdd(ctx, c, withIdx, tree)
	if err != nil {
		return notKept + err.Error(), nil
	}
	if strings.TrimSpace(string(headTree)) == tree && len(ita) == 0 {
		return "", nil // nothing staged
	}
	args := []string{"commit-tree", tree, "-F", "-"}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	out, err = (cmd{dir: c.dir, env: c.env, stdin: parkedMessage(ita)}).run(ctx, args...)
	if err == nil {
		_, err = c.run(ctx, "update-ref", ParkedIndexRef, strings.TrimSpace(string(out)))
	}
	if err != nil {
		return notKept + err.Error(), nil
	}
	return "", nil
}

// bundle is a git bundle of every ref of repository c, ParkedIndexRef
// only if withIndex.
func bundle(ctx context.Context, c cmd, withIndex bool) ([]byte, error) {
	f, err := os.CreateTemp("", "logist-bundle-*")
	if err != nil {
		return nil, err
	}
	p := f.Name()
	_ = f.Close()
	defer func() { _ = os.Remove(p) }()
	args := []string{"bundle", "create", "--quiet", p}
	if !withIndex {
		args = append(args, "--exclude="+ParkedIndexRef)
	}
	if _, err := c.run(ctx, append(args, "--all")...); err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// Head is what HEAD of the workspace dir names, as the agent left it:
// the branch it is on ("refs/heads/NAME", born or not), or the commit it
// is detached at. A stopped job's workspace moves with it so
// (UnbundleHead), not only its branches.
func Head(ctx context.Context, dir string) (string, error) {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return "", err
	}
	out, err := c.run(ctx, "symbolic-ref", "--quiet", "HEAD")
	var gerr *Error
	if errors.As(err, &gerr) && gerr.Stderr == "" {
		// Detached (exit status 1, nothing said): the commit.
		return line(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// Unbundle makes dir, whose files are already the workspace as a
// recovery point holds them (its snapshot: no .git), the repository
// bundle holds again: its refs fetched, HEAD on branch at the branch's
// tip, the index at HEAD (the files are left as they are), or what the
// bundle's ParkedIndexRef records (its intent-to-add entries too, for
// the files the workspace holds). A dir that
// already has a .git is refused.
func Unbundle(ctx context.Context, dir string, bundle []byte, branch string) error {
	return UnbundleHead(ctx, dir, bundle, "refs/heads/"+branch)
}

// UnbundleHead is Unbundle with HEAD at head, as Head said it: on a
// branch ("refs/heads/NAME"), or detached at a commit the bundle holds
// (its HEAD). The index is what the worker staged when the bundle is
// BundleParked's and carries it (ParkedIndexRef, deleted once read),
// otherwise HEAD's tree, empty on an unborn branch.
func UnbundleHead(ctx context.Context, dir string, bundle []byte, head string) error {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
		return fmt.Errorf("%s already has a .git", dir)
	}
	c := cmd{dir: dir}
	var setHead []string
	switch {
	case strings.HasPrefix(head, "refs/heads/"):
		if _, err := c.run(ctx, "check-ref-format", head); err != nil {
			return fmt.Errorf("HEAD %q: %w", head, err)
		}
		setHead = []string{"symbolic-ref", "HEAD", head}
	case commitID(head):
		setHead = []string{"update-ref", "--no-deref", "HEAD", head}
	default:
		return fmt.Errorf("HEAD %q is neither a branch nor a commit", head)
	}
	f, err := os.CreateTemp("", "logist-bundle-*")
	if err != nil {
		return err
	}
	p := f.Name()
	defer func() { _ = os.Remove(p) }()
	if _, err := f.Write(bundle); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fetch := []string{"fetch", "--quiet", "--update-head-ok", p, "refs/*:refs/*"}
	if setHead[0] == "update-ref" {
		// A detached HEAD's commits may be on no branch: the bundle's
		// HEAD (Bundle takes every ref, HEAD too) brings them.
		fetch = append(fetch, "HEAD")
	}
	for _, args := range [][]string{{"init", "--quiet"}, fetch, setHead} {
		if _, err := c.run(ctx, args...); err != nil {
			return err
		}
	}
	tree := []string{"read-tree", "HEAD"}
	staged, err := line(ctx, dir, "rev-parse", "--verify", "--quiet", ParkedIndexRef+"^{tree}")
	switch {
	case err == nil:
		tree = []string{"read-tree", staged} // what the worker staged (BundleParked)
	case !isRevParseMiss(err):
		return err
	default:
		if _, err := line(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err != nil {
			tree = []string{"read-tree", "--empty"} // an unborn branch
		}
	}
	if _, err := c.run(ctx, tree...); err != nil {
		return err
	}
	if staged != "" {
		raw, err := c.run(ctx, "cat-file", "commit", ParkedIndexRef)
		if err != nil {
			return err
		}
		addIntentToAdd(ctx, c, parkedITA(raw))
		// Read back: no agent sees the ref.
		if _, err := c.run(ctx, "update-ref", "-d", ParkedIndexRef); err != nil {
			return err
		}
	}
	// Exit status 1 only says some files need updating: the stat cache.
	_, _ = c.run(ctx, "update-index", "-q", "--refresh")
	return nil
}

// isRevParseMiss says whether err, of a `git rev-parse --verify
// --quiet`, only says the name names nothing (exit status 1, nothing
// said).
func isRevParseMiss(err error) bool {
	var gerr *Error
	return errors.As(err, &gerr) && gerr.Stderr == ""
}

// commitID says whether s is a commit's full object name (SHA-1 or
// SHA-256, lower-case hex).
func commitID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && (r < 'a' || r > 'f') {
			return false
		}
	}
	return true
}
