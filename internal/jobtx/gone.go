package jobtx

import (
	"fmt"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/manifest"
)

// HistoryMissingError is a job whose manifest says Logist has recorded
// its history but whose history is gone.
type HistoryMissingError struct{ msg string }

func (e *HistoryMissingError) Error() string { return e.msg }

// HistoryGone refuses a job whose history has been deleted or emptied
// while its manifest shows Logist recorded work (run.updated_at is set by
// every commit, and every commit follows a history record): a run or a
// steward's command on it would start a new, empty history and silently
// drop the old one, after which even logist verify could not tell. Every
// transaction checks it (Begin), the scheduler before a run; restoring
// the history lets the job go on.
func HistoryGone(jobDir string, m *manifest.Manifest) error {
	if m.Run.UpdatedAt == "" {
		return nil
	}
	if ok, err := history.Present(jobDir); ok || err != nil {
		return nil // an error: let the run report what it cannot read
	}
	return &HistoryMissingError{fmt.Sprintf("history %s is missing or empty, but the manifest shows recorded work (last updated %s); "+
		"not starting a new history over it: restore the file", history.Path(jobDir), m.Run.UpdatedAt)}
}
