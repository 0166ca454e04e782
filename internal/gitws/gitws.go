// Package gitws makes and keeps a job's git workspace: a clone of the
// repository a manifest names, on a job branch of its own, where every
// recovery point is also a commit. It drives the git program on the
// machine (there is no Go git in the module, and the agents' own git is
// that one too), always with the same safe settings: no system config,
// hooks off, a fixed author, fsync'd objects and refs.
//
// The user's repository is never written: the workspace is a clone made
// with --no-local (no hard-linked objects), and the only way back into the
// source is an explicit push (Push), which refuses the source's current
// branch. The clone keeps no remote: nothing in an agent's workspace names
// the source (containment keeps the agent from reaching it anyway). Logist's commits go on top of whatever HEAD the agent left, built
// in an index of Logist's own, so an agent's commits are never rewritten.
package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/logist/logist/internal/atomicfile"
)

// Author is who Logist's commits are by (author and committer).
const (
	AuthorName  = "Logist"
	AuthorEmail = "logist@localhost"
)

// Remote is the name the source repository has in a workspace clone
// while it is made (it is removed once the job branch is checked out).
const Remote = "source"

// BaseRef is the ref a workspace clone keeps its base commit under.
const BaseRef = "refs/logist/base"

// TrailerCheckpoint names the checkpoint a Logist commit was made for, on
// the last line of its message.
const TrailerCheckpoint = "Logist-Checkpoint: "

// Branch is the job branch of job id.
func Branch(id string) string { return "logist/" + id }

// ErrNoGit is returned when the git program cannot be found.
var ErrNoGit = errors.New("git is not installed (not on PATH): a job with a git workspace needs it")

// settings are passed to every git command: the user's hooks never run
// (the source's are not cloned; an agent's are not Logist's business),
// nothing signs or rewrites line endings, objects and refs are fsync'd
// before a command returns, no background gc, and a diff names a
// submodule's commits without opening its repository (whose settings,
// unlike the workspace's, are not vetted: a promisor remote there runs a
// program to fetch what is missing), and git log checks no signature (the
// host's gpg on an agent's bytes).
var settings = []string{
	"-c", "core.hooksPath=/dev/null",
	"-c", "commit.gpgsign=false",
	"-c", "tag.gpgsign=false",
	"-c", "core.autocrlf=false",
	"-c", "core.fsmonitor=false",
	"-c", "core.fsync=objects,reference,index",
	"-c", "core.fsyncMethod=fsync",
	"-c", "gc.auto=0",
	"-c", "diff.submodule=short",
	"-c", "log.showSignature=false",
	"-c", "advice.detachedHead=false",
	"-c", "init.defaultBranch=main",
}

// Error is a git command that failed, with what it said.
type Error struct {
	Args   []string
	Stderr string
	Err    error
}

func (e *Error) Error() string {
	// git's lines as one (a reason is shown on one line), blank ones out.
	var lines []string
	for l := range strings.SplitSeq(e.Stderr, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	msg := strings.Join(lines, "; ")
	if msg == "" {
		msg = e.Err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.Args, " "), msg)
}

// RefError is a ref that names no commit, branch or tag of Repo.
type RefError struct {
	Repo, Ref string
}

func (e *RefError) Error() string {
	return fmt.Sprintf("ref %q is not a commit, branch or tag of %s", e.Ref, e.Repo)
}

func (e *Error) Unwrap() error { return e.Err }

// environ is the environment of a git command: the caller's, without
// anything that would point git elsewhere (GIT_DIR, GIT_INDEX_FILE, ...),
// with no system config, no prompt, the C locale and Logist as author.
func environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "LC_ALL=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0", "LC_ALL=C",
		"GIT_AUTHOR_NAME="+AuthorName, "GIT_AUTHOR_EMAIL="+AuthorEmail,
		"GIT_COMMITTER_NAME="+AuthorName, "GIT_COMMITTER_EMAIL="+AuthorEmail)
	return append(env, extra...)
}

// Available says whether git can be run (nil), or why not.
func Available() error {
	if _, err := exec.LookPath("git"); err != nil {
		return ErrNoGit
	}
	return nil
}

// cmd is one git invocation.
type cmd struct {
	dir   string
	env   []string
	stdin []byte
}

func (c cmd) run(ctx context.Context, args ...string) ([]byte, error) {
	var out bytes.Buffer
	err := c.runTo(ctx, &out, args...)
	return out.Bytes(), err
}

// runTo is run with git's output written to out as it comes.
func (c cmd) runTo(ctx context.Context, out io.Writer, args ...string) error {
	if err := Available(); err != nil {
		return err
	}
	full := append(append([]string{}, settings...), args...)
	x := exec.CommandContext(ctx, "git", full...)
	x.Dir = c.dir
	x.Env = environ(c.env...)
	if c.stdin != nil {
		x.Stdin = bytes.NewReader(c.stdin)
	}
	var errb bytes.Buffer
	x.Stdout, x.Stderr = out, &errb
	if err := x.Run(); err != nil {
		return &Error{Args: args, Stderr: errb.String(), Err: err}
	}
	return nil
}

// line runs git in dir and returns its output's first line.
func line(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := cmd{dir: dir}.run(ctx, args...)
	if err != nil {
		return "", err
	}
	s, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(s), nil
}

// Base is where a workspace came from.
type Base struct {
	Repo   string `json:"repo"`
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	Branch string `json:"branch"`
}

// IsClone says whether dir is a workspace Prepare finished (it has the
// base ref).
func IsClone(ctx context.Context, dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, ".git")); err != nil {
		return false
	}
	_, err := line(ctx, dir, "rev-parse", "--verify", "--quiet", BaseRef+"^{commit}")
	return err == nil
}

// Prepare makes dir a clone of repo with branch checked out at ref. A dir
// that already is one (a start a crash interrupted after the clone) is
// kept as it is: the base is the one it recorded. The clone is made under
// a temporary name beside dir and renamed into place, so dir is either
// absent or complete. A local repo is cloned with --no-local: no object
// is shared with it by hard link, so nothing done in the workspace can
// reach it.
func Prepare(ctx context.Context, repo, ref, dir, branch string) (*Base, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if ref == "" {
		ref = "HEAD"
	}
	if IsClone(ctx, dir) {
		return described(ctx, dir, repo, ref, branch)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%s already holds files; a job whose workspace comes from a repository starts from an empty workspace", dir)
	}
	tmp := dir + ".clone"
	if err := cloneAs(ctx, repo, tmp); err != nil {
		return nil, err
	}
	commit, err := resolve(ctx, tmp, repo, ref)
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	steps := [][]string{
		{"config", "core.hooksPath", "/dev/null"},
		{"update-ref", BaseRef, commit},
		{"checkout", "--quiet", "-B", branch, commit},
		// The clone keeps no path to the source: an agent has nothing in
		// its workspace that leads there (Push names it from the history).
		{"remote", "remove", Remote},
	}
	for _, s := range steps {
		if _, err := (cmd{dir: tmp}).run(ctx, s...); err != nil {
			_ = os.RemoveAll(tmp)
			return nil, err
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	if err := atomicfile.SyncDir(filepath.Dir(dir)); err != nil {
		return nil, err
	}
	return &Base{Repo: repo, Ref: ref, Commit: commit, Branch: branch}, nil
}

// cloneAs clones repo into tmp, a new folder (whatever was there is
// removed first; nothing is left after a failure), with no checkout and
// the source as remote Remote. A local repo is cloned with --no-local: no
// object is shared with it by hard link.
func cloneAs(ctx context.Context, repo, tmp string) error {
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	src := repo
	if fi, err := os.Stat(repo); err == nil && fi.IsDir() {
		abs, err := filepath.Abs(repo)
		if err != nil {
			return err
		}
		src = abs
	}
	if _, err := (cmd{dir: filepath.Dir(tmp)}).run(ctx, "clone", "--quiet", "--no-local", "--no-checkout", "--origin", Remote, "--", src, tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("cannot clone %s: %w", repo, err)
	}
	return nil
}

// described is the base of a finished clone.
func described(ctx context.Context, dir, repo, ref, branch string) (*Base, error) {
	commit, err := line(ctx, dir, "rev-parse", "--verify", BaseRef+"^{commit}")
	if err != nil {
		return nil, err
	}
	return &Base{Repo: repo, Ref: ref, Commit: commit, Branch: branch}, nil
}

// resolve finds ref in a fresh clone: a commit id, a tag, or a branch of
// the source (which the clone has as source/NAME until the remote goes).
func resolve(ctx context.Context, dir, repo, ref string) (string, error) {
	if strings.HasPrefix(ref, "-") {
		return "", fmt.Errorf("ref %q: a ref may not start with '-'", ref)
	}
	for _, cand := range []string{ref, Remote + "/" + ref, "refs/tags/" + ref} {
		if c, err := line(ctx, dir, "rev-parse", "--verify", "--quiet", "--end-of-options", cand+"^{commit}"); err == nil && c != "" {
			return c, nil
		}
	}
	return "", &RefError{Repo: repo, Ref: ref}
}

// Check says whether repo can be cloned and names ref (nil), or why not,
// without cloning: for logist validate, which checks a manifest before
// anything runs.
func Check(ctx context.Context, repo, ref string) error {
	if err := Available(); err != nil {
		return err
	}
	if ref == "" {
		ref = "HEAD"
	}
	if fi, err := os.Stat(repo); err == nil && fi.IsDir() {
		if _, err := line(ctx, repo, "rev-parse", "--git-dir"); err != nil {
			return fmt.Errorf("%s is not a git repository", repo)
		}
		for _, cand := range []string{ref, "refs/heads/" + ref, "refs/tags/" + ref} {
			if strings.HasPrefix(ref, "-") {
				break
			}
			if _, err := line(ctx, repo, "rev-parse", "--verify", "--quiet", "--end-of-options", cand+"^{commit}"); err == nil {
				return nil
			}
		}
		return &RefError{Repo: repo, Ref: ref}
	}
	if _, err := (cmd{}).run(ctx, "ls-remote", "--exit-code", "--", repo, "HEAD"); err != nil {
		return fmt.Errorf("cannot reach repository %s: %w", repo, err)
	}
	return nil
}

// BaseCommit is the commit a workspace clone was made at.
func BaseCommit(ctx context.Context, dir string) (string, error) {
	return line(ctx, dir, "rev-parse", "--verify", BaseRef+"^{commit}")
}

// Dirty says whether the local repository repo has changes to tracked
// files that are not committed: a job starts from a commit, without them.
func Dirty(ctx context.Context, repo string) bool {
	out, err := (cmd{dir: repo}).run(ctx, "status", "--porcelain", "--untracked-files=no")
	return err == nil && len(bytes.TrimSpace(out)) > 0
}
