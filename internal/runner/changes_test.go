package runner

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/snapshot"
	"github.com/logist/logist/internal/testkit"
)

// changingAgent plays a supervised job whose worker changes files it does
// not all declare: call 1 adds a.txt (declared) and b.txt (not); the
// supervisor sends the work back; call 2 rewrites a.txt, deletes b.txt and
// adds dir/c.txt, declaring only dir/; the supervisor approves.
func changingAgent(t *testing.T, f *fixture) {
	var mu sync.Mutex
	calls := map[string]int{}
	write := func(ws, name, content string) {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Error(err)
		}
	}
	f.fake(func(ctx context.Context, req *agent.Request) (*agent.Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[req.Role]++
		n := calls[req.Role]
		switch {
		case req.Role == "worker" && n == 1:
			write(req.Workspace, "a.txt", "A")
			write(req.Workspace, "b.txt", "B")
			return answer("COMPLETED", "first", "a.txt"), nil
		case req.Role == "worker":
			write(req.Workspace, "a.txt", "A, longer")
			if err := os.Remove(filepath.Join(req.Workspace, "b.txt")); err != nil {
				return nil, err // the engine's goroutine: the test sees the failed call
			}
			write(req.Workspace, "dir/c.txt", "C")
			return answer("COMPLETED", "second", "dir/"), nil
		case n == 1:
			return answer("RETRY", "redo it"), nil
		}
		return answer("COMPLETED", "fine"), nil
	})
}

// Issue 17 item 7: what each call changed in the workspace is recorded
// with its response, an accepted answer that changed files it did not list
// as evidence gets a warning (recorded and logged), and each recovery
// point lists the files changed since the previous one, which are its
// rollback_files (the evidence is kept apart).
func TestWorkspaceChangesAreRecorded(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	f.Env.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	changingAgent(t, f)
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
	}
	recs := f.Records("j")
	show := func(c *history.FileChanges) string {
		if c == nil {
			return "none"
		}
		return fmt.Sprintf("+%v ~%v -%v", c.Added, c.Modified, c.Deleted)
	}
	resps := testkit.OfType(recs, history.TypeResponse)
	if len(resps) != 4 {
		t.Fatalf("%d responses", len(resps))
	}
	for i, want := range []struct{ changes, warning string }{
		{"+[a.txt b.txt] ~[] -[]", `added "b.txt"`},
		{"none", ""},
		{"+[dir/c.txt] ~[a.txt] -[b.txt]", `modified "a.txt"; deleted "b.txt"`},
		{"none", ""},
	} {
		r := resps[i].Response
		if got := show(r.WorkspaceChanges); got != want.changes {
			t.Errorf("response %d (%s): workspace changes %s, want %s", i, resps[i].Role, got, want.changes)
		}
		w := strings.Join(r.Warnings, " | ")
		if (want.warning == "") != (w == "") || !strings.Contains(w, want.warning) {
			t.Errorf("response %d (%s): warnings %q, want one naming %s", i, resps[i].Role, w, want.warning)
		}
	}
	if n := strings.Count(logs.String(), `"error_code":"`+codes.UndeclaredChanges+`"`); n != 2 {
		t.Errorf("%d %s log lines, want 2:\n%s", n, codes.UndeclaredChanges, logs.String())
	}

	points := testkit.OfType(recs, history.TypeRecoveryPoint)
	type pt struct{ id, base, changes, rollback, evidence string }
	var got []pt
	for _, r := range points {
		p := r.RecoveryPoint
		got = append(got, pt{p.CheckpointID, p.BaseCheckpoint, show(p.Changes), fmt.Sprint(p.RollbackFiles), fmt.Sprint(p.EvidenceFiles)})
	}
	want := []pt{
		{"cp-start", "", "none", "[]", "[]"},
		{"cp-0000-work", "cp-start", "+[a.txt b.txt] ~[] -[]", "[a.txt b.txt]", "[a.txt]"},
		{"cp-0002-work", "cp-0000-work", "+[dir/c.txt] ~[a.txt] -[b.txt]", "[a.txt b.txt dir/c.txt]", "[dir/]"},
		{"cp-0003-review", "cp-0002-work", "+[] ~[] -[]", "[]", "[]"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("recovery points\n got %+v\nwant %+v", got, want)
	}
}

// A recovery point's snapshot is the next call's before-scan when that
// call is prepared in the same transaction (the job's start, a phase
// boundary a plain call follows): the workspace is walked once there, not
// twice. A call prepared in a transaction of its own (here the worker's
// second call, after the supervisor's RETRY, which takes no recovery
// point) scans it. The changes recorded are the same
// (TestWorkspaceChangesAreRecorded).
func TestSnapshotIsTheNextCallsScan(t *testing.T) {
	n := 0
	scan = func(ws string) (snapshot.Stats, error) { n++; return snapshot.Scan(ws) }
	t.Cleanup(func() { scan = snapshot.Scan })
	f := newFixture(t)
	changingAgent(t, f)
	f.WriteJob("j", job(okSupervisor(), okSupervisor()))
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s (%s)", m.Status, m.Run.Reason)
	}
	resps := testkit.OfType(f.Records("j"), history.TypeResponse)
	if len(resps) != 4 || resps[0].Response.WorkspaceChanges == nil || resps[2].Response.WorkspaceChanges == nil {
		t.Fatalf("%d responses, the worker's changes not recorded", len(resps))
	}
	// 4 calls: 4 scans after them, 1 before (the worker's second call).
	if n != 5 {
		t.Errorf("the workspace was scanned %d times, want 5", n)
	}
}
