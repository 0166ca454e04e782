package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/pathguard"
)

// Script is the built-in deterministic agent: the n-th call of a role plays
// the n-th step of its script (the last step repeats). Steps can write
// files, cost money, take time, answer raw bytes or fail like an API.
type Script struct {
	Steps []manifest.ScriptStep
}

// Call plays the step for req.CallIndex.
func (s *Script) Call(ctx context.Context, req *Request) (*Result, error) {
	if len(s.Steps) == 0 {
		return nil, &Error{Code: codes.AgentConfig, Msg: "script has no steps"}
	}
	st := s.Steps[min(req.CallIndex, len(s.Steps)-1)]
	if st.DelayMS > 0 {
		t := time.NewTimer(manifest.Duration(float64(st.DelayMS), time.Millisecond))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if st.Error == "api" {
		return nil, &Error{Code: codes.APIError, Transient: true, Msg: "scripted API error (HTTP 503)", CostUSD: st.CostUSD}
	}
	for name, content := range st.Files {
		p, _, err := pathguard.Resolve(req.Workspace, name)
		if err != nil {
			return nil, &Error{Code: codes.AgentConfig, Msg: fmt.Sprintf("script file: %v", err)}
		}
		// A new file renamed over whatever is at its name (the workspace
		// is the other agents' too: a named pipe there is not opened).
		if err := writeInHome(filepath.Dir(p), p, []byte(content)); err != nil {
			return nil, &Error{Code: codes.AgentConfig, Msg: err.Error()}
		}
	}
	res := &Result{CostUSD: st.CostUSD}
	if st.Raw != nil {
		res.Raw = []byte(*st.Raw)
		return res, nil
	}
	ev := st.EvidenceFiles
	if ev == nil {
		ev = []string{}
	}
	ans := map[string]any{}
	for k, v := range st.Fields {
		ans[k] = v
	}
	ans["action"], ans["evidence_files"], ans["summary_for_supervisor"] = st.Action, ev, st.Summary
	res.Raw, _ = json.Marshal(ans)
	return res, nil
}
