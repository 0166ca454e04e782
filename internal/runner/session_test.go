package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/testkit"
)

// presetAgent is an agent config naming a preset; the fake provider stands
// in for the program.
func presetAgent(session string) map[string]any {
	c := map[string]any{"preset": "claude-code"}
	if session != "" {
		c["session"] = session
	}
	return map[string]any{"provider": "command", "command": c}
}

// sessionRun runs a supervised job whose supervisor sends the work back
// once, and returns the resume_session each call was given per role.
func sessionRun(t *testing.T, session string) (map[string][]string, *fixture) {
	f := newFixture(t)
	f.WriteJob("j", map[string]any{"agents": map[string]any{"worker": presetAgent(session), "supervisor": presetAgent(session)}})
	var mu sync.Mutex
	resumes := map[string][]string{}
	n := map[string]int{}
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		s, _ := req.Metadata[agent.MetaResumeSession].(string)
		resumes[req.Role] = append(resumes[req.Role], s)
		n[req.Role]++
		action := "COMPLETED"
		if req.Role == "supervisor" && n[req.Role] == 1 {
			action = "RETRY"
		}
		res := answer(action, "turn")
		res.SessionID = fmt.Sprintf("%s-session-%d", req.Role, n[req.Role])
		return res, nil
	})
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status = %s (%s)", m.Status, m.Run.Reason)
	}
	return resumes, f
}

func TestRetryContinuesTheAgentSession(t *testing.T) {
	t.Parallel()
	resumes, f := sessionRun(t, "")
	// The worker's second turn (work sent back) continues its first
	// session; the supervisor's second review continues its own.
	if got := fmt.Sprint(resumes["worker"]); got != "[ worker-session-1]" {
		t.Errorf("worker resumes = %s", got)
	}
	if got := fmt.Sprint(resumes["supervisor"]); got != "[ supervisor-session-1]" {
		t.Errorf("supervisor resumes = %s", got)
	}
	// The session asked for is part of the stored request (a re-attempt
	// after a crash continues the same session).
	var stored []string
	for _, r := range testkit.OfType(f.Records("j"), history.TypeIntent) {
		b, _ := json.Marshal(r.Request.Metadata[agent.MetaResumeSession])
		stored = append(stored, r.Role+":"+string(b))
	}
	if got := fmt.Sprint(stored); got != `[worker:null supervisor:null worker:"worker-session-1" supervisor:"supervisor-session-1"]` {
		t.Errorf("stored requests = %s", got)
	}
}

func TestFreshSessionNeverResumes(t *testing.T) {
	t.Parallel()
	resumes, _ := sessionRun(t, "fresh")
	if got := fmt.Sprint(resumes["worker"], resumes["supervisor"]); got != "[ ] [ ]" {
		t.Errorf("resumes with session fresh = %s", got)
	}
}
