package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
)

// hinted is an error rewritten to say what to do next; its cause (and so
// its exit code) is unchanged.
type hinted struct {
	msg string
	err error
}

func (h *hinted) Error() string { return h.msg }
func (h *hinted) Unwrap() error { return h.err }

var (
	jobNotFound    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^job ([A-Za-z0-9._-]+): not found$`) })
	folderNotFound = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^jobs folder (.+): not found$`) })
)

// helpful adds the next step to the errors a steward meets most: a job or
// jobs folder that is not there, wrong arguments, missing permission.
func helpful(e *env, c *command, err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	var ue *usageError
	var no *jobstore.NotOwnerError
	switch {
	case errors.As(err, &no):
		return err // it says whom to run it as
	case errors.As(err, &ue):
		return &hinted{fmt.Sprintf("%s\nusage: logist %s %s (logist help %s shows examples)", msg, c.name, strings.TrimSpace(c.args), c.name), err}
	case errors.Is(err, fs.ErrNotExist) && !errors.Is(err, jobstore.ErrNotFound) && (c.name == "submit" || c.name == "validate"):
		return &hinted{msg + "; check the file's path (relative paths start at the current folder)", err}
	}
	return jobHint(e, err)
}

// jobHint is helpful's part for an error about a job or the jobs folder:
// one not found, one this user may not read. A command that goes on past
// a job (verify JOB...) says each job's error so.
func jobHint(e *env, err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, jobstore.ErrNotFound):
		if m := jobNotFound().FindStringSubmatch(msg); m != nil {
			return &hinted{fmt.Sprintf("job %s not found in %s; logist list shows the jobs there (another folder? pass --jobs-dir DIR or set LOGIST_JOBS_DIR)", m[1], e.store.Dir), err}
		}
		if m := folderNotFound().FindStringSubmatch(msg); m != nil {
			return &hinted{fmt.Sprintf("jobs folder %s does not exist; make it (mkdir -p %s, or start logistd --jobs-dir %s, which creates it), or pass another --jobs-dir DIR or set LOGIST_JOBS_DIR", m[1], m[1], m[1]), err}
		}
	case errors.Is(err, fs.ErrPermission):
		if id, path, ok := refusedJob(e, err); ok {
			return &hinted{fmt.Sprintf("job %s could not be read by %s: permission denied on %s (the job may well be there); %s",
				id, jobstore.UserName(uint32(os.Geteuid())), path, unreadableFix(e, id, path)), err}
		}
		return &hinted{fmt.Sprintf("%s; run logist as the user that runs logistd on %s (it owns the jobs and the signing key)", msg, e.store.Dir), err}
	}
	return err
}

// refusedJob is the job, and the path in its folder, whose permission
// error err is: a job this user may not read, which every command about
// one job reports so (exit 3), whichever of its files refused first.
func refusedJob(e *env, err error) (id, path string, ok bool) {
	var pe *fs.PathError
	if !errors.As(err, &pe) || e.store == nil {
		return "", "", false
	}
	rel, rerr := filepath.Rel(e.store.Dir, pe.Path)
	if rerr != nil || !filepath.IsLocal(rel) {
		return "", "", false
	}
	id, _, _ = strings.Cut(rel, string(filepath.Separator))
	if manifest.ValidID(id) != nil {
		return "", "", false // the folder's own files (.logist), not a job's
	}
	return id, pe.Path, true
}

// unreadableFix says how to read job id, whose path refused this user:
// run logist as the jobs folder's owner when that is another user;
// when this user owns the jobs folder (as logistd's user does), the job's
// own files are what is wrong (a folder copied in as root, a chmod), and
// it names the first of them on the way to path that another user owns
// or its owner may not read, and how to give the job back.
func unreadableFix(e *env, id, path string) string {
	if err := e.store.CheckWriter(); err != nil {
		return runAsDaemonUser(e)
	}
	me := uint32(os.Geteuid())
	dir := filepath.Join(e.store.Dir, id)
	rel, err := filepath.Rel(dir, path)
	if err != nil || !filepath.IsLocal(rel) {
		return runAsDaemonUser(e)
	}
	parts := []string{"."} // the job's folder, then each name on the way to path
	if rel != "." {
		parts = append(parts, strings.Split(rel, string(filepath.Separator))...)
	}
	p := dir
	for _, part := range parts {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if err != nil {
			break // refused on the way: the step before named it
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			break
		}
		need := os.FileMode(0o400)
		if fi.IsDir() {
			need = 0o500 // a folder is read and entered
		}
		if st.Uid != me {
			return fmt.Sprintf("%s belongs to %s (uid %d), not to %s, who owns the jobs folder (logistd's user): "+
				"give the job's files back (sudo chown -R %s %s)",
				p, jobstore.UserName(st.Uid), st.Uid, jobstore.UserName(me), jobstore.UserName(me), dir)
		}
		if fi.Mode().Perm()&need != need {
			return fmt.Sprintf("%s has mode %04o, which its owner %s may not read: give the job's files back (chmod -R u+rwX %s)",
				p, fi.Mode().Perm(), jobstore.UserName(me), dir)
		}
	}
	return runAsDaemonUser(e)
}

// runAsDaemonUser says whom to run logist as to read the jobs folder: its
// owner, with the command to run, when that is another user.
func runAsDaemonUser(e *env) string {
	if err := e.store.CheckWriter(); err != nil {
		var no *jobstore.NotOwnerError
		if errors.As(err, &no) {
			return fmt.Sprintf("run logist as the user that runs logistd, who owns the jobs folder: sudo -u %s %s",
				no.OwnerName, shellWords(append([]string{"logist"}, e.argv[1:]...)))
		}
	}
	return fmt.Sprintf("run logist as the user that runs logistd on %s (it owns the jobs and the signing key)", e.store.Dir)
}
