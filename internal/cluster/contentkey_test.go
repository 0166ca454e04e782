package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/codes"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/secrets"
	"github.com/logist/logist/internal/testkit"
)

// TestSealedJobMovesWithTheSharedKey: an encrypt_history job runs in a
// cluster whose nodes share the content key. Its first node records the
// key's fingerprint; a node with another key, and one with none, give the
// job back without writing a record (CONTENT_KEY_MISMATCH); a second node
// with the shared key finishes it; every sealed text opens with that key
// and the history verifies.
func TestSealedJobMovesWithTheSharedKey(t *testing.T) {
	s, _ := openStore(t)
	keys := t.TempDir()
	shared, err := secrets.LoadOrCreateCipher(filepath.Join(keys, "shared.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.LoadOrCreateCipher(filepath.Join(keys, "other.key")); err != nil {
		t.Fatal(err)
	}
	withKey := func(name string) func(string) string {
		return func(k string) string {
			if k == secrets.KeyEnv {
				return filepath.Join(keys, name)
			}
			return ""
		}
	}
	ctx := context.Background()
	job := bytes.Replace(scripted("sealed", 3000), []byte(`"cost_threshold": 100,`), []byte(`"cost_threshold": 100, "encrypt_history": true,`), 1)
	if _, err := Submit(ctx, s, job); err != nil {
		t.Fatalf("an encrypt_history job is refused: %v", err)
	}
	start := func(id, key string) (context.CancelFunc, *testkit.SyncBuffer, *sync.WaitGroup) {
		n := newNode(t, s, id, 5*time.Second)
		n.Getenv = withKey(key)
		log := &testkit.SyncBuffer{}
		n.Logger = slog.New(slog.NewJSONHandler(log, nil))
		c, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := n.Run(c); err != nil {
				t.Error(err)
			}
		})
		return cancel, log, &wg
	}

	// The first node runs the worker's first call and the supervisor's
	// RETRY, then stops during the worker's second call (3 s; its lease
	// given back): the job is half done, sealed with the shared key.
	// (REVIEWING lasts only as long as the supervisor's instant call: a
	// wait for it could see the job's end instead.)
	stop1, _, wg1 := start("n1", "shared.key")
	waitAll(t, s, 1, func(j *clusterstore.Job) bool {
		return j.Status == lifecycle.Running && j.SpentMicros >= 30_000
	}, 60*time.Second)
	stop1()
	wg1.Wait()
	before, err := s.Job(ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	if !before.Status.Active() {
		t.Fatalf("the job ended (%s) before the first node stopped: nothing is left for the other nodes", before.Status)
	}
	files, err := s.Files(ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(files[fingerprintFile])); got != shared.Fingerprint() {
		t.Fatalf("the database holds fingerprint %q, want the shared key's %q", got, shared.Fingerprint())
	}

	// Nodes with another key, or none, give it back untouched.
	stopOther, otherLog, wgOther := start("n-other", "other.key")
	stopNone, noneLog, wgNone := start("n-none", "missing.key")
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(otherLog.String(), codes.ContentKeyMismatch) || !strings.Contains(noneLog.String(), codes.ContentKeyMismatch) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60s:\nother: %s\nnone: %s", codes.ContentKeyMismatch, otherLog, noneLog)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopOther()
	stopNone()
	wgOther.Wait()
	wgNone.Wait()
	after, err := s.Job(ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	if after.NextSeq != before.NextSeq || after.Status != before.Status || after.SpentMicros != before.SpentMicros {
		t.Fatalf("a node without the key wrote: records %d -> %d, status %s -> %s", before.NextSeq, after.NextSeq, before.Status, after.Status)
	}
	if !strings.Contains(otherLog.String(), shared.Fingerprint()) {
		t.Errorf("the refusal does not name the job's key fingerprint: %s", otherLog)
	}

	// A second node with the shared key finishes it.
	stop2, _, wg2 := start("n2", "shared.key")
	js := waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	stop2()
	wg2.Wait()
	// A call n1's stop interrupted may be asked again: at least the four.
	if js[0].SpentMicros < 60_000 {
		t.Errorf("spent %d µ$, want at least 60000", js[0].SpentMicros)
	}
	verifyExport(t, s, "sealed")
	lines, err := s.History(ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	var opened []string
	for _, l := range lines {
		var line struct {
			Key string `json:"key"`
			Rec struct {
				Response *struct {
					Summary string `json:"summary_for_supervisor"`
				} `json:"response"`
			} `json:"rec"`
		}
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatal(err)
		}
		nodes[line.Key] = true
		if r := line.Rec.Response; r != nil {
			if !secrets.Sealed(r.Summary) {
				t.Errorf("a response's summary is not sealed: %q", r.Summary)
				continue
			}
			text, err := shared.Open(r.Summary, "sealed")
			if err != nil {
				t.Errorf("a sealed summary does not open with the shared key: %v", err)
			}
			opened = append(opened, text)
		}
	}
	if len(opened) < 4 || opened[len(opened)-1] != "Good." {
		t.Errorf("opened summaries %q, want the scripted ones", opened)
	}
	if len(nodes) < 2 {
		t.Errorf("the history was signed by %d node keys, want both nodes'", len(nodes))
	}
}
