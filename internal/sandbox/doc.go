// Package sandbox runs one agent or tool process contained: it sees the
// system read-only, its workspace and a fresh HOME read-write, a private
// /tmp, and nothing else of the host — not the jobs folder around its
// workspace, not the folder's keys, not the daemon's environment or
// processes — and everything it starts dies with the call.
//
// Why a package of its own: an agent runs with whatever rights the process
// that starts it has, so a supervisor that does not contain what it
// supervises promises budgets and a tamper-evident history only to polite
// agents (issue 19). Every agent process is meant to start through one
// Executor, so that the rule "what an agent may reach" has one place.
//
// Layers (docs/security.md):
//   - bwrap: bubblewrap puts the process in new user, PID, mount, IPC, UTS,
//     cgroup and (unless the network is shared) network namespaces, with
//     only the listed paths mounted. Killing the PID namespace's init kills
//     every descendant, double-forked and setsid'd ones included.
//   - landlock: inside the sandbox, just before exec, a re-exec'd helper
//     sets rlimits, drops capabilities, sets no_new_privs and restricts
//     itself with Landlock to the same paths (a second layer). Where user
//     namespaces are unavailable it is the only layer.
//   - none: an explicit opt-out, never chosen silently (fail closed).
//
// Calls outlive the daemon: each runs under a launcher (this binary
// re-exec'd as "__sandbox-launch", in a session of its own) that keeps the
// call's output, exit status and timing durably in a call directory
// outside the sandbox, so a restarted daemon adopts a finished call (never
// re-asks it) and can wait for or kill one still running.
//
// A bwrap sandbox costs more to start than the program it runs: an
// owner's (a job's) next call may find its sandbox started ahead, a spare
// that only a call whose plan makes that very sandbox uses (spare.go).
//
// A binary that starts sandboxed calls must call Helper first thing in
// main (and a test binary in TestMain): the launcher and the in-sandbox
// helper are that same binary run with a helper verb, unless the small
// logist-sandbox binary (./logist-sandbox, only this package) lies
// beside it (OwnBinary): then they are that one, whose starts cost less.
package sandbox
