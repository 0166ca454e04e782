// Command benchfloor is logist-bench's pickup floor: the least a program
// can do within goal 1's terms. For each manifest renamed into DIR it
// validates it with Logist's own check (manifest.Decode), durably records
// the intent (one short append to a single log, fsync'd) and only then
// starts the agent. No job folder, history, workspace, request file or
// lock: what Logist takes beyond this is its own.
//
//	benchfloor DIR INTENTLOG AGENT STAMPFILE
//
// It prints "ready" on stderr once it watches DIR.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/schemas"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: benchfloor DIR INTENTLOG AGENT STAMPFILE")
		return 2
	}
	dir, logPath, agent, stamps := args[0], args[1], args[2], args[3]
	log, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The log's own entry is made durable once, before anything is timed.
	if d, err := os.Open(filepath.Dir(logPath)); err == nil {
		err = d.Sync()
		_ = d.Close() // read-only
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	w, err := fsnotify.NewWatcher()
	if err == nil {
		err = w.Add(dir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// As logistd does before it reports ready.
	if err := schemas.Warm(schemas.Manifest); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "ready")
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return 0
			}
			if !ev.Has(fsnotify.Create) || !strings.HasSuffix(ev.Name, ".json") {
				continue
			}
			data, err := os.ReadFile(ev.Name)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				continue
			}
			m, err := manifest.Decode(ev.Name, data)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				continue
			}
			rec := fmt.Sprintf(`{"type":"intent","job_id":%q,"phase":"work","role":"worker","time":%q}`+"\n",
				m.JobID, time.Now().UTC().Format(time.RFC3339Nano))
			if _, err := log.WriteString(rec); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			if err := log.Sync(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			id := strings.TrimSuffix(filepath.Base(ev.Name), ".json")
			cmd := exec.Command(agent, stamps, id, "worker")
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, err)
				continue
			}
			go func() { _ = cmd.Wait() }() // reaped: its stamp is what counts
		case err := <-w.Errors:
			fmt.Fprintln(os.Stderr, err)
		}
	}
}
