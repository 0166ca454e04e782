package history

import (
	"encoding/json"
	"slices"
)

// Clone returns a copy of r whose text fields can be changed without
// changing r (the payload structs are copied; maps and slices that Text or
// Content rewrite are copied too). An empty list stays empty, not nil.
func (r Record) Clone() Record {
	c := r
	if r.Request != nil {
		q := *r.Request
		q.FilesContext = slices.Clone(r.Request.FilesContext)
		q.Metadata = copyMap(r.Request.Metadata)
		c.Request = &q
	}
	if r.Response != nil {
		p := *r.Response
		p.EvidenceFiles = slices.Clone(r.Response.EvidenceFiles)
		p.Warnings = slices.Clone(r.Response.Warnings)
		p.Violations = slices.Clone(r.Response.Violations)
		c.Response = &p
	}
	if r.Transition != nil {
		t := *r.Transition
		c.Transition = &t
	}
	if r.Steward != nil {
		s := *r.Steward
		s.Changes = copyMap(r.Steward.Changes)
		c.Steward = &s
	}
	if r.RecoveryPoint != nil {
		p := *r.RecoveryPoint
		p.Metadata = copyMap(r.RecoveryPoint.Metadata)
		c.RecoveryPoint = &p
	}
	if r.Error != nil {
		e := *r.Error
		c.Error = &e
	}
	if r.Message != nil {
		c.Message = append(json.RawMessage(nil), r.Message...)
	}
	if r.Event != nil {
		e := *r.Event
		e.Body = copyMap(r.Event.Body)
		c.Event = &e
	}
	return c
}

func copyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// Text applies f to every free-text field: what an agent, a steward or an
// error message wrote. Redaction of secrets uses it.
func (r *Record) Text(f func(string) string) {
	r.Content(f)
	if q := r.Request; q != nil {
		for k, v := range q.Metadata {
			if s, ok := v.(string); ok {
				q.Metadata[k] = f(s)
			}
		}
	}
	if p := r.Response; p != nil {
		p.Error = f(p.Error)
		for i := range p.Warnings {
			p.Warnings[i] = f(p.Warnings[i])
		}
		for i := range p.Violations {
			// The path as the (redacted) raw answer names it.
			p.Violations[i].Detail, p.Violations[i].Path = f(p.Violations[i].Detail), f(p.Violations[i].Path)
		}
	}
	if t := r.Transition; t != nil {
		t.Reason = f(t.Reason)
	}
	if s := r.Steward; s != nil {
		s.Reason = f(s.Reason)
	}
	if e := r.Error; e != nil {
		e.Message = f(e.Message)
	}
}

// Content applies f to the prompt and answer content: what encryption at
// rest protects. Structure (statuses, actions, codes, evidence paths,
// costs) stays readable so the history can be verified and replayed.
func (r *Record) Content(f func(string) string) {
	if q := r.Request; q != nil {
		q.Prompt, q.SystemPrompt, q.TaskDescription = f(q.Prompt), f(q.SystemPrompt), f(q.TaskDescription)
	}
	if p := r.Response; p != nil {
		p.RawResponse, p.Summary, p.Stderr, p.Stdout = f(p.RawResponse), f(p.Summary), f(p.Stderr), f(p.Stdout)
	}
	if s := r.Steward; s != nil {
		s.Guidance = f(s.Guidance)
	}
	if p := r.RecoveryPoint; p != nil {
		p.Description = f(p.Description)
		if s, ok := p.Metadata["summary"].(string); ok {
			p.Metadata["summary"] = f(s)
		}
	}
}
