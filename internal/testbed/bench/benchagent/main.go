// Command benchagent is the trivial agent of logist-bench: its first act is
// to take its own timestamp, which it appends ("LABEL UNIXNANO\n", one
// write) to the file named by its first argument ("-": none); then it
// answers one valid JSON object on stdout. HOLDMS, if given, keeps it
// running that long after the stamp, so that the harness can read the
// daemon's counters while the daemon waits for it. UNTIL, if given, makes a
// supervisor answer RETRY while the call's interaction number
// ($LOGIST_INTERACTION) is below it: one job then makes UNTIL calls.
//
//	benchagent STAMPFILE LABEL [ROLE [HOLDMS [UNTIL]]]
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"
)

func main() {
	t := time.Now().UnixNano()
	if len(os.Args) > 2 && os.Args[1] != "-" {
		label := os.Args[2]
		if len(os.Args) > 3 {
			label += " " + os.Args[3]
		}
		f, err := os.OpenFile(os.Args[1], os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err == nil {
			_, err = f.Write([]byte(label + " " + strconv.FormatInt(t, 10) + "\n"))
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			// The harness would wait for a stamp that never comes.
			fmt.Fprintln(os.Stderr, "benchagent:", err)
			os.Exit(1)
		}
	}
	if len(os.Args) > 4 {
		if ms, err := strconv.Atoi(os.Args[4]); err == nil {
			time.Sleep(time.Duration(ms) * time.Millisecond)
		}
	}
	action := "COMPLETED"
	if len(os.Args) > 5 && os.Args[3] == "supervisor" {
		until, _ := strconv.Atoi(os.Args[5])
		if n, _ := strconv.Atoi(os.Getenv("LOGIST_INTERACTION")); n < until {
			action = "RETRY"
		}
	}
	if _, err := os.Stdout.WriteString(`{"action":"` + action + `","evidence_files":[],"summary_for_supervisor":"ok"}` + "\n"); err != nil {
		os.Exit(1)
	}
}
