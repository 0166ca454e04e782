package console

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// copyTree copies the example job folder src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLedgerPages: the example negotiation reads as its rounds, the
// parliament as its order paper, the protocol as its signed events.
func TestLedgerPages(t *testing.T) {
	w := newWorld(t)
	for _, id := range []string{"demo-negotiation", "demo-parliament", "demo-protocol"} {
		copyTree(t, filepath.Join("..", "..", "jobs", id), filepath.Join(w.k.Dir, id))
		w.k.Run(id)
	}
	cl := w.browser()
	w.login(cl, viewerTok)
	for id, wants := range map[string][]string{
		"demo-negotiation": {"<h1>Rounds of", "Round 1", "The chair opens Round 1"},
		"demo-parliament":  {"<h1>Order paper of", "Opening of the session", "Order, order."},
		"demo-protocol":    {"<h1>Protocol ledger of", "proposal_created", "signed, key"},
	} {
		code, page := get(t, cl, w.srv.URL+"/jobs/"+id+"/ledger")
		if code != 200 {
			t.Fatalf("%s ledger: %d", id, code)
		}
		for _, want := range wants {
			if !strings.Contains(page, want) {
				t.Errorf("%s ledger lacks %q", id, want)
			}
		}
		if _, page := get(t, cl, w.srv.URL+"/jobs/"+id); !strings.Contains(page, `id="ledger-link"`) {
			t.Errorf("%s's page does not link its ledger", id)
		}
	}
	if code, page := get(t, cl, w.srv.URL+"/jobs/done/ledger"); code != 200 || !strings.Contains(page, `id="empty"`) {
		t.Errorf("a supervised job's ledger: %d", code)
	}
}
