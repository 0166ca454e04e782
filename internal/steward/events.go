package steward

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/signing"
)

// EventsFile, in the jobs folder's .logist, is where each steward command
// and its result is appended; the daemon reads it to count commands in its
// metrics (the CLI runs in another process). It is best effort: a lost line
// costs a metric, never a command.
const EventsFile = "steward-events.jsonl"

// Commands are the steering commands, the ones that change jobs, by the
// names their events carry: a logist command's name, or for the
// schedules' pause and resume their history record's. The CLI's registry
// marks its commands from this list (each records an Event when it runs),
// and the daemon's metrics count each under its name
// (logistd_steward_commands_total), so the two cannot drift apart.
var Commands = []string{"submit", "activate", "resume", "halt", "rollback", "reply", "pm", "play", "set",
	history.CommandSchedulePause, history.CommandScheduleResume}

// Event is one steward command's outcome.
type Event struct {
	Time    string `json:"ts"`
	Command string `json:"command"`
	Result  string `json:"result"`
}

// RecordEvent appends an event for the daemon's metrics.
func RecordEvent(jobsDir, command, result string) {
	dir := filepath.Join(jobsDir, signing.Dir)
	if _, err := os.Stat(dir); err != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, EventsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	// Best effort, like the rest: the file only feeds the daemon's
	// metrics, and a lost line is one command not counted.
	b, _ := json.Marshal(Event{Time: time.Now().UTC().Format(time.RFC3339Nano), Command: command, Result: result})
	_, _ = f.Write(append(b, '\n'))
	_ = f.Close()
}

// ReadEvents reads the complete events after byte off and returns the
// offset after the last complete line. A file shorter than off (truncated)
// is read from the start.
func ReadEvents(file string, off int64) ([]Event, int64) {
	f, err := os.Open(file)
	if err != nil {
		return nil, off
	}
	defer f.Close() //nolint:errcheck // read-only
	if fi, err := f.Stat(); err == nil && fi.Size() < off {
		off = 0
	}
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return nil, off
	}
	var out []Event
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return out, off // an incomplete last line is read next time
		}
		off += int64(len(line))
		var e Event
		if json.Unmarshal(bytes.TrimSpace(line), &e) == nil && e.Command != "" {
			out = append(out, e)
		}
	}
}
