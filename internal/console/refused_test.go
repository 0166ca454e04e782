package console

import (
	"strings"
	"testing"

	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/jobtx"
)

// TestJobPageShowsEgressRefusalsAsText: the record of what the egress
// proxy refused a call names destinations and reasons that come from the
// agent's requests; the job page shows it, as text.
func TestJobPageShowsEgressRefusalsAsText(t *testing.T) {
	w := newWorld(t)
	tx, err := jobtx.Begin(w.k.Env, "done", nil)
	if err != nil {
		t.Fatal(err)
	}
	msg := "call 000001: the network allowlist refused 2 connections to " + hostile + ".test:443 ×2 (" + hostile + ")"
	err = tx.RecordError(codes.EgressRefused, "worker", 1, msg)
	tx.Close()
	if err != nil {
		t.Fatal(err)
	}
	cl := w.browser()
	w.login(cl, stewardTok)
	_, page := get(t, cl, w.srv.URL+"/jobs/done")
	if !strings.Contains(page, "Error "+codes.EgressRefused) || !strings.Contains(page, "refused 2 connections to &lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;") {
		t.Errorf("the job page does not show the refusals record as text:\n%s", page)
	}
	if strings.Contains(page, "<script>alert") || strings.ContainsRune(page, 0x1b) || strings.ContainsRune(page, 0x07) {
		t.Error("the job page renders the agent's text raw")
	}
}
