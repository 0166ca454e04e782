package runner

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/logist/logist/internal/agent"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/egress"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/sandbox"
	"github.com/logist/logist/internal/testkit"
)

// TestEgressRefusalsRecorded: a contained call of a job with a network
// allowlist whose agent tries destinations the list lacks ends with an
// error record EGRESS_REFUSED in the job's history, in the unit of the
// call's response, naming each destination with its count and reason;
// the history still verifies. A call that was refused nothing (the
// supervisor's) leaves no such record.
func TestEgressRefusalsRecorded(t *testing.T) {
	curl := "/usr/bin/curl"
	if _, err := os.Stat(curl); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("curl is needed: " + err.Error())
		}
		t.Skip("SKIP (loud): curl not installed")
	}
	st := sandbox.Probe()
	if _, err := st.Resolve(sandbox.LayerAuto); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no sandbox layer under CI=true: %v", err)
		}
		t.Skipf("SKIP (loud): no sandbox layer on this host: %v", err)
	}
	// The proxy on a socket the sandbox binds in, as the daemon serves it.
	sock := filepath.Join(t.TempDir(), "proxy.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: egress.New(egress.Config{})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	f := newFixture(t)
	f.Engine.Contain = &agent.Containment{Exec: &sandbox.Local{}, Status: st, Egress: egress.Agents{P: srv.Handler.(*egress.Proxy)},
		Network: sandbox.Network{Mode: sandbox.NetProxy, Socket: sock}}
	answer := `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"ok"}`
	tries := curl + ` -s -m 20 -o /dev/null http://not-listed.test/a; ` + curl + ` -s -m 20 -o /dev/null http://not-listed.test/b; ` +
		curl + ` -s -m 20 -o /dev/null https://other.test:8443/; echo "$1"`
	j := job(command(0, "sh", "-c", tries, "agent", answer), command(0, "sh", "-c", `echo "$1"`, "agent", answer))
	j["sandbox_network_allow"] = []string{"example.com"}
	f.WriteJob("j", j)
	f.Run("j")
	if m := f.Load("j"); m.Status != lifecycle.Success {
		t.Fatalf("status %s: %s", m.Status, m.Run.Reason)
	}

	recs := f.Records("j")
	var refusals []int
	for i, r := range recs {
		if r.Type == history.TypeError && r.Error != nil && r.Error.Code == codes.EgressRefused {
			refusals = append(refusals, i)
		}
	}
	if len(refusals) != 1 {
		t.Fatalf("%d EGRESS_REFUSED records, want 1 (the worker's call)", len(refusals))
	}
	i := refusals[0]
	rec := recs[i]
	msg := rec.Error.Message
	t.Logf("the record: %s", msg)
	for _, want := range []string{"refused 3 connections to not-listed.test:80 ×2, other.test:8443 ×1 (",
		"not-listed.test:80: not-listed.test:80 is not on the job's network allowlist; other.test:8443: "} {
		if !strings.Contains(msg, want) {
			t.Errorf("the record says %q, want %q in it", msg, want)
		}
	}
	if rec.Role != "worker" || rec.Attempt != 1 {
		t.Errorf("record of %q attempt %d, want the worker's first", rec.Role, rec.Attempt)
	}
	// The same unit as the worker's response: every record from it to the
	// response says the next belongs to it (More).
	resp := -1
	for k := i; k < len(recs); k++ {
		if recs[k].Type == history.TypeResponse {
			resp = k
			break
		}
		if !recs[k].More {
			t.Fatalf("record %d (%s) ends the unit before the response", k, recs[k].Type)
		}
	}
	if resp < 0 || recs[resp].Role != "worker" {
		t.Fatalf("no worker response in the record's unit")
	}
	if call := fmt.Sprintf("call %06d: ", *recs[resp].Interaction); !strings.HasPrefix(msg, call) {
		t.Errorf("the record %q does not name its call, %q", msg, call)
	}
	if len(testkit.OfType(recs, history.TypeResponse)) != 2 {
		t.Errorf("want two responses")
	}
	checkIntact(t, f, "j")
}

// A call without an allowlist, or refused nothing, records nothing.
func TestNoRefusalsNoRecord(t *testing.T) {
	t.Parallel()
	if l := refusedLogs(nil, "worker", 1, 3); l != nil {
		t.Errorf("no log: %+v", l)
	}
	if l := refusedLogs(&agent.EgressLog{}, "worker", 1, 3); l != nil {
		t.Errorf("nothing refused: %+v", l)
	}
}
