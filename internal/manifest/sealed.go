package manifest

// MapAgentText replaces every field of the manifest that holds text an
// agent or a steward gave (run.reason, run.last_summary,
// run.previous_summary, run.feedback, run.guidance, the audit trail's
// notes) with f of it. encrypt_history seals them with it before the file
// is written and opens them after it is read (internal/jobtx), so that
// job.json holds none of a sealed job's content; this list is the one
// place that says which fields those are. The task, the agents' settings
// and the prompts' files are the steward's own input and stay as written.
func (m *Manifest) MapAgentText(f func(string) string) {
	for _, p := range []*string{&m.Run.Reason, &m.Run.LastSummary, &m.Run.PreviousSummary, &m.Run.Feedback, &m.Run.Guidance} {
		if *p != "" {
			*p = f(*p)
		}
	}
	for i := range m.History {
		if m.History[i].Note != "" {
			m.History[i].Note = f(m.History[i].Note)
		}
	}
}
