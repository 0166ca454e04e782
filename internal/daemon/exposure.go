package daemon

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/console"
	"github.com/logist/logist/internal/joblog"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/signing"
)

// warnExposure logs, at start, each way this host's setup weakens what
// docs/security.md assumes of the daemon: that it runs as an unprivileged
// user, that only that user writes its jobs folder, and that only it reads
// the console's token files. Warnings, not refusals: the docs promise none,
// and a setup an operator chose (a root daemon in a throwaway container, a
// token file shared with a group on purpose) must still start; each line
// says what to change. A cluster node (RunCluster) is checked the same:
// jobsDir is then its working folder, which is also its intake folder,
// and tokenFiles those of the console it serves.
func warnExposure(log *slog.Logger, jobsDir string, tokenFiles []string) {
	euid := os.Geteuid()
	me := jobstore.UserName(uint32(euid))
	if euid == 0 {
		joblog.Log(log, "logistd runs as root; run it as an unprivileged user", joblog.Problem{Code: codes.RunsAsRoot},
			"uid", euid, "fix", "run logistd as its own user (deploy/systemd/logistd.service: User=logist), owning the jobs folder")
	}
	if fi, err := os.Stat(jobsDir); err == nil {
		mode, owner := fi.Mode(), ownerOf(fi)
		others := mode&0o002 != 0 && mode&fs.ModeSticky == 0
		shared := mode&0o022 != 0 && owner != euid
		if others || shared {
			joblog.Log(log, "the jobs folder lets other users write into it: they can drop manifests logistd runs",
				joblog.Problem{Code: codes.JobsDirExposed}, "path", jobsDir, "mode", mode.String(),
				"owner", jobstore.UserName(uint32(owner)), "daemon_user", me,
				"fix", "chown "+me+" "+jobsDir+" && chmod 0700 "+jobsDir)
		}
	}
	for _, f := range tokenFiles {
		fi, err := os.Stat(f)
		if err != nil || fi.Mode().Perm()&0o077 == 0 {
			continue // one missing was refused before: LoadTokens
		}
		joblog.Log(log, "a console token file is readable by other users: whoever reads it may act with its token",
			joblog.Problem{Code: codes.TokenExposed}, "path", f, "mode", fi.Mode().String(),
			"owner", jobstore.UserName(uint32(ownerOf(fi))), "fix", "chmod 0600 "+f)
	}
}

// ownerOf is fi's owner's uid (-1 where the file system has none).
func ownerOf(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// consoleTokenFiles are the token files the console of o reads: those
// given, else the one it makes in the jobs folder (console.LoadTokens);
// none without --listen.
func consoleTokenFiles(o Options, jobsDir string) []string {
	if o.Listen == "" {
		return nil
	}
	var files []string
	for _, f := range []string{o.Console.TokenFile, o.Console.ViewerTokenFile} {
		if f != "" {
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		files = append(files, filepath.Join(jobsDir, signing.Dir, console.TokenFile))
	}
	return files
}
