package jobstore

import (
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

// The jobs folder and everything in it belong to the daemon's user
// (docs/operations.md, "Who may do what"): Logist makes its files 0600 and
// its folders 0700, so a file another user writes there (root included)
// is one the daemon cannot read, and the job it belongs to stops moving.
// CheckWriter is the one rule for every command that writes into a jobs
// folder from outside the daemon: only the folder's owner may.

// NotOwnerError refuses a write into a jobs folder by a user that does not
// own it. It is a permission error (errors.Is fs.ErrPermission).
type NotOwnerError struct {
	Dir       string
	Owner     uint32 // the folder's owner
	OwnerName string // its name, or "#UID" (sudo's form) when it has none
	User      uint32 // the effective user that would write
	UserName  string
	// Command is what to run again as the owner ("logist resume JOB ..."),
	// if the caller knows it.
	Command string
}

func (e *NotOwnerError) Error() string {
	cmd := e.Command
	if cmd == "" {
		cmd = "logist ..."
	}
	return fmt.Sprintf("jobs folder %s belongs to %s (uid %d), not to %s (uid %d) who runs this command: "+
		"files written here as %s would be ones the daemon (the folder's owner) cannot read, and the job would stop moving; "+
		"run it as the folder's owner: sudo -u %s %s",
		e.Dir, e.OwnerName, e.Owner, e.UserName, e.User, e.UserName, e.OwnerName, cmd)
}

func (e *NotOwnerError) Unwrap() error { return fs.ErrPermission }

// CheckWriter refuses (NotOwnerError) when the effective user is not the
// owner of the jobs folder; a folder that is missing or not a folder is
// CheckDir's error.
func (s *Store) CheckWriter() error {
	if err := s.CheckDir(); err != nil {
		return err
	}
	fi, err := os.Stat(s.Dir)
	if err != nil {
		return fmt.Errorf("jobs folder: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil // no owner to compare (not a Unix file system)
	}
	euid := uint32(os.Geteuid())
	if st.Uid == euid {
		return nil
	}
	return &NotOwnerError{Dir: s.Dir, Owner: st.Uid, OwnerName: UserName(st.Uid), User: euid, UserName: UserName(euid)}
}

// UserName is uid's login name, or "#UID" (the form sudo -u takes) when
// the system has none for it.
func UserName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil && u.Username != "" {
		return u.Username
	}
	return "#" + id
}
