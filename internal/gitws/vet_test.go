package gitws_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/gitws"
	"github.com/logist/logist/internal/testkit"
)

// What an agent can leave in its workspace's repository to make git, run by
// Logist outside the sandbox, run a program or write past the workspace:
// every operation on the workspace refuses it, naming it, and nothing of it
// runs or is written.
func TestWorkspaceRepositoryIsVetted(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, ws, out string)
		want  string
	}{
		{"a clean filter", func(t *testing.T, ws, out string) {
			testkit.Git(t, ws, "config", "filter.x.clean", "sh -c 'echo ran > "+out+"; cat'")
			write(t, ws, ".gitattributes", "* filter=x\n")
		}, ".git/config sets filter.x.clean"},
		{"a filter in an included file", func(t *testing.T, ws, out string) {
			write(t, ws, "inc.cfg", "[filter \"x\"]\n\tclean = sh -c 'echo ran > "+out+"; cat'\n")
			testkit.Git(t, ws, "config", "include.path", "../inc.cfg")
			write(t, ws, ".gitattributes", "* filter=x\n")
		}, ".git/config sets include.path"},
		{"a URL rewritten to a program", func(t *testing.T, ws, out string) {
			testkit.Git(t, ws, "config", "url.ext::sh -c 'echo ran > "+out+"'.insteadOf", repo)
			testkit.Git(t, ws, "config", "protocol.ext.allow", "always")
		}, "protocol.ext.allow"},
		{"a work tree elsewhere", func(t *testing.T, ws, out string) {
			testkit.Git(t, ws, "config", "core.worktree", filepath.Dir(out))
		}, ".git/config sets core.worktree"},
		{"a submodule updated by a program", func(t *testing.T, ws, out string) {
			testkit.Git(t, ws, "config", "submodule.lib.update", "!sh -c 'echo ran > "+out+"'")
			testkit.Git(t, ws, "config", "submodule.recurse", "true")
		}, "submodule.lib.update, submodule.recurse"},
		{"an external diff", func(t *testing.T, ws, out string) {
			testkit.Git(t, ws, "config", "diff.external", "sh -c 'echo ran > "+out+"'")
		}, "diff.external"},
		{"a reflog that is a symlink", func(t *testing.T, ws, out string) {
			write(t, filepath.Dir(out), "victim", "")
			p := filepath.Join(ws, ".git", "logs", "HEAD")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(filepath.Dir(out), "victim"), p); err != nil {
				t.Fatal(err)
			}
		}, ".git/logs/HEAD is a symlink"},
		{"objects kept elsewhere", func(t *testing.T, ws, out string) {
			write(t, ws, ".git/objects/info/alternates", filepath.Join(repo, ".git", "objects")+"\n")
		}, ".git/objects/info/alternates"},
		{"another repository's files", func(t *testing.T, ws, out string) {
			write(t, ws, ".git/commondir", filepath.Join(repo, ".git")+"\n")
		}, ".git/commondir"},
		{"an index that is a named pipe", func(t *testing.T, ws, out string) {
			p := filepath.Join(ws, ".git", "index")
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
		}, ".git/index is not a regular file"},
		{"Logist's own index made a symlink ahead", func(t *testing.T, ws, out string) {
			write(t, filepath.Dir(out), "victim", "keep me")
			if err := os.Symlink(filepath.Join(filepath.Dir(out), "victim"), filepath.Join(ws, ".git", "logist-index")); err != nil {
				t.Fatal(err)
			}
		}, ".git/logist-index is a symlink"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, base := prepare(t, repo, "main")
			out := filepath.Join(t.TempDir(), "ran")
			write(t, ws, "README.md", "# changed\n")
			tc.plant(t, ws, out)
			victim := filepath.Join(filepath.Dir(out), "victim")
			before, _ := os.ReadFile(victim)
			source := state(t, repo)
			ops := operations(ws, repo, base.Commit)
			for op, f := range ops {
				c, cancel := context.WithTimeout(ctx, 20*time.Second)
				done := make(chan error, 1)
				go func() { done <- f() }()
				var err error
				select {
				case err = <-done:
				case <-c.Done():
					t.Fatalf("%s: still running after 20 s", op)
				}
				cancel()
				var ue *gitws.UnsafeRepoError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v, want it refused naming %q", op, err, tc.want)
				}
			}
			if _, err := os.Stat(out); err == nil {
				t.Error("the planted program ran")
			}
			if after, _ := os.ReadFile(victim); string(after) != string(before) {
				t.Errorf("a file outside the workspace was written: %q", after)
			}
			if state(t, repo) != source {
				t.Error("the source repository changed")
			}
		})
	}
}

// What agents commonly set is not refused: an identity, a remote, a
// branch's upstream, colours, aliases.
func TestWorkspaceRepositoryWithCommonSettings(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	for _, kv := range [][2]string{
		{"user.name", "Agent"}, {"user.email", "agent@example.com"}, {"remote.origin.url", "https://example.com/x.git"},
		{"remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"}, {"branch.main.remote", "origin"},
		{"branch.main.merge", "refs/heads/main"}, {"color.diff.meta", "blue"}, {"alias.st", "status"},
		{"core.autocrlf", "false"}, {"pull.rebase", "true"}, {"merge.conflictStyle", "diff3"},
		{"core.hooksPath", ".githooks"}, {"init.defaultBranch", "main"},
		{"submodule.lib.url", "https://example.com/lib.git"}, {"submodule.lib.active", "true"},
		{"lfs.repositoryformatversion", "0"}, {"maintenance.auto", "false"},
	} {
		testkit.Git(t, ws, "config", kv[0], kv[1])
	}
	write(t, ws, "README.md", "# changed\n")
	if _, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-1"}); err != nil {
		t.Fatal(err)
	}
}

// A remote named after the source repository's URL takes the push: git
// looks the repository a push names up among the remotes first, so a
// pushurl there sends logist result --push elsewhere, and into a local
// repository of the agent's (in its workspace) whose hooks then run.
func TestPushIsNotRedirectedByARemoteNamedAfterTheSource(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	out := filepath.Join(t.TempDir(), "ran")
	evil := filepath.Join(ws, "evil.git")
	testkit.Git(t, ws, "init", "-q", "--bare", evil)
	hook := filepath.Join(evil, "hooks", "pre-receive")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\necho ran > "+out+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const source = "https://example.invalid/project.git"
	testkit.Git(t, ws, "config", "remote."+source+".url", evil)
	testkit.Git(t, ws, "config", "remote."+source+".pushurl", evil)
	write(t, ws, "README.md", "# changed\n")
	if _, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-1"}); err == nil {
		t.Error("Commit: a remote named after a URL was not refused")
	}
	err := gitws.Push(ctx, ws, source, "logist/job-1", "from-job")
	var ue *gitws.UnsafeRepoError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "remote."+source) {
		t.Errorf("Push: %v, want it refused naming the remote", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the hook of the repository the remote named ran")
	}
}

// A submodule's repository is not vetted (its config is its own), so git,
// run by Logist, must never open one: diff.submodule=log in the
// workspace's settings made a diff read the submodule's history, and a
// submodule set up as a partial clone fetched a missing commit through
// the upload-pack program its config names.
func TestDiffDoesNotOpenASubmodule(t *testing.T) {
	t.Parallel()
	up := testkit.GitRepo(t)
	ws, _ := prepare(t, testkit.GitRepo(t), "main")
	out := filepath.Join(t.TempDir(), "ran")
	testkit.Git(t, ws, "-c", "protocol.file.allow=always", "submodule", "add", "-q", up, "sub")
	testkit.Git(t, ws, "commit", "-q", "-m", "sub")
	from := testkit.Git(t, ws, "rev-parse", "HEAD")
	testkit.Git(t, ws, "update-index", "--cacheinfo", "160000,1111111111111111111111111111111111111111,sub")
	testkit.Git(t, ws, "commit", "-q", "-m", "sub moved")
	to := testkit.Git(t, ws, "rev-parse", "HEAD")
	cfg := filepath.Join(ws, ".git", "modules", "sub", "config")
	for _, kv := range [][2]string{
		{"core.repositoryformatversion", "1"}, {"extensions.partialclone", "x"}, {"remote.x.url", up},
		{"remote.x.promisor", "true"}, {"remote.x.uploadpack", "sh -c 'echo ran > " + out + "; exit 1'"},
	} {
		testkit.Git(t, ws, "config", "-f", cfg, kv[0], kv[1])
	}
	testkit.Git(t, ws, "config", "diff.submodule", "log")
	for op, f := range map[string]func() error{
		"Diff":     func() error { _, err := gitws.Diff(ctx, ws, from, to); return err },
		"DiffStat": func() error { _, err := gitws.DiffStat(ctx, ws, from, to); return err },
		"DiffHead": func() error { _, _, err := gitws.DiffHead(ctx, ws, from, to, 100); return err },
		"Patch":    func() error { _, err := gitws.Patch(ctx, ws, from, to); return err },
	} {
		_ = f() // refused or not: what counts is that nothing ran
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s: the submodule's upload-pack ran", op)
		}
	}
}

// What git opens by name in the work tree, outside .git, with a plain
// open(): a named pipe there, or in a repository nested in the workspace,
// blocked the git Logist ran for ever (a recovery point's commit at git
// add, a rollback, a cluster's bundle, a diff; a deadline does not help:
// the killed git's pack-objects kept its output open). Every operation
// refuses it at once, naming it.
func TestWorkTreeFilesGitWouldBlockOn(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	for _, tc := range []struct {
		name  string
		plant func(t *testing.T, ws string, fifo func(string))
		want  string
	}{
		{".gitignore", func(t *testing.T, ws string, fifo func(string)) { fifo(filepath.Join(ws, "src", ".gitignore")) },
			"src/.gitignore is not a regular file"},
		{".gitattributes", func(t *testing.T, ws string, fifo func(string)) { fifo(filepath.Join(ws, ".gitattributes")) },
			".gitattributes is not a regular file"},
		{".mailmap", func(t *testing.T, ws string, fifo func(string)) { fifo(filepath.Join(ws, ".mailmap")) },
			".mailmap is not a regular file"},
		{"a nested repository's HEAD", func(t *testing.T, ws string, fifo func(string)) {
			write(t, ws, "lib/.git/objects/.keep", "")
			write(t, ws, "lib/.git/refs/heads/.keep", "")
			fifo(filepath.Join(ws, "lib", ".git", "HEAD"))
		}, "lib/.git/HEAD is not a regular file"},
		{"a nested repository elsewhere", func(t *testing.T, ws string, fifo func(string)) {
			gd := filepath.Join(t.TempDir(), "gd")
			write(t, gd, "objects/.keep", "")
			write(t, gd, "refs/heads/.keep", "")
			fifo(filepath.Join(gd, "HEAD"))
			write(t, ws, "lib/.git", "gitdir: "+gd+"\n")
		}, "lib/.git names a repository outside the workspace's .git"},
		{"an excludes file", func(t *testing.T, ws string, fifo func(string)) {
			p := filepath.Join(t.TempDir(), "ignore")
			fifo(p)
			testkit.Git(t, ws, "config", "core.excludesFile", p)
		}, ".git/config sets core.excludesfile"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ws, base := prepare(t, repo, "main")
			write(t, ws, "README.md", "# changed\n")
			var fifos []string
			tc.plant(t, ws, func(p string) {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(p, 0o600); err != nil {
					t.Fatal(err)
				}
				fifos = append(fifos, p)
			})
			// unblock lets a git blocked in opening a pipe go on (a writer
			// that closes: the reader sees an empty file).
			unblock := func() {
				for _, p := range fifos {
					if fd, err := syscall.Open(p, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						_ = syscall.Close(fd)
					}
				}
			}
			ops := operations(ws, repo, base.Commit)
			for _, op := range []string{"Tip", "Patch", "Push"} {
				delete(ops, op) // they open no file of the work tree's
			}
			for op, f := range ops {
				done := make(chan error, 1)
				go func() { done <- f() }()
				var err error
				select {
				case err = <-done:
				case <-time.After(3 * time.Second):
					t.Errorf("%s: still running after 3 s", op)
					for err == nil {
						unblock()
						select {
						case err = <-done:
							if err == nil {
								err = errors.New("done")
							}
						case <-time.After(100 * time.Millisecond):
						}
					}
					continue
				}
				var ue *gitws.UnsafeRepoError
				if !errors.As(err, &ue) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: %v, want it refused naming %q", op, err, tc.want)
				}
			}
		})
	}
}

// logist result --push pushes the job branch, and nothing else: an
// agent's push.followTags made git push too every annotated tag of the
// agent's that the branch reaches (a release tag, to a source whose CI
// builds tags).
func TestPushTakesNoTagOfTheAgents(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	write(t, ws, "result.txt", "the work\n")
	if _, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-1"}); err != nil {
		t.Fatal(err)
	}
	testkit.Git(t, ws, "tag", "-a", "-m", "release", "v9.9.9", "logist/job-1")
	testkit.Git(t, ws, "config", "push.followTags", "true")
	if err := gitws.Push(ctx, ws, repo, "logist/job-1", "review/job-1"); err != nil {
		t.Fatal(err)
	}
	if tags := testkit.Git(t, repo, "tag", "--list", "v9*"); tags != "" {
		t.Errorf("the push took the agent's tag %s into the source", tags)
	}
}

// The patch logist result writes is what a steward applies to their own
// checkout (git apply strips a/ and b/): settings the vet lets through
// must not change where it puts files. With diff.noprefix an agent's
// src/app/x.go was applied as app/x.go.
func TestPatchIsGitsDefaultWhateverTheSettings(t *testing.T) {
	t.Parallel()
	repo := testkit.GitRepo(t)
	ws, base := prepare(t, repo, "main")
	write(t, ws, "src/app/x.go", "package app\n")
	tip, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range [][2]string{{"diff.noprefix", "true"}, {"diff.mnemonicPrefix", "true"}, {"color.ui", "always"}} {
		testkit.Git(t, ws, "config", kv[0], kv[1])
	}
	patch, err := gitws.Patch(ctx, ws, base.Commit, tip)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(patch, []byte("diff --git a/src/app/x.go b/src/app/x.go\n")) {
		t.Errorf("patch not in git's default form:\n%q", patch)
	}
}

// log.showSignature (the log section is let through) had the git log
// Logist runs on HEAD check the signature an agent put on its commit:
// the host's gpg, run by the daemon on the agent's bytes.
func TestLogRunsNoSignatureCheck(t *testing.T) {
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	bin, out := t.TempDir(), filepath.Join(t.TempDir(), "ran")
	if err := os.WriteFile(filepath.Join(bin, "gpg"), []byte("#!/bin/sh\necho ran > "+out+"\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	raw := testkit.Git(t, ws, "cat-file", "commit", "HEAD")
	hdr, msg, _ := strings.Cut(raw, "\n\n")
	signed := hdr + "\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n =abcd\n -----END PGP SIGNATURE-----\n\n" + msg + "\n"
	p := filepath.Join(t.TempDir(), "commit")
	if err := os.WriteFile(p, []byte(signed), 0o644); err != nil {
		t.Fatal(err)
	}
	c := testkit.Git(t, ws, "hash-object", "-t", "commit", "-w", p)
	testkit.Git(t, ws, "reset", "-q", "--soft", c)
	testkit.Git(t, ws, "config", "log.showSignature", "true")
	write(t, ws, "README.md", "# changed\n")
	if _, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := gitws.Reconcile(ctx, ws, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("gpg ran on the agent's signature")
	}
}

// What logist diff and result show is all the branch changes: a
// submodule's new commit is pushed with the branch, so settings the vet
// lets through (diff.ignoreSubmodules, submodule.NAME.ignore) must not
// hide it from the steward who reviews the change.
func TestDiffShowsASubmoduleChangeWhateverTheSettings(t *testing.T) {
	t.Parallel()
	ws, _ := prepare(t, testkit.GitRepo(t), "main")
	testkit.Git(t, ws, "update-index", "--add", "--cacheinfo", "160000,1111111111111111111111111111111111111111,lib")
	write(t, ws, ".gitmodules", "[submodule \"lib\"]\n\tpath = lib\n\turl = https://example.com/lib.git\n")
	testkit.Git(t, ws, "add", ".gitmodules")
	testkit.Git(t, ws, "commit", "-q", "-m", "lib")
	from := testkit.Git(t, ws, "rev-parse", "HEAD")
	testkit.Git(t, ws, "update-index", "--cacheinfo", "160000,2222222222222222222222222222222222222222,lib")
	testkit.Git(t, ws, "commit", "-q", "-m", "lib moved")
	to := testkit.Git(t, ws, "rev-parse", "HEAD")
	testkit.Git(t, ws, "config", "diff.ignoreSubmodules", "all")
	testkit.Git(t, ws, "config", "submodule.lib.ignore", "all")
	diff, err := gitws.Diff(ctx, ws, from, to)
	if err != nil || !strings.Contains(diff, "2222222222") {
		t.Errorf("Diff: %v, the submodule's change not shown:\n%s", err, diff)
	}
	stat, err := gitws.DiffStat(ctx, ws, from, to)
	if err != nil || !strings.Contains(stat, "lib") {
		t.Errorf("DiffStat: %v, the submodule's change not shown:\n%s", err, stat)
	}
	patch, err := gitws.Patch(ctx, ws, from, to)
	if err != nil || !bytes.Contains(patch, []byte("+Subproject commit 2222222222222222222222222222222222222222")) {
		t.Errorf("Patch: %v, the submodule's change not in it:\n%s", err, patch)
	}
}

// operations are gitws's operations on the workspace ws of a job whose
// source is repo and base commit base, by name.
func operations(ws, repo, base string) map[string]func() error {
	return map[string]func() error{
		"Commit": func() error {
			_, err := gitws.Commit(ctx, ws, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-1"})
			return err
		},
		"Reconcile": func() error {
			_, err := gitws.Reconcile(ctx, ws, func(string) bool { return false })
			return err
		},
		"Restore": func() error { return gitws.Restore(ctx, ws, "logist/job-1", base) },
		"Bundle": func() error {
			_, err := gitws.Bundle(ctx, ws)
			return err
		},
		"Tip": func() error {
			_, err := gitws.Tip(ctx, ws, "logist/job-1")
			return err
		},
		"Diff": func() error {
			_, err := gitws.Diff(ctx, ws, base, "HEAD")
			return err
		},
		"Patch": func() error {
			_, err := gitws.Patch(ctx, ws, base, "HEAD")
			return err
		},
		"Push": func() error { return gitws.Push(ctx, ws, repo, "logist/job-1", "from-job") },
	}
}

// A workspace named by a path relative to the caller's folder (logist
// validate --workspace jobs/x/workspace) is vetted like any other: the
// settings were read from a path git, running in the workspace, did not
// find, and the failure to read them passed for git's own. It commits
// too (Logist's index was named by such a path).
func TestRelativeWorkspaceIsVetted(t *testing.T) {
	repo := testkit.GitRepo(t)
	ws, _ := prepare(t, repo, "main")
	testkit.Git(t, ws, "config", "filter.x.clean", "cat")
	t.Chdir(filepath.Dir(ws))
	rel := filepath.Base(ws)
	var unsafe *gitws.UnsafeRepoError
	if err := gitws.Vet(ctx, rel); !errors.As(err, &unsafe) {
		t.Errorf("Vet(%q): %v, want the filter refused", rel, err)
	}
	if err := gitws.Committable(rel, "job-1"); !errors.As(err, &unsafe) {
		t.Errorf("Committable(%q): %v, want the filter refused", rel, err)
	}
	// Mended, the relative workspace commits as an absolute one does.
	testkit.Git(t, ws, "config", "--unset", "filter.x.clean")
	write(t, ws, "work.txt", "work\n")
	c, err := gitws.Commit(ctx, rel, "logist/job-1", gitws.Message{Job: "job-1", Checkpoint: "cp-0001-work"})
	if err != nil {
		t.Fatalf("Commit(%q): %v", rel, err)
	}
	if files := testkit.Git(t, ws, "show", "--name-only", "--format=", c); files != "work.txt" {
		t.Errorf("the commit holds %q, want work.txt", files)
	}
	if st := testkit.Git(t, ws, "status", "--porcelain"); st != "" {
		t.Errorf("the workspace after the commit:\n%s", st)
	}
}
