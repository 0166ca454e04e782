package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Tip is the commit branch points at in the workspace dir.
func Tip(ctx context.Context, dir, branch string) (string, error) {
	if _, _, err := workspace(ctx, dir); err != nil {
		return "", err
	}
	return line(ctx, dir, "rev-parse", "--verify", "refs/heads/"+branch+"^{commit}")
}

// DiffStat is `git diff --stat` from one commit to another (renames found).
// The diffs here show a submodule's change whatever the repository's
// settings say to ignore: the push takes it.
func DiffStat(ctx context.Context, dir, from, to string) (string, error) {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return "", err
	}
	out, err := c.run(ctx, "diff", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none", "--stat", "-M", from, to, "--")
	return string(out), err
}

// Patch is the change from one commit to another as one patch that `git
// apply` takes on a checkout of from: binary files included, renames as
// renames, full object ids.
func Patch(ctx context.Context, dir, from, to string) ([]byte, error) {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return nil, err
	}
	// Git's default form whatever the repository's settings (diff.noprefix,
	// diff.mnemonicPrefix, color.*): git apply strips a/ and b/.
	return c.run(ctx, "diff", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none", "--no-color", "--src-prefix=a/", "--dst-prefix=b/",
		"--binary", "--full-index", "-M", from, to, "--")
}

// SourceHead is the branch the source repository repo has checked out (""
// when its HEAD is detached or it has none).
func SourceHead(ctx context.Context, dir, repo string) (string, error) {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return "", err
	}
	out, err := c.run(ctx, "ls-remote", "--symref", "--", repo, "HEAD")
	if err != nil {
		return "", fmt.Errorf("cannot ask the source repository for its current branch: %w", err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(l, "ref: "); ok {
			ref, _, _ := strings.Cut(rest, "\t")
			return strings.TrimPrefix(ref, "refs/heads/"), nil
		}
	}
	return "", nil
}

// RefusedPushError is a push Push will not make.
type RefusedPushError struct{ Reason string }

func (e *RefusedPushError) Error() string { return e.Reason }

// Push pushes branch of the workspace dir into the source repository repo
// (as the job's first recovery point names it) as branch name. It refuses the source's current branch (the user's own
// checkout is never written under them), a name git would not take, and,
// like git, a push that is not a fast-forward of an existing branch. Into
// a local repository, the source's hooks do not run.
func Push(ctx context.Context, dir, repo, branch, name string) error {
	if _, _, err := workspace(ctx, dir); err != nil {
		return err
	}
	if strings.HasPrefix(name, "-") {
		return &RefusedPushError{fmt.Sprintf("branch name %q may not start with '-'", name)}
	}
	if _, err := (cmd{dir: dir}).run(ctx, "check-ref-format", "--branch", name); err != nil {
		return &RefusedPushError{fmt.Sprintf("%q is not a valid branch name", name)}
	}
	name = strings.TrimPrefix(name, "refs/heads/")
	cur, err := SourceHead(ctx, dir, repo)
	if err != nil {
		return err
	}
	if cur != "" && cur == name {
		return &RefusedPushError{fmt.Sprintf("%s is the source repository's current branch; push under another name and merge it yourself", name)}
	}
	// A branch named as one of the source's tags makes the name ambiguous
	// there (git warns at every use of it).
	if out, err := (cmd{dir: dir}).run(ctx, "ls-remote", "--tags", "--", repo, "refs/tags/"+name); err == nil && strings.TrimSpace(string(out)) != "" {
		return &RefusedPushError{fmt.Sprintf("the source repository has a tag %s; a branch of the same name would make %s ambiguous there: push under another name", name, name)}
	}
	// The branch only: no tag the agent made (push.followTags).
	args := []string{"push", "--quiet", "--no-follow-tags"}
	if filepath.IsAbs(repo) || strings.HasPrefix(repo, "file://") {
		// A repository on this machine: its receive-pack is Logist's to
		// start, without hooks.
		args = append(args, "--receive-pack=git -c core.hooksPath=/dev/null receive-pack")
	}
	args = append(args, "--", repo, "refs/heads/"+branch+":refs/heads/"+name)
	_, err = (cmd{dir: dir}).run(ctx, args...)
	var gerr *Error
	if errors.As(err, &gerr) && (strings.Contains(gerr.Stderr, "[rejected]") || strings.Contains(gerr.Stderr, "non-fast-forward")) {
		// git's own hint (git pull) has no use here: the workspace keeps
		// no remote, and the job branch is the job's record.
		return &RefusedPushError{fmt.Sprintf("branch %s of the source repository has commits the job branch does not (it moved since the job began, or holds other work); nothing was pushed: push under another name and merge the two yourself", name)}
	}
	return err
}

// Diff is what a person reads of the change from one commit to another: a
// diff stat, then the patch (binary files named, not shown).
func Diff(ctx context.Context, dir, from, to string) (string, error) {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	err = c.runTo(ctx, &out, diffArgs(from, to)...)
	return out.String(), err
}

// DiffHead is Diff held to its first max bytes (and one more, so that a
// reader sees it goes on), for a reader that shows no more than that
// (the console): the rest is counted as git writes it, not kept. total
// is the whole diff's size.
func DiffHead(ctx context.Context, dir, from, to string, max int) (head string, total int64, err error) {
	c, _, err := workspace(ctx, dir)
	if err != nil {
		return "", 0, err
	}
	w := &headWriter{room: max + 1}
	err = c.runTo(ctx, w, diffArgs(from, to)...)
	return w.buf.String(), w.total, err
}

// diffArgs are the arguments of Diff's git diff.
func diffArgs(from, to string) []string {
	return []string{"diff", "--no-ext-diff", "--no-textconv", "--ignore-submodules=none", "--no-color", "--stat", "--patch", "-M", from, to, "--"}
}

// headWriter keeps the first room bytes written to it and counts all.
type headWriter struct {
	buf   bytes.Buffer
	room  int
	total int64
}

func (w *headWriter) Write(p []byte) (int, error) {
	w.total += int64(len(p))
	if keep := min(len(p), w.room-w.buf.Len()); keep > 0 {
		w.buf.Write(p[:keep])
	}
	return len(p), nil
}
