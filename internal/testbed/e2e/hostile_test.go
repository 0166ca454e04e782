package e2e

// The hostile-input catalogue (docs/hostile-inputs.md), run for real: one
// logistd serves a jobs folder holding every hostile job of the catalogue at
// once plus good jobs, and each job must end in its catalogued outcome while
// the daemon keeps running and the good jobs succeed.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/daemon"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
)

// Outcomes that are not a lifecycle status.
const (
	outInvalid  = "INVALID"  // the manifest is refused: logged MANIFEST_INVALID, listed as INVALID, never run
	outUnplaced = "UNPLACED" // a bare manifest refused before it is moved into a folder
	outIgnored  = "IGNORED"  // not a job to the daemon: never run, never touched
	outRefused  = "REFUSED"  // the run is refused with a logged error code; the manifest keeps its status
)

type hostile struct {
	id    string // catalogue id
	name  string // job folder (or, with bare, the job it should never become)
	input string // what is hostile, for messages

	manifest string            // job.json content
	bare     string            // drop the manifest as jobs/<bare> instead of a folder
	files    map[string]string // more files, relative to the job folder
	links    map[string]string // symlinks relative to the job folder -> target ($OUT: a folder outside)
	late     bool              // dropped while the daemon runs (the watcher's path, not the scan's)
	fifos    []string          // named pipes made instead of files, relative to the job folder

	want   string // lifecycle status or one of the outcomes above
	code   string // run.error_code; INVALID/UNPLACED: part of the reported error; REFUSED: the logged error_code
	resp   string // error_code of the last response record; "none": no agent was called
	reason string // part of run.reason (or of the logged error for REFUSED)
	stays  string // REFUSED: the status the manifest keeps
	check  func(t *testing.T, h *hostileRun, c *hostile)
}

const okAnswer = `{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "done"}`

func job(worker string, fields ...string) string {
	s := `{"task_description": "t", `
	for _, f := range fields {
		s += f + ", "
	}
	return s + `"agents": {"worker": ` + worker + `, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}}`
}

// optOut is the manifest field of a job whose processes run uncontained.
const optOut = `"sandbox": "none"`

func scriptW(step string) string { return `{"provider": "script", "script": [` + step + `]}` }

func rawW(raw string) string {
	b, _ := json.Marshal(raw)
	return scriptW(`{"raw": ` + string(b) + `}`)
}

// cmdW runs ../agent.sh (the job folder's agent.sh, from the workspace).
func cmdW(agentFields, commandFields string) string {
	return `{"provider": "command", ` + agentFields + `"command": {"argv": ["sh", "../agent.sh", "{answer_file}"]` + commandFields + `}}`
}

func agent(sh string) map[string]string { return map[string]string{"agent.sh": sh} }

// hostileCases is the catalogue's table, H-id by H-id.
func hostileCases() []hostile {
	good := job(scriptW(`{"action": "COMPLETED", "summary": "done"}`))
	running := `"status": "RUNNING", "current_phase": "work", "run": {"updated_at": "2025-01-01T00:00:00Z"}`
	gone := func(pidFile string) func(t *testing.T, h *hostileRun, c *hostile) {
		return func(t *testing.T, h *hostileRun, c *hostile) { h.processGone(t, c, pidFile) }
	}
	return []hostile{
		// --- Manifests ---------------------------------------------------
		{id: "H01", name: "m-truncated", input: "truncated JSON", manifest: `{"task_description": "t", "agents": {`,
			want: outInvalid, code: "invalid JSON"},
		{id: "H02", name: "m-empty", input: "empty job.json", manifest: "",
			want: outInvalid, code: "invalid JSON"},
		{id: "H03", name: "m-nul-raw", input: "raw NUL byte in a string", manifest: strings.Replace(good, `"t"`, "\"t\x00\"", 1),
			want: outInvalid, code: "invalid JSON"},
		{id: "H04", name: "m-nul-escaped", input: `escaped \u0000 in task_description`, manifest: strings.Replace(good, `"t"`, `"t\u0000x"`, 1),
			want: string(lifecycle.Success)},
		{id: "H05", name: "m-huge", input: "manifest of 1 MiB + 1 KiB", manifest: strings.Replace(good, `"t"`, `"`+strings.Repeat("x", 1<<20+1024)+`"`, 1),
			want: outInvalid, code: "larger than 1048576 bytes"},
		{id: "H06", name: "m-deep", input: "arrays nested 100000 deep", manifest: `{"task_description": ` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`,
			want: outInvalid, code: "invalid JSON"},
		{id: "H07", name: "m-array", input: "a JSON array, not an object", manifest: `[` + good + `]`,
			want: outInvalid, code: "must be a JSON object"},
		{id: "H08", name: "m-two-objects", input: "two manifests in one file", manifest: good + good,
			want: outInvalid, code: "invalid JSON"},
		{id: "H09", name: "m-cost-string", input: `cost_threshold "5" (wrong type)`, manifest: job(scriptW(`{}`), `"cost_threshold": "5"`),
			want: outInvalid, code: "/cost_threshold"},
		{id: "H10", name: "m-agents-array", input: "agents is an array", manifest: `{"task_description": "t", "agents": []}`,
			want: outInvalid, code: "/agents"},
		{id: "H12", name: "m-unknown-status", input: `status "PAUSED"`, manifest: job(scriptW(`{}`), `"status": "PAUSED"`),
			want: outInvalid, code: "/status"},
		{id: "H13", name: "m-unknown-field", input: "unknown top-level field", manifest: job(scriptW(`{}`), `"colour": "blue"`),
			want: outInvalid, code: "colour"},
		{id: "H14", name: "m-future", input: "schema_version 7", manifest: job(scriptW(`{}`), `"schema_version": 7`),
			want: outInvalid, code: "newer than this logist supports"},
		{id: "H15", name: "m-id-slash", input: `job_id "a/b"`, manifest: job(scriptW(`{}`), `"job_id": "a/b"`),
			want: outInvalid, code: "/job_id"},
		{id: "H16", name: "m-id-dotdot", input: `job_id ".."`, manifest: job(scriptW(`{}`), `"job_id": ".."`),
			want: outInvalid, code: "/job_id"},
		{id: "H17", name: "m-id-control", input: `job_id with \u0007`, manifest: job(scriptW(`{}`), `"job_id": "ab\u0007c"`),
			want: outInvalid, code: "/job_id"},
		{id: "H18", name: "m-id-mismatch", input: "job_id naming another folder", manifest: job(scriptW(`{}`), `"job_id": "other"`),
			want: outInvalid, code: `does not match its folder`},
		{id: "H19", name: "bad name", input: "folder name with a space", manifest: good,
			want: outInvalid, code: "is invalid"},
		{id: "H20", name: "bad\x01ctl", input: "folder name with a control character", manifest: good,
			want: outInvalid, code: "is invalid"},
		{id: "H22", name: "a..b", input: "folder name with '..'", manifest: good,
			want: outInvalid, code: "is invalid"},
		{id: "H23", name: "traversal", bare: "traversal.json", input: `bare manifest with job_id "../../escape"`,
			manifest: job(scriptW(`{}`), `"job_id": "../../escape"`),
			want:     outInvalid, code: "/job_id: must be a plain name", check: func(t *testing.T, h *hostileRun, c *hostile) {
				for _, p := range []string{filepath.Join(h.jobs, "..", "escape"), filepath.Join(h.jobs, "..", "..", "escape"), filepath.Join(h.jobs, "escape")} {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("%s: %s was created", c.id, p)
					}
				}
			}},
		{id: "H24", name: "ctl\x02", bare: "ctl\x02.json", input: "bare manifest named with a control character, no job_id", manifest: good,
			want: outUnplaced, code: "is invalid"},
		{id: "H25", name: "huge", bare: "huge.json", input: "bare manifest of 2 MB", manifest: strings.Replace(good, `"t"`, `"`+strings.Repeat("x", 2<<20)+`"`, 1),
			want: outUnplaced, code: "larger than 1048576 bytes"},
		{id: "H26", name: "linked", input: "job folder that is a symlink to a job elsewhere", links: map[string]string{".": "$OUT/linked-job"},
			want: outIgnored, check: func(t *testing.T, h *hostileRun, c *hostile) {
				target := filepath.Join(h.out, "linked-job")
				if b, _ := os.ReadFile(filepath.Join(target, "job.json")); string(b) != good {
					t.Errorf("%s: the linked job's manifest was changed", c.id)
				}
				if _, err := os.Stat(history.Path(target)); err == nil {
					t.Errorf("%s: the daemon ran a job through a symlinked folder", c.id)
				}
			}},
		{id: "H27", name: "m-context-escape", input: `context_files ["../secret"]`, manifest: job(scriptW(`{}`), `"context_files": ["../secret"]`),
			want: outInvalid, code: "/context_files/0: leaves the job folder"},
		{id: "H130", name: "m-number-out-of-range", input: "limits.max_retries 1e1000001 (past the exponents math/big takes)",
			manifest: job(scriptW(`{}`), `"limits": {"max_retries": 1e1000001}`),
			want:     outInvalid, code: "/limits/max_retries: expected integer, but got a number out of range"},
		{id: "H134", name: "m-cron-zone", input: `schedule.cron "TZ=UTC" (a zone and no expression)`,
			manifest: job(scriptW(`{}`), `"schedule": {"cron": "TZ=UTC"}`),
			want:     outInvalid, code: `/schedule/cron: cron "TZ=UTC": a time zone goes in schedule.timezone, not in the expression`},
		{id: "H102", name: "m-id-escape", input: `job_id "../escape" in a job folder`, manifest: job(scriptW(`{}`), `"job_id": "../escape"`),
			want: outInvalid, code: "/job_id: must be a plain name"},
		{id: "H103", name: "m-argv-empty", input: `command argv [""]`, manifest: job(`{"provider": "command", "command": {"argv": [""]}}`),
			want: outInvalid, code: "/agents/worker/command/argv/0: the program to run is empty"},
		{id: "H28", name: "m-prompt-dotdot", input: `prompts.worker "../../etc/passwd"`, manifest: job(scriptW(`{}`), `"prompts": {"worker": "../../etc/passwd"}`),
			want: outInvalid, code: "/prompts/worker"},
		{id: "H29", name: "m-prompt-symlink", input: "prompt file is a symlink out of the job folder",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"prompts": {"worker": "p.md"}`), links: map[string]string{"p.md": "$OUT/secret"},
			want: string(lifecycle.InterventionRequired), code: "AGENT_CONFIG", resp: "none", reason: "escapes"},
		{id: "H30", name: "m-prompt-missing", input: "prompt file missing",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"prompts": {"worker": "nope.md"}`),
			want:     string(lifecycle.InterventionRequired), code: "AGENT_CONFIG", resp: "none", reason: "prompts.worker"},
		{id: "H116", name: "m-prompt-huge", input: "prompt file of 1 MiB and one byte",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"prompts": {"worker": "p.md"}`), files: map[string]string{"p.md": strings.Repeat("p", 1<<20+1)},
			want: string(lifecycle.InterventionRequired), code: "AGENT_CONFIG", resp: "none", reason: "prompts.worker: p.md is larger than the 1048576 bytes a prompt file may hold"},
		{id: "H31", name: "m-running-no-phase", input: "status RUNNING without current_phase",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"status": "RUNNING"`),
			want:     outInvalid, code: "/current_phase: a RUNNING job must name its current phase"},
		{id: "H32", name: "m-success", input: "dropped in as SUCCESS", manifest: job(scriptW(`{}`), `"status": "SUCCESS"`),
			want: string(lifecycle.Success), check: func(t *testing.T, h *hostileRun, c *hostile) {
				if _, err := os.Stat(history.Path(filepath.Join(h.jobs, c.name))); err == nil {
					t.Errorf("%s: a finished job was run", c.id)
				}
			}},
		{id: "H33", name: "m-over-budget", input: "cumulative_cost already at cost_threshold",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"cost_threshold": 50, "metrics": {"cumulative_cost": 50, "cumulative_time_seconds": 0}`),
			want:     string(lifecycle.HaltedCost), code: "COST_BUDGET", resp: "none", reason: "--cost-threshold"},
		{id: "H34", name: "m-bom", input: "UTF-8 byte-order mark before the manifest", manifest: "\xef\xbb\xbf" + good,
			want: outInvalid, code: "invalid JSON"},
		{id: "H35", name: "m-bad-utf8", input: "invalid UTF-8 in task_description", manifest: strings.Replace(good, `"t"`, "\"t\xff\xfe\"", 1),
			want: string(lifecycle.Success)},
		// Numbers past what a duration or an int64 of micro-dollars holds
		// (the schema sets no maximum): no limit, not one already reached.
		{id: "H111", name: "m-huge-time-budget", input: "time_threshold_minutes 1e9", manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"time_threshold_minutes": 1e9`),
			want: string(lifecycle.Success)},
		{id: "H112", name: "m-huge-cost-budget", input: "cost_threshold 1e300", manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"cost_threshold": 1e300`),
			want: string(lifecycle.Success)},
		{id: "H113", name: "m-huge-timeout", input: "agent timeout_seconds 1e10, limits.call_timeout_seconds 1e300",
			manifest: job(`{"provider": "script", "timeout_seconds": 1e10, "script": [{"action": "COMPLETED", "summary": "x", "delay_ms": 20}]}`, `"limits": {"call_timeout_seconds": 1e300}`),
			want:     string(lifecycle.Success)},

		// --- Agent answers -------------------------------------------------
		{id: "H36", name: "a-empty", input: "empty answer", manifest: job(rawW("")),
			want: string(lifecycle.InterventionRequired), code: "AGENT_EMPTY", resp: "AGENT_EMPTY"},
		{id: "H37", name: "a-whitespace", input: "whitespace-only answer", manifest: job(rawW(" \n\t \n")),
			want: string(lifecycle.InterventionRequired), code: "AGENT_EMPTY", resp: "AGENT_EMPTY"},
		{id: "H38", name: "a-prose", input: "prose, no JSON", manifest: job(rawW("I finished, trust me.")),
			want: string(lifecycle.InterventionRequired), code: "NOT_JSON", resp: "NOT_JSON"},
		{id: "H39", name: "a-truncated", input: "truncated JSON answer", manifest: job(rawW(`{"action": "COMPLETED", "evidence_files": [`)),
			want: string(lifecycle.InterventionRequired), code: "NOT_JSON", resp: "NOT_JSON"},
		{id: "H40", name: "a-several", input: "two JSON objects", manifest: job(rawW(okAnswer + "\n" + okAnswer)),
			want: string(lifecycle.InterventionRequired), code: "SEVERAL_OBJECTS", resp: "SEVERAL_OBJECTS"},
		{id: "H41", name: "a-array", input: "an array holding the answer", manifest: job(rawW("[" + okAnswer + "]")),
			want: string(lifecycle.InterventionRequired), code: "NOT_JSON", resp: "NOT_JSON", reason: "array"},
		{id: "H42", name: "a-deep", input: "arrays nested 100000 deep", manifest: job(rawW(strings.Repeat("[", 100000) + strings.Repeat("]", 100000))),
			want: string(lifecycle.InterventionRequired), code: "NOT_JSON", resp: "NOT_JSON"},
		{id: "H43", name: "a-nul-raw", input: "raw NUL byte inside the summary", manifest: job(rawW(strings.Replace(okAnswer, "done", "do\x00ne", 1))),
			want: string(lifecycle.InterventionRequired), code: "NOT_JSON", resp: "NOT_JSON"},
		{id: "H44", name: "a-nul-escaped", input: `escaped \u0000 inside the summary`, manifest: job(rawW(strings.Replace(okAnswer, "done", `do\u0000ne`, 1))),
			want: string(lifecycle.Success)},
		{id: "H45", name: "a-summary-number", input: "summary is a number",
			manifest: job(rawW(`{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": 5}`)),
			want:     string(lifecycle.InterventionRequired), code: "SCHEMA_INVALID", resp: "SCHEMA_INVALID", reason: "/summary_for_supervisor"},
		{id: "H46", name: "a-evidence-null", input: "evidence_files null",
			manifest: job(rawW(`{"action": "COMPLETED", "evidence_files": null, "summary_for_supervisor": "x"}`)),
			want:     string(lifecycle.InterventionRequired), code: "SCHEMA_INVALID", resp: "SCHEMA_INVALID", reason: "/evidence_files"},
		{id: "H47", name: "a-action-lower", input: `action "completed"`, manifest: job(rawW(strings.Replace(okAnswer, "COMPLETED", "completed", 1))),
			want: string(lifecycle.InterventionRequired), code: "ACTION_INVALID", resp: "ACTION_INVALID"},
		{id: "H48", name: "a-action-unknown", input: `action "MERGED"`, manifest: job(rawW(strings.Replace(okAnswer, "COMPLETED", "MERGED", 1))),
			want: string(lifecycle.InterventionRequired), code: "ACTION_INVALID", resp: "ACTION_INVALID", reason: `"MERGED"`},
		{id: "H49", name: "a-summary-long", input: "summary of 501 characters", manifest: job(rawW(strings.Replace(okAnswer, "done", strings.Repeat("é", 501), 1))),
			want: string(lifecycle.InterventionRequired), code: "SCHEMA_INVALID", resp: "SCHEMA_INVALID"},
		{id: "H50", name: "a-summary-blank", input: "blank summary", manifest: job(rawW(strings.Replace(okAnswer, "done", "   ", 1))),
			want: string(lifecycle.InterventionRequired), code: "SUMMARY_MISSING", resp: "SUMMARY_MISSING"},
		{id: "H51", name: "a-cost-negative", input: "cost_usd -1", manifest: job(rawW(strings.Replace(okAnswer, "{", `{"cost_usd": -1, `, 1))),
			want: string(lifecycle.InterventionRequired), code: "SCHEMA_INVALID", resp: "SCHEMA_INVALID", reason: "/cost_usd"},
		{id: "H52", name: "a-fence-prose", input: "fenced answer with prose around it", manifest: job(rawW("Sure!\n```json\n" + okAnswer + "\n```")),
			want: string(lifecycle.InterventionRequired), code: "NOT_JSON", resp: "NOT_JSON"},
		{id: "H131", name: "a-cost-out-of-range", input: "cost_usd 1e1000001 and 1e999999 in an extra member",
			manifest: job(rawW(strings.Replace(okAnswer, "{", `{"cost_usd": 1e1000001, "x": [1e999999], `, 1))),
			want:     string(lifecycle.InterventionRequired), code: "SCHEMA_INVALID", resp: "SCHEMA_INVALID", reason: "/cost_usd: number out of range"},
		{id: "H53", name: "a-cost-huge", input: "command answer with cost_usd 1e308",
			manifest: job(cmdW("", "")), files: agent(`echo '{"action": "COMPLETED", "evidence_files": [], "summary_for_supervisor": "x", "cost_usd": 1e308}'`),
			want: string(lifecycle.InterventionRequired), code: "SCHEMA_INVALID", resp: "SCHEMA_INVALID", reason: "/cost_usd",
			check: func(t *testing.T, h *hostileRun, c *hostile) {
				m, err := h.store.Load(c.name)
				if err != nil || m.Metrics.CumulativeCost != 0 {
					t.Errorf("%s: an unbelievable cost was charged: %v %v", c.id, m, err)
				}
			}},

		// --- Agent processes -------------------------------------------------
		// The cases that check the agent's processes by their pids on the
		// host opt out of the sandbox (optOut): a PID namespace hides them.
		// They hold the uncontained path to its promises; a contained call's
		// are the sandbox's tests (internal/sandbox, sandbox.txtar).
		{id: "H54", name: "p-flood-stdout", input: "prints without end to stdout (default 4 MiB cap)",
			manifest: job(cmdW("", ""), optOut), files: agent(`echo $$ > agent.pid; exec yes 'spam spam spam spam spam spam spam spam spam'`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_OUTPUT_LIMIT", resp: "AGENT_OUTPUT_LIMIT", reason: "more than 4194304 bytes",
			check: func(t *testing.T, h *hostileRun, c *hostile) {
				h.processGone(t, c, "agent.pid")
				if r := h.lastResponse(t, c); len(r.RawResponse) > 64<<10+len("…[truncated]") || len(r.RawResponse) < 64<<10 {
					t.Errorf("%s: recorded partial output is %d bytes, want it cut at 64 KiB", c.id, len(r.RawResponse))
				}
			}},
		{id: "H55", name: "p-flood-stderr", input: "prints without end to stderr (max_output_bytes 65536)",
			manifest: job(cmdW("", `, "max_output_bytes": 65536`), optOut), files: agent(`echo $$ > agent.pid; exec yes 'err err err err err err' >&2`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_OUTPUT_LIMIT", resp: "AGENT_OUTPUT_LIMIT",
			check: func(t *testing.T, h *hostileRun, c *hostile) {
				h.processGone(t, c, "agent.pid")
				if r := h.lastResponse(t, c); len(r.Stderr) > 4096+len("…[truncated]") || !strings.HasPrefix(r.Stderr, "err err") {
					t.Errorf("%s: recorded stderr is %d bytes, want it cut at 4 KiB", c.id, len(r.Stderr))
				}
			}},
		{id: "H114", name: "p-flood-past-ceiling", input: "prints without end to stdout, max_output_bytes 1 TiB (past the daemon's 64 MiB ceiling)",
			manifest: job(cmdW("", `, "max_output_bytes": 1099511627776`), optOut), files: agent(`echo $$ > agent.pid; exec yes 'spam spam spam spam spam spam spam spam spam'`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_OUTPUT_LIMIT", resp: "AGENT_OUTPUT_LIMIT",
			reason: "more than 67108864 bytes, this daemon's output ceiling (logistd --output-ceiling-bytes; the job asks 1099511627776)",
			check:  func(t *testing.T, h *hostileRun, c *hostile) { h.processGone(t, c, "agent.pid") }},
		{id: "H115", name: "p-flood-past-ceiling-contained", input: "the same in the job's sandbox, on stderr",
			manifest: job(cmdW("", `, "max_output_bytes": 1099511627776`)), files: agent(`exec yes 'err err err err err err' >&2`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_OUTPUT_LIMIT", resp: "AGENT_OUTPUT_LIMIT",
			reason: "this daemon's output ceiling"},
		{id: "H56", name: "p-never-exits", input: "never exits (timeout_seconds 0.5)",
			manifest: job(cmdW(`"timeout_seconds": 0.5, `, ""), optOut), files: agent(`echo $$ > agent.pid; exec sleep 60`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_TIMEOUT", resp: "AGENT_TIMEOUT", reason: "timeout",
			check: func(t *testing.T, h *hostileRun, c *hostile) {
				h.processGone(t, c, "agent.pid")
				if r := h.lastResponse(t, c); r.Status != history.StatusTimeout {
					t.Errorf("%s: response status %s, want TIMEOUT", c.id, r.Status)
				}
			}},
		{id: "H57", name: "p-exit-nonzero", input: "exits with status 3",
			manifest: job(cmdW("", ""), `"limits": {"max_api_retries": 1, "backoff_initial_ms": 1}`), files: agent(`echo 'disk on fire' >&2; exit 3`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_EXIT", resp: "AGENT_EXIT", reason: "after 1 automatic retries: sh exited with status 3: disk on fire",
			check: func(t *testing.T, h *hostileRun, c *hostile) { h.responses(t, c, 2) }},
		{id: "H58", name: "p-signal", input: "killed by a signal (SIGKILL)",
			manifest: job(cmdW("", ""), `"limits": {"max_api_retries": 0}`, optOut), files: agent(`kill -KILL $$`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_EXIT", resp: "AGENT_EXIT", reason: "sh was killed by SIGKILL",
			check: func(t *testing.T, h *hostileRun, c *hostile) { h.responses(t, c, 1) }},
		{id: "H59", name: "p-fork-holds-pipe", input: "answers, exits, leaves a child holding its stdout",
			manifest: job(cmdW("", ""), optOut), files: agent(`sleep 60 & echo $! > child.pid; echo '` + okAnswer + `'`),
			want: string(lifecycle.Success), check: gone("child.pid")},
		{id: "H60", name: "p-fork-detached", input: "answers, exits, leaves a child with its output redirected",
			manifest: job(cmdW("", ""), optOut), files: agent(`sleep 60 >/dev/null 2>&1 & echo $! > child.pid; echo '` + okAnswer + `'`),
			want: string(lifecycle.Success), check: gone("child.pid")},
		{id: "H61", name: "p-several", input: "prints two JSON objects",
			manifest: job(cmdW("", "")), files: agent(`echo '` + okAnswer + `'; echo '` + okAnswer + `'`),
			want: string(lifecycle.InterventionRequired), code: "SEVERAL_OBJECTS", resp: "SEVERAL_OBJECTS"},
		{id: "H62", name: "p-empty", input: "prints nothing, exits 0",
			manifest: job(cmdW("", "")), files: agent(`exit 0`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_EMPTY", resp: "AGENT_EMPTY"},
		{id: "H63", name: "p-answer-file-missing", input: `answer "file", never written`,
			manifest: job(cmdW("", `, "answer": "file"`)), files: agent(`echo 'not the answer'`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_EMPTY", resp: "AGENT_EMPTY", reason: "wrote no answer file"},
		{id: "H64", name: "p-answer-file-huge", input: `answer file of 100 kB, max_output_bytes 1024`,
			manifest: job(cmdW("", `, "answer": "file", "max_output_bytes": 1024`)), files: agent(`head -c 100000 /dev/zero | tr '\0' x > "$1"`),
			want: string(lifecycle.InterventionRequired), code: "AGENT_OUTPUT_LIMIT", resp: "AGENT_OUTPUT_LIMIT", reason: "more than 1024"},
		{id: "H65", name: "p-not-found", input: "program does not exist",
			manifest: job(`{"provider": "command", "command": {"argv": ["/nonexistent/agent"]}}`),
			want:     string(lifecycle.InterventionRequired), code: "AGENT_CONFIG", resp: "none", reason: `/agents/worker/command/argv/0: program "/nonexistent/agent" does not exist`},
		{id: "H66", name: "p-requests-file", input: "requests/ is a file",
			manifest: job(cmdW("", "")), files: map[string]string{"agent.sh": `echo '` + okAnswer + `'`, "requests": "not a folder"},
			want: string(lifecycle.InterventionRequired), code: "AGENT_START", resp: "AGENT_START"},

		// --- Evidence paths --------------------------------------------------
		{id: "H67", name: "e-dotdot", input: `evidence "../job.json"`, manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x", "evidence_files": ["../job.json"]}`)),
			want: string(lifecycle.InterventionRequired), code: "PROTOCOL_VIOLATION", resp: "PROTOCOL_VIOLATION", reason: "'..' leads outside"},
		{id: "H68", name: "e-absolute", input: `evidence "/etc/passwd"`, manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x", "evidence_files": ["/etc/passwd"]}`)),
			want: string(lifecycle.InterventionRequired), code: "PROTOCOL_VIOLATION", resp: "PROTOCOL_VIOLATION", reason: "absolute path"},
		{id: "H69", name: "e-symlink-out", input: "evidence through a symlink out of the workspace",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x", "evidence_files": ["link/secret"]}`)), links: map[string]string{"workspace/link": "$OUT"},
			want: string(lifecycle.InterventionRequired), code: "PROTOCOL_VIOLATION", resp: "PROTOCOL_VIOLATION", reason: "symlink points outside"},
		{id: "H70", name: "e-dangling", input: "evidence is a dangling symlink",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x", "evidence_files": ["dangling"]}`)), links: map[string]string{"workspace/dangling": "/nonexistent/x"},
			want: string(lifecycle.InterventionRequired), code: "PROTOCOL_VIOLATION", resp: "PROTOCOL_VIOLATION", reason: "dangling symlink"},
		{id: "H71", name: "e-nul", input: `evidence "a\u0000b"`, manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x", "evidence_files": ["a\u0000b"]}`)),
			want: string(lifecycle.InterventionRequired), code: "PROTOCOL_VIOLATION", resp: "PROTOCOL_VIOLATION", reason: "NUL"},
		{id: "H72", name: "e-empty", input: `evidence ""`, manifest: job(rawW(`{"action": "COMPLETED", "evidence_files": [""], "summary_for_supervisor": "x"}`)),
			want: string(lifecycle.InterventionRequired), code: "PROTOCOL_VIOLATION", resp: "PROTOCOL_VIOLATION", reason: "empty path"},
		{id: "H73", name: "e-missing", input: "evidence file that does not exist", manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x", "evidence_files": ["nope.txt"]}`)),
			want: string(lifecycle.Success), check: func(t *testing.T, h *hostileRun, c *hostile) {
				recs := h.records(t, c)
				for _, r := range recs {
					if r.Type == history.TypeResponse && r.Role == "worker" {
						if len(r.Response.Warnings) != 1 || !strings.Contains(r.Response.Warnings[0], "nope.txt") {
							t.Errorf("%s: warnings %q, want one naming nope.txt", c.id, r.Response.Warnings)
						}
						return
					}
				}
				t.Errorf("%s: no worker response", c.id)
			}},
		{id: "H74", name: "s-files-escape", input: `scripted agent writes "../escape.txt"`,
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x", "files": {"../escape.txt": "x"}}`)),
			want:     string(lifecycle.InterventionRequired), code: "AGENT_CONFIG", resp: "AGENT_CONFIG", reason: "escapes the workspace",
			check: func(t *testing.T, h *hostileRun, c *hostile) {
				if _, err := os.Stat(filepath.Join(h.jobs, c.name, "escape.txt")); err == nil {
					t.Errorf("%s: a file was written outside the workspace", c.id)
				}
			}},

		// --- The workspace itself ------------------------------------------------
		{id: "H75", name: "w-symlink-out", input: "workspace/ is a symlink to a folder outside the job folder",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x", "files": {"pwned.txt": "x"}}`)), links: map[string]string{"workspace": "$OUT/ws-target"},
			want: string(lifecycle.InterventionRequired), code: "WORKSPACE_UNSAFE", resp: "none", reason: "outside the job folder",
			check: func(t *testing.T, h *hostileRun, c *hostile) {
				if _, err := os.Stat(filepath.Join(h.out, "ws-target", "pwned.txt")); err == nil {
					t.Errorf("%s: the agent wrote into the folder outside", c.id)
				}
			}},
		{id: "H76", name: "w-symlink-jobdir", input: `workspace/ is a symlink to "." (the job folder)`,
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`)), links: map[string]string{"workspace": "."},
			want: string(lifecycle.InterventionRequired), code: "WORKSPACE_UNSAFE", resp: "none", reason: "must be a real folder"},
		{id: "H77", name: "w-symlink-inside", input: "workspace/ is a symlink to another folder inside the job folder",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`)), files: map[string]string{"sub/keep": ""}, links: map[string]string{"workspace": "sub"},
			want: string(lifecycle.InterventionRequired), code: "WORKSPACE_UNSAFE", resp: "none", reason: "must be a real folder"},
		{id: "H78", name: "w-dangling", input: "workspace/ is a dangling symlink",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`)), links: map[string]string{"workspace": "/nonexistent/ws"},
			want: string(lifecycle.InterventionRequired), code: "WORKSPACE_UNSAFE", resp: "none", reason: "dangling symlink"},
		{id: "H79", name: "w-file", input: "workspace is a regular file",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`)), files: map[string]string{"workspace": "I am a file"},
			want: string(lifecycle.InterventionRequired), code: "WORKSPACE_UNSAFE", resp: "none", reason: "is a file, not a folder"},

		// --- History files ---------------------------------------------------------
		{id: "H81", name: "h-corrupt-middle", input: "history.jsonl with a garbage record in the middle",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), running),
			want:     outRefused, code: "HISTORY_CORRUPT", reason: "is corrupt", stays: string(lifecycle.Running),
			check: func(t *testing.T, h *hostileRun, c *hostile) { h.unchanged(t, c, history.FileName) }},
		{id: "H82", name: "h-deleted", input: "history.jsonl missing although the manifest shows recorded work",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), running),
			want:     outRefused, code: "HISTORY_MISSING", reason: "restore the file", stays: string(lifecycle.Running),
			check: func(t *testing.T, h *hostileRun, c *hostile) {
				if _, err := os.Stat(history.Path(filepath.Join(h.jobs, c.name))); err == nil {
					t.Errorf("%s: a new history was started over the missing one", c.id)
				}
			}},
		{id: "H83", name: "h-index-corrupt", input: "history-index.json is garbage",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), running), files: map[string]string{history.IndexFile: "{garbage"},
			want: outRefused, code: "HISTORY_CORRUPT", reason: "index", stays: string(lifecycle.Running),
			check: func(t *testing.T, h *hostileRun, c *hostile) { h.unchanged(t, c, history.IndexFile) }},
		{id: "H84", name: "h-newer", input: "history.jsonl ends in a record from a newer Logist",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), running),
			want:     outRefused, code: "HISTORY_TOO_NEW", reason: "upgrade logist", stays: string(lifecycle.Running),
			check: func(t *testing.T, h *hostileRun, c *hostile) { h.unchanged(t, c, history.FileName) }},
		{id: "H85", name: "h-torn-tail", input: "history.jsonl ends in a torn record (no newline)",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), running),
			want:     string(lifecycle.Success), check: func(t *testing.T, h *hostileRun, c *hostile) {
				if !h.logged(c.name, "HISTORY_TORN_TAIL") {
					t.Errorf("%s: the torn tail was not logged", c.id)
				}
			}},

		{id: "H99", name: "h-cut", input: "history.jsonl cut at a record boundary (its signed head names a later record)",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), running),
			want:     outRefused, code: "HISTORY_MISSING", reason: "ends at record 1, but its head says it held records up to 2", stays: string(lifecycle.Running),
			check: func(t *testing.T, h *hostileRun, c *hostile) { h.unchanged(t, c, history.FileName) }},
		{id: "H100", name: "h-last-damaged", input: "history.jsonl's last record damaged in place (a complete line that no longer parses)",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), running),
			want:     outRefused, code: "HISTORY_MISSING", reason: "ends at record 1", stays: string(lifecycle.Running),
			check: func(t *testing.T, h *hostileRun, c *hostile) { h.unchanged(t, c, history.FileName) }},

		// --- Lists an agent controls -------------------------------------------------
		{id: "H101", name: "a-evidence-100k", input: "command answer with 100,000 evidence paths",
			manifest: job(cmdW("", "")),
			files:    agent(`printf '{"action": "COMPLETED", "summary_for_supervisor": "x", "evidence_files": ['; seq 1 99999 | sed 's/.*/"f&",/'; printf '"last"]}'`),
			want:     string(lifecycle.InterventionRequired), code: "SCHEMA_INVALID", resp: "SCHEMA_INVALID", reason: "/evidence_files: maximum 100 items",
			check: func(t *testing.T, h *hostileRun, c *hostile) {
				fi, err := os.Stat(filepath.Join(h.jobs, c.name, "job.json"))
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() > 64<<10 {
					t.Errorf("%s: job.json grew to %d bytes", c.id, fi.Size())
				}
			}},

		// --- Workspace snapshots ------------------------------------------------------
		{id: "H105", name: "w-snapshot-cap", input: "a workspace file over the job's snapshot cap (limits.max_snapshot_bytes 1024)",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"limits": {"max_snapshot_bytes": 1024}`),
			files:    map[string]string{"workspace/big.bin": strings.Repeat("x", 4096), "workspace/small.txt": "small"},
			want:     string(lifecycle.Success), check: func(t *testing.T, h *hostileRun, c *hostile) {
				m, err := h.store.Load(c.name)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(m.Run.SnapshotError, "big.bin is 4096 bytes, more than the 1024 left of the cap of 1024 bytes") {
					t.Errorf("%s: run.snapshot_error %q", c.id, m.Run.SnapshotError)
				}
				if !h.logged(c.name, "SNAPSHOT_FAILED") {
					t.Errorf("%s: SNAPSHOT_FAILED not logged", c.id)
				}
				ents, _ := os.ReadDir(filepath.Join(h.jobs, c.name, "snapshots", "objects"))
				for _, e := range ents {
					if fi, err := e.Info(); err == nil && fi.Size() > 1024 {
						t.Errorf("%s: an object of %d bytes was stored past the cap", c.id, fi.Size())
					}
				}
			}},

		// --- Files that are not files -----------------------------------------------
		{id: "H96", name: "f-fifo-manifest", input: "job.json is a FIFO (open() would block for ever)", fifos: []string{"job.json"},
			want: outInvalid, code: "not a regular file: it is a named pipe"},
		{id: "H97", name: "f-fifo-prompt", input: "the worker's prompt file is a FIFO",
			manifest: job(scriptW(`{"action": "COMPLETED", "summary": "x"}`), `"prompts": {"worker": "p.md"}`), fifos: []string{"p.md"},
			want: string(lifecycle.InterventionRequired), code: "AGENT_CONFIG", resp: "none", reason: "named pipe"},

		// --- Dropped while the daemon runs (the watcher's path) ----------------------
		{id: "H11", name: "late-types", late: true, input: "wrong types, dropped while running", manifest: job(scriptW(`{}`), `"limits": {"max_retries": "3"}`),
			want: outInvalid, code: "/limits/max_retries"},
		{id: "H98", name: "late-fifo", late: true, input: "job.json is a FIFO, dropped while running", fifos: []string{"job.json"},
			want: outInvalid, code: "named pipe"},
		{id: "H21", name: "late\x03ctl", late: true, input: "folder named with a control character, dropped while running", manifest: good,
			want: outInvalid, code: "is invalid"},
	}
}

// hostileRun is one daemon serving the catalogue's jobs.
type hostileRun struct {
	jobs, out string
	store     *jobstore.Store
	log       *syncBuffer
	before    map[string][]byte // file contents before the run, by job/file
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []map[string]any {
	s.mu.Lock()
	data := append([]byte(nil), s.b.Bytes()...)
	s.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(data, []byte("\n")) {
		var m map[string]any
		if json.Unmarshal(l, &m) == nil {
			out = append(out, m)
		}
	}
	return out
}

// logged reports whether the daemon logged error_code code for job id.
func (h *hostileRun) logged(id, code string) bool { return h.logLine(id, code, "") != nil }

func (h *hostileRun) loggedTransition(id, to string) bool {
	for _, l := range h.log.lines() {
		if l["job_id"] == id && l["type"] == "transition" && l["to"] == to {
			return true
		}
	}
	return false
}

func (h *hostileRun) logLine(id, code, msg string) map[string]any {
	for _, l := range h.log.lines() {
		if l["job_id"] == id && l["error_code"] == code && (msg == "" || l["msg"] == msg) {
			return l
		}
	}
	return nil
}

func (h *hostileRun) records(t *testing.T, c *hostile) []history.Record {
	t.Helper()
	recs, err := history.ReadAll(filepath.Join(h.jobs, c.name))
	if err != nil {
		t.Errorf("%s: read history: %v", c.id, err)
	}
	return recs
}

func (h *hostileRun) lastResponse(t *testing.T, c *hostile) *history.Response {
	t.Helper()
	var last *history.Response
	for _, r := range h.records(t, c) {
		if r.Type == history.TypeResponse {
			last = r.Response
		}
	}
	if last == nil {
		t.Fatalf("%s: no response recorded", c.id)
	}
	return last
}

func (h *hostileRun) responses(t *testing.T, c *hostile, n int) {
	t.Helper()
	got := 0
	for _, r := range h.records(t, c) {
		if r.Type == history.TypeResponse {
			got++
		}
	}
	if got != n {
		t.Errorf("%s: %d responses, want %d", c.id, got, n)
	}
}

// processGone waits for the process whose pid the agent wrote to be gone.
func (h *hostileRun) processGone(t *testing.T, c *hostile, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.jobs, c.name, jobstore.WorkspaceDir, pidFile))
	if err != nil {
		t.Errorf("%s: the agent did not write %s: %v", c.id, pidFile, err)
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		t.Errorf("%s: bad pid in %s: %q", c.id, pidFile, b)
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) || zombie(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Errorf("%s: process %d (%s) still runs", c.id, pid, pidFile)
}

// unchanged asserts the daemon left a job file as it was.
func (h *hostileRun) unchanged(t *testing.T, c *hostile, file string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.jobs, c.name, file))
	if err != nil || !bytes.Equal(b, h.before[c.name+"/"+file]) {
		t.Errorf("%s: %s was changed (or removed: %v); it must be left for a human to repair", c.id, file, err)
	}
}

// writeCase lays one case out under dir (the jobs folder, or a staging
// folder for late cases).
func (h *hostileRun) writeCase(t *testing.T, dir string, c *hostile) {
	t.Helper()
	if c.bare != "" {
		if err := os.WriteFile(filepath.Join(dir, c.bare), []byte(c.manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	jd := filepath.Join(dir, c.name)
	if target, ok := c.links["."]; ok {
		// The job folder itself is a link.
		real := strings.ReplaceAll(target, "$OUT", h.out)
		if err := os.MkdirAll(real, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(real, "job.json"), []byte(job(scriptW(`{"action": "COMPLETED", "summary": "done"}`))), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(real, jd); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := os.MkdirAll(jd, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range c.fifos {
		if err := syscall.Mkfifo(filepath.Join(jd, name), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Contains(c.fifos, "job.json") {
		if err := os.WriteFile(filepath.Join(jd, "job.json"), []byte(c.manifest), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	switch c.name {
	case "h-corrupt-middle", "h-torn-tail", "h-index-corrupt", "h-newer", "h-cut", "h-last-damaged":
		writeHistory(t, jd, c.name)
	}
	for name, content := range c.files {
		p := filepath.Join(jd, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range c.links {
		p := filepath.Join(jd, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(strings.ReplaceAll(target, "$OUT", h.out), p); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{history.FileName, history.IndexFile} {
		if b, err := os.ReadFile(filepath.Join(jd, f)); err == nil {
			h.before[c.name+"/"+f] = b
		}
	}
}

// writeHistory gives a job the history a daemon stopped in the middle of
// its first phase would have left, then damages it as the case says.
func writeHistory(t *testing.T, jobDir, kind string) {
	t.Helper()
	l, _, err := history.Open(jobDir)
	if err != nil {
		t.Fatal(err)
	}
	recs := []*history.Record{
		{Type: history.TypeTransition, Phase: "work", Transition: &history.Transition{From: "PENDING", To: "RUNNING", ToPhase: "work", Event: "start", Actor: "SYSTEM"}},
		{Type: history.TypeError, Phase: "work", Role: "SYSTEM", Error: &history.ErrorInfo{Code: "TEST", Message: "a record to damage"}},
		{Type: history.TypeError, Phase: "work", Role: "SYSTEM", Error: &history.ErrorInfo{Code: "TEST", Message: "a record after it"}},
	}
	for _, r := range recs {
		if err := l.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	p := history.Path(jobDir)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	switch kind {
	case "h-corrupt-middle":
		// Same length, newline kept: only the content of record 1 is gone.
		lines[1] = append(bytes.Repeat([]byte("X"), len(lines[1])-1), '\n')
	case "h-torn-tail":
		// The last record was cut half way by a crash, which leaves the
		// head at the record before it (it is written after the fsync).
		lines[2] = lines[2][:len(lines[2])/2]
		writeStaleHead(t, jobDir, lines[1])
	case "h-cut":
		lines = lines[:2]
	case "h-last-damaged":
		lines[2] = append(bytes.Repeat([]byte("X"), len(lines[2])-1), '\n')
	case "h-newer":
		lines = append(lines, []byte(`{"hash":"00","rec":{"v":3,"seq":3,"type":"quantum"}}`+"\n"))
	}
	if err := os.WriteFile(p, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeStaleHead sets the history's head at the record stored as line.
func writeStaleHead(t *testing.T, jobDir string, line []byte) {
	t.Helper()
	e, err := history.ParseLine(line)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(history.Head{Seq: e.Seq, Hash: e.Hash})
	if err := os.WriteFile(filepath.Join(jobDir, history.HeadFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHostileInputs(t *testing.T) {
	cases := hostileCases()
	h := &hostileRun{jobs: filepath.Join(t.TempDir(), "jobs"), out: t.TempDir(), log: &syncBuffer{}, before: map[string][]byte{}}
	h.store = jobstore.New(h.jobs)
	if err := os.MkdirAll(h.jobs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.out, "secret"), []byte("outside the job folder"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(h.out, "ws-target"), 0o700); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i := range cases {
		c := &cases[i]
		if seen[c.id] || seen[c.name] {
			t.Fatalf("duplicate case %s / %s", c.id, c.name)
		}
		seen[c.id], seen[c.name] = true, true
		if !c.late {
			h.writeCase(t, h.jobs, c)
		}
	}
	goodJob := job(scriptW(`{"action": "COMPLETED", "summary": "done"}`))
	for _, g := range []string{"good", "good-2"} {
		h.writeCase(t, h.jobs, &hostile{name: g, manifest: goodJob})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewJSONHandler(h.log, nil))
	done := make(chan error, 1)
	go func() {
		done <- daemon.Run(ctx, daemon.Options{JobsDir: h.jobs, MaxParallel: 8, Grace: 2 * time.Second}, logger)
	}()

	// Once a good job is through, drop the late cases (watcher path) and a
	// last good job behind them.
	h.waitStatus(t, "good", lifecycle.Success, 30*time.Second)
	stage := filepath.Join(filepath.Dir(h.jobs), "stage")
	for i := range cases {
		if c := &cases[i]; c.late {
			if err := os.MkdirAll(stage, 0o700); err != nil {
				t.Fatal(err)
			}
			h.writeCase(t, stage, c)
			if err := os.Rename(filepath.Join(stage, c.name), filepath.Join(h.jobs, c.name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	h.writeCase(t, stage, &hostile{name: "good-late", manifest: goodJob})
	if err := os.Rename(filepath.Join(stage, "good-late"), filepath.Join(h.jobs, "good-late")); err != nil {
		t.Fatal(err)
	}

	// Every case settles into its outcome (a safety net: the loop ends as
	// soon as they have; a loaded CI machine needed more than 45 s for
	// the 100,000-path answer).
	deadline := time.Now().Add(3 * time.Minute)
	pending := map[string]*hostile{}
	for i := range cases {
		pending[cases[i].id] = &cases[i]
	}
	for len(pending) > 0 && time.Now().Before(deadline) {
		for id, c := range pending {
			if h.settled(c) {
				delete(pending, id)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range pending {
		t.Errorf("%s (%s, %s): did not reach %s %s; now: %s", c.id, printable(c.name), c.input, c.want, c.code, h.describe(c))
	}
	for _, g := range []string{"good", "good-2", "good-late"} {
		h.waitStatus(t, g, lifecycle.Success, 10*time.Second)
	}

	for i := range cases {
		c := &cases[i]
		if pending[c.id] != nil {
			continue
		}
		t.Run(c.id+"_"+printable(c.name), func(t *testing.T) { h.assert(t, c) })
	}

	// Nothing outside the jobs folder was touched but the link targets.
	ents, _ := os.ReadDir(h.out)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, ",") != "linked-job,secret,ws-target" {
		t.Errorf("folder outside the jobs folder now holds %v", names)
	}
	if b, _ := os.ReadFile(filepath.Join(h.out, "secret")); string(b) != "outside the job folder" {
		t.Errorf("the file outside was changed")
	}

	// The daemon kept running through all of it and stops cleanly.
	select {
	case err := <-done:
		t.Fatalf("daemon stopped by itself: %v", err)
	default:
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("daemon: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not stop")
	}
}

func printable(s string) string { return strings.Trim(strconv.QuoteToASCII(s), `"`) }

func (h *hostileRun) waitStatus(t *testing.T, id string, want lifecycle.Status, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if m, err := h.store.Load(id); err == nil && m.Status == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	m, err := h.store.Load(id)
	t.Fatalf("job %s: not %s after %s (%v, %v)", id, want, d, m, err)
}

func (h *hostileRun) settled(c *hostile) bool {
	switch c.want {
	case outIgnored:
		return true
	case outInvalid:
		return h.logged(c.name, "MANIFEST_INVALID")
	case outUnplaced:
		return h.logged(c.bare, "MANIFEST_INVALID")
	case outRefused:
		return h.logLine(c.name, c.code, "job run failed") != nil
	}
	m, err := h.store.Load(c.name)
	return err == nil && string(m.Status) == c.want
}

func (h *hostileRun) describe(c *hostile) string {
	m, err := h.store.Load(c.name)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%s (%s: %s)", m.Status, m.Run.ErrorCode, m.Run.Reason)
}

// assert checks a settled case in detail.
func (h *hostileRun) assert(t *testing.T, c *hostile) {
	jd := filepath.Join(h.jobs, c.name)
	switch c.want {
	case outInvalid, outUnplaced:
		key := c.name
		if c.want == outUnplaced {
			key = c.bare
		}
		l := h.logLine(key, "MANIFEST_INVALID", "")
		if msg, _ := l["err"].(string); !strings.Contains(msg, c.code) {
			t.Errorf("%s: logged error %q does not say %q", c.id, msg, c.code)
		}
		// Listed as invalid with the same reason (what logist list shows).
		entries, err := h.store.List()
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range entries {
			if c.want == outUnplaced && e.Unplaced != "" && filepath.Base(e.Unplaced) == c.bare {
				// Still a bare file (its content may be a fine manifest:
				// what is refused is where it would go).
				found = true
				continue
			}
			if e.ID == c.name && e.Unplaced == "" {
				found = true
				if e.Err == nil || !strings.Contains(e.Err.Error(), c.code) {
					t.Errorf("%s: listed with error %v, want %q", c.id, e.Err, c.code)
				}
			}
		}
		if !found {
			t.Errorf("%s: not listed", c.id)
		}
		if c.want == outUnplaced {
			if _, err := os.Stat(filepath.Join(h.jobs, c.bare)); err != nil {
				t.Errorf("%s: the refused bare manifest was moved or removed: %v", c.id, err)
			}
			if _, err := os.Lstat(jd); err == nil {
				t.Errorf("%s: a job folder was made for it", c.id)
			}
		} else {
			for _, f := range []string{history.FileName, jobstore.WorkspaceDir} {
				if _, err := os.Stat(filepath.Join(jd, f)); err == nil {
					t.Errorf("%s: an invalid job was run (%s exists)", c.id, f)
				}
			}
		}
	case outRefused:
		l := h.logLine(c.name, c.code, "job run failed")
		if msg, _ := l["err"].(string); !strings.Contains(msg, c.reason) {
			t.Errorf("%s: logged error %q does not say %q", c.id, msg, c.reason)
		}
		m, err := h.store.Load(c.name)
		if err != nil || string(m.Status) != c.stays {
			t.Errorf("%s: manifest %v (%v), want it still %s", c.id, m, err, c.stays)
		}
		// Noted for logist status, which shows it as Refused: the
		// manifest alone says RUNNING and nothing more.
		if st, ok := h.store.ReadStall(c.name); !ok || !st.Refused || st.Code != c.code || !strings.Contains(st.Reason, c.reason) {
			t.Errorf("%s: refusal note %+v (%v), want %s refused saying %q", c.id, st, ok, c.code, c.reason)
		}
	case outIgnored:
	default:
		m, err := h.store.Load(c.name)
		if err != nil {
			t.Fatal(err)
		}
		if m.Run.ErrorCode != c.code {
			t.Errorf("%s: run.error_code %q, want %q", c.id, m.Run.ErrorCode, c.code)
		}
		if !strings.Contains(m.Run.Reason, c.reason) {
			t.Errorf("%s: run.reason %q, want it to contain %q", c.id, m.Run.Reason, c.reason)
		}
		if lifecycle.Status(c.want).Waiting() {
			if m.Run.Reason == "" {
				t.Errorf("%s: stopped without a reason", c.id)
			}
			if !h.loggedTransition(c.name, c.want) {
				t.Errorf("%s: the transition to %s was not logged", c.id, c.want)
			}
		}
		recs := h.records(t, c)
		var last *history.Record
		intents := 0
		for i := range recs {
			switch recs[i].Type {
			case history.TypeResponse:
				last = &recs[i]
			case history.TypeIntent:
				intents++
			}
		}
		switch c.resp {
		case "":
		case "none":
			if last != nil || intents > 0 {
				t.Errorf("%s: an agent was called (%d intents)", c.id, intents)
			}
		default:
			if last == nil {
				t.Fatalf("%s: no response recorded", c.id)
			}
			if last.Response.ErrorCode != c.resp {
				t.Errorf("%s: last response error_code %q, want %q", c.id, last.Response.ErrorCode, c.resp)
			}
		}
	}
	if c.check != nil {
		c.check(t, h, c)
	}
}
