package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"sync"

	"github.com/logist/logist/internal/jobstore"
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
	case errors.Is(err, jobstore.ErrNotFound):
		if m := jobNotFound().FindStringSubmatch(msg); m != nil {
			return &hinted{fmt.Sprintf("job %s not found in %s; logist list shows the jobs there (another folder? pass --jobs-dir DIR or set LOGIST_JOBS_DIR)", m[1], e.store.Dir), err}
		}
		if m := folderNotFound().FindStringSubmatch(msg); m != nil {
			return &hinted{fmt.Sprintf("jobs folder %s does not exist; make it (mkdir -p %s, or start logistd --jobs-dir %s, which creates it), or pass another --jobs-dir DIR or set LOGIST_JOBS_DIR", m[1], m[1], m[1]), err}
		}
	case errors.Is(err, fs.ErrPermission):
		return &hinted{fmt.Sprintf("%s; run logist as the user that runs logistd on %s (it owns the jobs and the signing key)", msg, e.store.Dir), err}
	case errors.Is(err, fs.ErrNotExist) && (c.name == "submit" || c.name == "validate"):
		return &hinted{msg + "; check the file's path (relative paths start at the current folder)", err}
	}
	return err
}
