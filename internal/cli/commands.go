package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/steward"
)

func oneJob(args []string) (string, error) {
	if len(args) != 1 {
		return "", usagef("expected one JOB argument, got %d", len(args))
	}
	if err := manifest.ValidID(args[0]); err != nil {
		return "", usagef("%v", err)
	}
	return args[0], nil
}

func dollars(cents float64) string { return fmt.Sprintf("$%.2f", cents/100) }

func costText(m *manifest.Manifest) string {
	s := dollars(m.Metrics.CumulativeCost)
	if m.CostThreshold != nil {
		s += " of " + dollars(*m.CostThreshold)
	}
	return s
}

func timeText(m *manifest.Manifest) string {
	s := fmt.Sprintf("%.3fs", m.Metrics.CumulativeTimeSeconds)
	if m.TimeThresholdMinutes != nil {
		s += " of " + (time.Duration(*m.TimeThresholdMinutes * float64(time.Minute))).String()
	}
	return s
}

var cmdSubmit = &command{
	name: "submit", args: "FILE", summary: "validate a manifest and place it in the jobs folder as a new job; prints the job id",
	example: "  logist submit my-job.json\n  logist submit --jobs-dir /srv/jobs job.json --format json\n",
	run: func(e *env, args []string) (*Result, error) {
		if len(args) != 1 {
			return nil, usagef("expected one FILE argument")
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		id, m, err := st.Submit(args[0])
		if err != nil {
			return nil, err
		}
		r := &Result{Message: fmt.Sprintf("Job %s submitted", id), Fields: []Field{
			{"job_id", "Job", id}, {"status", "Status", string(m.Status)}, {"path", "Folder", e.store.JobDir(id)},
		}}
		if e.format == "text" {
			r.Text = id + "\n"
		}
		return r, nil
	},
}

var cmdList = &command{
	name: "list", args: "", summary: "list jobs with status, phase, cost and time (invalid manifests too)",
	example: "  logist list\n  logist list --jobs-dir /srv/jobs --format json\n",
	run: func(e *env, args []string) (*Result, error) {
		if len(args) != 0 {
			return nil, usagef("list takes no arguments")
		}
		// Summaries: the columns below are all a Summary holds.
		entries, err := e.store.ListSummaries(true)
		if err != nil {
			return nil, err
		}
		r := &Result{Columns: []string{"JOB", "STATUS", "PHASE", "COST", "TIME", "NOTE"}}
		items := []map[string]any{}
		for _, en := range entries {
			item := map[string]any{"job_id": en.ID}
			if en.Err != nil {
				// The folder already names the job; keep the note to the point.
				note := strings.ReplaceAll(en.Err.Error(), filepath.Join(e.store.Dir, en.ID, jobstore.ManifestFile)+": ", "")
				if en.Unplaced != "" {
					note = strings.ReplaceAll(note, en.Unplaced+": ", "")
				}
				status := "INVALID"
				if en.Unplaced != "" {
					status = "INVALID (unplaced)"
				}
				r.Rows = append(r.Rows, []string{en.ID, status, "-", "-", "-", firstLine(note, 120)})
				item["status"], item["error"] = "INVALID", note
				items = append(items, item)
				continue
			}
			m := en.Manifest
			note := m.Run.Reason
			if en.Unplaced != "" {
				note = "not yet placed by logistd: " + filepath.Base(en.Unplaced)
			}
			status := string(m.Status)
			if m.Schedule != nil {
				// A template never runs itself: show what it does instead.
				status = "SCHEDULE"
				note = "cron " + m.Schedule.Cron
				if spec, err := m.Schedule.Spec(); err == nil && !m.Schedule.Suspend {
					note += ", next " + spec.Next(time.Now()).UTC().Format(time.RFC3339)
				}
				item["schedule"] = m.Schedule
			}
			r.Rows = append(r.Rows, []string{en.ID, status, orDash(m.Phase()), costText(m), timeText(m), firstLine(note, 100)})
			item["status"], item["current_phase"], item["metrics"] = m.Status, m.CurrentPhase, m.Metrics
			item["cost_threshold"], item["time_threshold_minutes"], item["reason"] = m.CostThreshold, m.TimeThresholdMinutes, m.Run.Reason
			items = append(items, item)
		}
		r.Items = items
		r.Message = fmt.Sprintf("%d jobs in %s", len(entries), e.store.Dir)
		if e.format == "text" {
			r.Message = ""
		}
		return r, nil
	},
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func firstLine(s string, n int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len([]rune(s)) > n {
		s = string([]rune(s)[:n]) + "…"
	}
	return s
}

var cmdStatus = &command{
	name: "status", args: "JOB", summary: "show a job: status, phase, budgets, why it stopped and what to do next",
	example: "  logist status fix-login\n  logist status fix-login --format json\n",
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		m, err := e.store.Load(id)
		if err != nil {
			if errors.Is(err, jobstore.ErrNotFound) {
				return nil, err
			}
			// Invalid manifest: show why, as status INVALID.
			return &Result{Message: fmt.Sprintf("Job %s has an invalid manifest", id), Fields: []Field{
				{"job_id", "Job", id}, {"status", "Status", "INVALID"}, {"error", "Error", err.Error()},
				{"next", "Next", "fix " + filepath.Join(e.store.JobDir(id), jobstore.ManifestFile) + "; logistd picks it up when saved"},
			}}, nil
		}
		wfName := manifest.DefaultWorkflow
		if wf, err := m.ResolveWorkflow(); err == nil {
			wfName = wf.Name
		}
		daemon := "not running"
		if pid := e.store.DaemonPID(); pid > 0 {
			daemon = fmt.Sprintf("running (pid %d)", pid)
		}
		r := &Result{Message: fmt.Sprintf("Job %s is %s", id, m.Status), Fields: []Field{
			{"job_id", "Job", id},
			{"status", "Status", string(m.Status)},
			{"current_phase", "Phase", m.Phase()},
			{"workflow", "Workflow", wfName},
			{"workflow_state", "Workflow state", orDash(m.Run.WorkflowState)},
			{"description", "Description", m.Description},
			{"cost", "Cost", costText(m)},
			{"time", "Time", timeText(m)},
			{"agent_calls", "Agent calls", m.Metrics.AgentCalls},
			{"reason", "Reason", m.Run.Reason},
			{"error_code", "Error code", m.Run.ErrorCode},
			{"last_summary", "Last summary", m.Run.LastSummary},
			{"guidance", "Pending guidance", m.Run.Guidance},
			{"checkpoint_id", "Checkpoint", m.Run.CheckpointID},
			{"updated_at", "Updated", m.Run.UpdatedAt},
			{"daemon", "Daemon", daemon},
			{"next", "Next", steward.HintFor(m, id)},
		}}
		if e.format == "json" {
			r.JSON = map[string]any{"status": "success", "job": m, "workflow": wfName, "daemon": daemon, "next": steward.HintFor(m, id)}
		}
		return r, nil
	},
}

var cmdHistory = &command{
	name: "history", args: "JOB [--seq N]", summary: "show a job's interactions, steward actions and recovery points (--format json: jobHistory.json)",
	example: "  logist history fix-login\n  logist history fix-login --seq 12\n  logist history fix-login --format json > jobHistory.json\n",
	flags: func(fs *pflag.FlagSet) {
		fs.Int64("seq", 0, "show only record N (found through the archive index, decompressing at most one archive)")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		dir := e.store.JobDir(id)
		if _, err := os.Stat(filepath.Join(dir, jobstore.ManifestFile)); err != nil {
			return nil, fmt.Errorf("job %s: %w", id, jobstore.ErrNotFound)
		}
		if e.fs.Changed("seq") {
			seq, _ := e.fs.GetInt64("seq")
			en, err := history.ReadSeq(dir, seq)
			if err != nil {
				if errors.Is(err, history.ErrNoRecord) {
					return nil, fmt.Errorf("job %s: %v: %w", id, err, jobstore.ErrNotFound)
				}
				return nil, err
			}
			if reveal := e.revealer(id); reveal != nil {
				reveal(&en.Record)
			}
			b, _ := json.MarshalIndent(en.Record, "", "  ")
			return &Result{JSON: en.Record, Text: string(b) + "\n", Message: fmt.Sprintf("Record %d of job %s", seq, id),
				Fields: []Field{{"record", "Record", string(b)}}}, nil
		}
		recs, err := history.ReadAll(dir)
		if err != nil {
			return nil, err
		}
		if reveal := e.revealer(id); reveal != nil {
			for i := range recs {
				reveal(&recs[i])
			}
		}
		created := ""
		if m, err := e.store.Load(id); err == nil {
			created = m.CreatedAt
		}
		h := history.Materialise(id, created, e.store.Workspace(id), recs)
		r := &Result{JSON: h, Message: fmt.Sprintf("%d interactions, %d recovery points", len(h.Interactions), len(h.RecoveryPoints)),
			Columns: []string{"SEQ", "TIME", "ROLE", "PHASE", "STATUS", "ACTION", "COST", "SECONDS", "SUMMARY / ERROR"}}
		for _, in := range h.Interactions {
			row := []string{fmt.Sprint(in.Sequence), shortTime(in.Timestamp), in.Role, orDash(in.Phase), "IN FLIGHT", "-", "-", "-", firstLine(in.Request.Prompt, 60)}
			if in.Response != nil {
				rs := in.Response
				note := rs.Summary
				if rs.ErrorCode != "" {
					note = rs.ErrorCode + ": " + rs.Error
				}
				row = []string{fmt.Sprint(in.Sequence), shortTime(in.Timestamp), in.Role, orDash(in.Phase), rs.Status, orDash(rs.Action),
					fmt.Sprintf("$%.4f", rs.CostUSD), fmt.Sprintf("%.2f", rs.ExecutionTimeSeconds), firstLine(note, 80)}
			}
			r.Rows = append(r.Rows, row)
		}
		for _, ev := range h.ProtocolEvents {
			what := ev.Subject
			if what == "" {
				what = "-"
			}
			if ev.Sig != "" {
				what += " (signed " + ev.KeyID + ")"
			}
			r.Rows = append(r.Rows, []string{"ev", shortTime(ev.Timestamp), ev.Role, orDash(ev.Phase), "EVENT", ev.Type, "", "", firstLine(what, 80)})
		}
		if len(h.ProtocolEvents) > 0 {
			r.Message += fmt.Sprintf(", %d protocol events", len(h.ProtocolEvents))
		}
		// A deliberation's ledger messages.
		msgs := 0
		for _, rec := range recs {
			if rec.Type != history.TypeMessage {
				continue
			}
			var m struct {
				ID       string         `json:"id"`
				Type     string         `json:"type"`
				From     string         `json:"from"`
				Content  map[string]any `json:"content"`
				Audience []string       `json:"audience"`
			}
			if json.Unmarshal(rec.Message, &m) != nil {
				continue
			}
			msgs++
			note, _ := m.Content["text"].(string)
			if note == "" {
				b, _ := json.Marshal(m.Content)
				note = string(b)
			}
			if len(m.Audience) > 0 {
				note = fmt.Sprintf("(private to %s) %s", strings.Join(m.Audience, ", "), note)
			}
			r.Rows = append(r.Rows, []string{"msg", shortTime(rec.Time), m.From, orDash(rec.Phase), m.Type, m.ID, "", "", firstLine(note, 80)})
		}
		if msgs > 0 {
			r.Message += fmt.Sprintf(", %d ledger messages", msgs)
		}
		for _, cp := range h.RecoveryPoints {
			r.Rows = append(r.Rows, []string{"cp", "", "", cp.ResumePhase, "CHECKPOINT", cp.CheckpointID, "", "", firstLine(cp.Description, 80)})
		}
		return r, nil
	},
}

func shortTime(ts string) string {
	t, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return ts
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

var cmdResume = &command{
	name: "resume", args: "JOB [--guidance TEXT] [--cost-threshold CENTS] [--time-threshold-minutes M]",
	summary: "continue a job in INTERVENTION_REQUIRED, HALTED_COST or HALTED_TIME at the phase where it stopped",
	example: "  logist resume fix-login --guidance 'use the staging database'\n  logist resume big-refactor --cost-threshold 5000\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("guidance", "", "guidance for the next agent (part of its prompt, recorded in history)")
		fs.Float64("cost-threshold", 0, "new cost budget in cents")
		fs.Float64("time-threshold-minutes", 0, "new time budget in minutes")
	},
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		var o steward.ResumeOptions
		o.Guidance, _ = e.fs.GetString("guidance")
		resumeCost, _ := e.fs.GetFloat64("cost-threshold")
		resumeTime, _ := e.fs.GetFloat64("time-threshold-minutes")
		if e.fs.Changed("cost-threshold") {
			if resumeCost < 0 {
				return nil, usagef("--cost-threshold must be at least 0")
			}
			v := resumeCost
			o.CostThreshold = &v
		}
		if e.fs.Changed("time-threshold-minutes") {
			if resumeTime <= 0 {
				return nil, usagef("--time-threshold-minutes must be more than 0")
			}
			v := resumeTime
			o.TimeThresholdMinutes = &v
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Resume(id, o)
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Job %s resumed at phase %s", id, orDash(m.Phase()))), nil
	},
}

func changed(e *env, m *manifest.Manifest, msg string) *Result {
	note := ""
	if e.store.DaemonPID() == 0 && m.Status.Active() {
		note = "logistd is not running on this folder; the job continues when it starts"
	}
	return &Result{Message: msg, Fields: []Field{
		{"job_id", "Job", m.JobID}, {"status", "Status", string(m.Status)}, {"current_phase", "Phase", m.Phase()}, {"note", "Note", note},
	}}
}

var cmdHalt = &command{
	name: "halt", args: "JOB [--reason TEXT]", summary: "cancel a job (CANCELED); an agent call in flight is killed",
	example: "  logist halt fix-login --reason 'wrong approach'\n",
	flags:   func(fs *pflag.FlagSet) { fs.String("reason", "", "why, recorded in history") },
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		reason, _ := e.fs.GetString("reason")
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Halt(id, reason)
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Job %s halted", id)), nil
	},
}

var cmdActivate = &command{
	name: "activate", args: "JOB", summary: "move a DRAFT job to PENDING so logistd runs it",
	example: "  logist submit draft.json   # a manifest with \"status\": \"DRAFT\"\n  logist activate draft\n",
	run: func(e *env, args []string) (*Result, error) {
		id, err := oneJob(args)
		if err != nil {
			return nil, err
		}
		st, err := e.steward()
		if err != nil {
			return nil, err
		}
		m, err := st.Activate(id)
		if err != nil {
			return nil, err
		}
		return changed(e, m, fmt.Sprintf("Job %s activated", id)), nil
	},
}

// validationFailed carries per-file results of a failed validate.
type validationFailed struct{ n int }

func (v *validationFailed) Error() string { return fmt.Sprintf("%d file(s) invalid", v.n) }

var cmdValidate = &command{
	name: "validate", args: "FILE...", summary: "check manifests or agent answers against the schemas, with clear errors",
	example: "  logist validate jobs/*/job.json\n  logist validate --kind response answer.json --workspace jobs/x/workspace\n",
	flags: func(fs *pflag.FlagSet) {
		fs.String("kind", "auto", "auto, manifest or response")
		fs.String("workspace", "", "for responses: workspace to resolve evidence files in (default: the file's folder)")
	},
	run: func(e *env, args []string) (*Result, error) {
		if len(args) == 0 {
			return nil, usagef("expected at least one FILE")
		}
		validateKind, _ := e.fs.GetString("kind")
		validateWorkspace, _ := e.fs.GetString("workspace")
		switch validateKind {
		case "auto", "manifest", "response":
		default:
			return nil, usagef("--kind %q: use auto, manifest or response", validateKind)
		}
		r := &Result{Columns: []string{"FILE", "KIND", "RESULT"}}
		items := []map[string]any{}
		bad := 0
		for _, f := range args {
			kind, errs, warns := validateFile(f, validateKind, validateWorkspace)
			res := "ok"
			if len(errs) > 0 {
				bad++
				res = "INVALID: " + strings.Join(errs, "; ")
			} else if len(warns) > 0 {
				res = "ok (warning: " + strings.Join(warns, "; ") + ")"
			}
			r.Rows = append(r.Rows, []string{f, kind, res})
			items = append(items, map[string]any{"file": f, "kind": kind, "valid": len(errs) == 0, "errors": errs, "warnings": warns})
		}
		r.Items = items
		if bad > 0 {
			render(e.stdout, e.format, r)
			return nil, &validationFailed{bad}
		}
		return r, nil
	},
}

func validateFile(f, kind, ws string) (string, []string, []string) {
	data, err := os.ReadFile(f)
	if err != nil {
		return kind, []string{err.Error()}, nil
	}
	if kind == "auto" {
		kind = "manifest"
		var probe map[string]json.RawMessage
		if json.Unmarshal(data, &probe) == nil {
			if _, ok := probe["action"]; ok {
				kind = "response"
			}
		} else if _, err := response.Extract(data); err == nil {
			kind = "response"
		}
	}
	if kind == "response" {
		if ws == "" {
			ws = filepath.Dir(f)
		}
		v := response.Judge(data, response.Contract{Workspace: response.Dir(ws)})
		var ws2 []string
		for _, w := range v.Warnings {
			ws2 = append(ws2, w.Detail)
		}
		if v.Err != nil {
			return kind, []string{f + ": " + v.Err.Error()}, ws2
		}
		return kind, nil, ws2
	}
	if _, err := manifest.Decode(f, data); err != nil {
		var es manifest.Errors
		if errors.As(err, &es) {
			out := make([]string, len(es))
			for i, x := range es {
				out[i] = x.Error()
			}
			return kind, out, nil
		}
		return kind, []string{err.Error()}, nil
	}
	return kind, nil, nil
}
