package gitws

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/logist/logist/internal/pathguard"
	"github.com/logist/logist/internal/regfile"
)

// Logist runs git in a job's workspace outside the job's sandbox, with the
// daemon's rights (a recovery point's commit, a rollback, a cluster's move)
// or a steward's (logist result, the console's diff). Everything in the
// workspace, its .git folder included, is the agents': a contained agent
// that could leave git a setting that runs a program (a clean filter, an
// ext:: transport) or a path that leads out of the folder (a symlinked
// .git/logs/HEAD that the next reflog line is appended to) would reach,
// through Logist, past its sandbox. So before git runs there, vet checks
// the repository: only settings known to run nothing and to point nowhere
// (safeKeys, safeSections, the remote and branch keys below), no file of
// another kind than a regular file or a folder anywhere under .git, and
// none of the files that make git read another repository (commondir,
// alternates). Whatever else is found refuses the operation, naming it, so
// that a steward removes it; nothing is changed behind the agent's back.
// A job that opts out of the sandbox ("sandbox": "none") gains nothing by
// this (its agents have the daemon's rights), and is vetted the same.

// UnsafeRepoError is a workspace repository Logist will not run git in.
type UnsafeRepoError struct {
	Dir   string   // the workspace
	Found []string // what was found, each named for a person
	// Setting: what was found is the repository's settings.
	Setting bool
}

func (e *UnsafeRepoError) Error() string {
	fix := "remove it"
	if e.Setting {
		fix = fmt.Sprintf("remove it (git -C %s config --unset NAME)", e.Dir)
	}
	return fmt.Sprintf("git workspace %s: %s; Logist runs git there outside the job's sandbox and will not use what an agent could have left to run a program or to reach past the workspace: %s",
		e.Dir, strings.Join(e.Found, "; "), fix)
}

// safeKeys are the settings (section.key, lower case, no subsection) git
// may read in a workspace: none names a program or a path git writes, or
// a file git reads (core.excludesFile, read at git add, reset and
// update-index, may be a named pipe anywhere).
// Those that settings overrides on every command line are among them:
// what the file says of them does not count.
var safeKeys = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`
		core.repositoryformatversion core.filemode core.bare core.logallrefupdates core.ignorecase
		core.precomposeunicode core.symlinks core.autocrlf core.safecrlf core.eol core.quotepath
		core.compression core.loosecompression core.bigfilethreshold core.abbrev core.untrackedcache
		core.checkstat core.trustctime core.preloadindex core.commentchar core.commentstring
		core.whitespace core.splitindex core.commitgraph core.multipackindex
		core.protecthfs core.protectntfs core.warnambiguousrefs core.deltabasecachelimit
		core.packedgitlimit core.packedgitwindowsize core.sparsecheckout core.sparsecheckoutcone
		core.hookspath core.fsmonitor core.fsync core.fsyncmethod
		extensions.objectformat
		diff.algorithm diff.renames diff.renamelimit diff.mnemonicprefix diff.noprefix diff.context
		diff.interhunkcontext diff.colormoved diff.colormovedws diff.indentheuristic diff.submodule
		diff.statgraphwidth diff.ignoresubmodules diff.suppressblankempty diff.wserrorhighlight
		diff.relative diff.dirstat diff.autorefreshindex
		merge.conflictstyle merge.ff merge.log merge.renames merge.renamelimit merge.stat
		merge.defaulttoupstream merge.autostash merge.directoryrenames merge.verbosity
		push.default push.autosetupremote push.followtags
		commit.gpgsign commit.verbose commit.cleanup commit.status tag.gpgsign tag.sort
		lfs.repositoryformatversion`) {
		safeKeys[k] = true
	}
}

// safeSections are sections whose every setting git may read in a
// workspace: their keys change how git shows, names or packs things.
var safeSections = map[string]bool{
	"user": true, "author": true, "committer": true, "init": true, "color": true, "advice": true,
	"help": true, "i18n": true, "column": true, "log": true, "pretty": true, "blame": true,
	"grep": true, "status": true, "rerere": true, "pull": true, "interactive": true, "gc": true,
	"pack": true, "index": true, "feature": true, "rebase": true, "am": true, "apply": true,
	"checkout": true, "clone": true, "fetch": true, "alias": true, "format": true, "notes": true,
	"versionsort": true, "safe": true, "maintenance": true,
}

// safeSubKeys are the keys a remote's or a branch's subsection may hold:
// names and refspecs (a remote's only under a nickname: remoteNick).
// Logist fetches and pushes by path, never by a remote's name, and a URL
// rewrite (url.*) or a transport's program (remote.*.receivepack) is not
// among them.
var safeSubKeys = map[string][]string{
	"remote": {"url", "pushurl", "fetch", "push", "tagopt", "prune", "mirror", "skipdefaultupdate", "skipfetchall"},
	"branch": {"remote", "merge", "rebase", "description", "pushremote"},
	// A submodule's name and place: Logist never updates submodules nor
	// recurses into them (submodule.recurse and submodule.*.update, which
	// may name a program, are not among these).
	"submodule": {"url", "active", "branch", "path", "shallow", "ignore"},
}

// safeSetting says whether git may read the setting name (as `git config
// --list --name-only` prints it) in a workspace.
func safeSetting(name string) bool {
	section, rest, ok := strings.Cut(name, ".")
	if !ok {
		return false
	}
	section = strings.ToLower(section)
	if safeSections[section] {
		return true
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 {
		return safeKeys[section+"."+strings.ToLower(rest)]
	}
	if section == "remote" && !remoteNick(rest[:i]) {
		return false
	}
	return slices.Contains(safeSubKeys[section], strings.ToLower(rest[i+1:]))
}

// remoteNick says whether name is a remote's nickname (origin), not a
// URL or a path: git looks the repository a command names (a push's, an
// ls-remote's) up among the remotes first, so a remote named after the
// source's URL would send Logist's push to its pushurl. git itself takes
// no slash in a nickname (remote.c, valid_remote_nick); a colon is in
// every URL and scp-like address.
func remoteNick(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\\:")
}

// vet refuses a workspace repository (its .git folder gd) that git, run
// by Logist, could be made to run a program from or to write through
// (see the top of this file). It reads what git would read and changes
// nothing.
func vet(ctx context.Context, dir, gd string) error {
	var found []string
	// Files that make git read, or write, another repository.
	for _, rel := range []string{"commondir", "objects/info/alternates", "objects/info/http-alternates"} {
		if _, err := os.Lstat(filepath.Join(gd, rel)); err == nil {
			found = append(found, fmt.Sprintf(".git/%s (git would use another repository's files)", rel))
		}
	}
	// Only regular files and folders: a symlink leads git (which follows
	// it) out of the folder, a named pipe blocks it.
	err := filepath.WalkDir(gd, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if t := d.Type(); t != 0 && !t.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			kind := "a symlink"
			if t&fs.ModeSymlink == 0 {
				kind = "not a regular file (" + t.String() + ")"
			}
			found = append(found, fmt.Sprintf("%s is %s", filepath.ToSlash(rel), kind))
			if len(found) >= 10 {
				return fs.SkipAll
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("git workspace %s: %w", dir, err)
	}
	if len(found) == 0 {
		if found, err = vetWorkTree(dir, gd); err != nil {
			return fmt.Errorf("git workspace %s: %w", dir, err)
		}
	}
	if len(found) > 0 {
		return &UnsafeRepoError{Dir: dir, Found: found}
	}
	// The repository's own settings, as git reads them (no includes: an
	// include is itself refused).
	// git runs in dir: the file's path must not be relative to here.
	conf, err := filepath.Abs(filepath.Join(gd, "config"))
	if err != nil {
		return err
	}
	out, err := cmd{dir: dir}.run(ctx, "config", "--file", conf, "--list", "-z", "--name-only")
	if err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			return fmt.Errorf("git workspace %s: its settings cannot be read: %w", dir, err)
		}
		return err
	}
	var bad []string
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if name != "" && !safeSetting(name) && !slices.Contains(bad, name) {
			bad = append(bad, name)
		}
	}
	if len(bad) > 0 {
		return &UnsafeRepoError{Dir: dir, Found: []string{".git/config sets " + strings.Join(bad, ", ")}, Setting: true}
	}
	return nil
}

// gitOpens are the files git opens by name in every folder of a work
// tree, with a plain open() that a named pipe blocks for ever (git add,
// diff, log, reset, update-index, bundle create). A symlink there git
// does not follow.
var gitOpens = map[string]bool{".gitignore": true, ".gitattributes": true, ".mailmap": true, ".gitmodules": true}

// vetWorkTree finds what, in the work tree of dir (outside its .git gd,
// which vet walks), git would block on: one of gitOpens that is neither a
// regular file nor a symlink, and a repository nested in the workspace
// (whose HEAD and refs git add reads) holding other than regular files
// and folders, or named by a .git file that leads elsewhere than into
// gd (where git submodule keeps a submodule's repository).
func vetWorkTree(dir, gd string) ([]string, error) {
	var found []string
	add := func(p, what string) error {
		rel, _ := filepath.Rel(dir, p)
		found = append(found, filepath.ToSlash(rel)+" "+what)
		if len(found) >= 10 {
			return fs.SkipAll
		}
		return nil
	}
	nested := ""
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == gd {
			return filepath.SkipDir
		}
		t := d.Type()
		if nested != "" && pathguard.Within(nested, p) {
			if t != 0 && !t.IsDir() {
				return add(p, "is "+kindOf(t)+" (in a repository nested in the workspace)")
			}
			return nil
		}
		switch {
		case d.Name() == ".git" && d.IsDir():
			nested = p
		case d.Name() == ".git" && t == 0:
			if !gitFileWithin(p, gd) {
				return add(p, "names a repository outside the workspace's .git")
			}
		case d.Name() == ".git":
			return add(p, "is "+kindOf(t))
		case gitOpens[d.Name()] && t != 0 && !t.IsDir() && t&fs.ModeSymlink == 0:
			return add(p, "is "+kindOf(t))
		}
		return nil
	})
	return found, err
}

// kindOf names a file's type that is not a regular file's.
func kindOf(t fs.FileMode) string {
	if t&fs.ModeSymlink != 0 {
		return "a symlink"
	}
	return "not a regular file (" + t.String() + ")"
}

// gitFileWithin says whether the .git file p ("gitdir: PATH") names a
// folder in gd, whose files vet has checked.
func gitFileWithin(p, gd string) bool {
	b, err := regfile.ReadLimited(p, 4096)
	if err != nil || len(b) > 4096 {
		return false
	}
	first, _, _ := strings.Cut(string(b), "\n")
	target, ok := strings.CutPrefix(strings.TrimSpace(first), "gitdir: ")
	if !ok || target == "" {
		return false
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(p), target)
	}
	return pathguard.Within(gd, filepath.Clean(target))
}

// Vet checks the repository of workspace dir as every operation on it
// does first: an *UnsafeRepoError names what an agent left there.
func Vet(ctx context.Context, dir string) error {
	_, _, err := workspace(ctx, dir)
	return err
}

// Unsafe is Vet's refusal alone (an *UnsafeRepoError), nil for a
// repository git may run in or for any other failure (no repository, git
// missing).
func Unsafe(dir string) error {
	var unsafe *UnsafeRepoError
	if err := Vet(context.Background(), dir); errors.As(err, &unsafe) {
		return unsafe
	}
	return nil
}

// workspace is cmd for the workspace dir, once its repository has been
// vetted: every operation on a workspace's repository starts here.
func workspace(ctx context.Context, dir string) (cmd, string, error) {
	gd, err := gitDir(dir)
	if err != nil {
		return cmd{}, "", err
	}
	if err := vet(ctx, dir, gd); err != nil {
		return cmd{}, "", err
	}
	return cmd{dir: dir}, gd, nil
}
