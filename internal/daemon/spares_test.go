package daemon

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/logist/logist/internal/sandbox"
)

// The daemon counts its spare sandboxes on /metrics: a job of two
// contained command calls (bwrap) starts one for the supervisor's call
// while the worker's runs, which serves it, and none after the last call.
func TestSpareSandboxesCounted(t *testing.T) {
	if !sandbox.Probe().Bwrap.OK {
		if os.Getenv("CI") == "true" {
			t.Fatal("bwrap is needed: " + sandbox.Probe().Bwrap.Why)
		}
		t.Skip("LOUD SKIP: bwrap does not work here: " + sandbox.Probe().Bwrap.Why)
	}
	dir := t.TempDir()
	const answer = `echo '{\"action\": \"COMPLETED\", \"evidence_files\": [], \"summary_for_supervisor\": \"ok\"}'`
	writeFolderJob(t, dir, "spared", `{"task_description": "t", "sandbox": "bwrap", "agents": {
 "worker": {"provider": "command", "command": {"argv": ["sh", "-c", "`+answer+`"]}},
 "supervisor": {"provider": "command", "command": {"argv": ["sh", "-c", "`+answer+`"]}}}}`)
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 1, Listen: addr, Grace: time.Second}, discard())
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitLong(t, "the job to run", func() bool { return status(dir, "spared") == "SUCCESS" })
	_, body := get(t, "http://"+addr+"/metrics")
	started := metric(t, body, `logistd_spare_sandboxes_total{outcome="started"}`)
	served := metric(t, body, `logistd_spare_sandboxes_total{outcome="served"}`)
	discarded := metric(t, body, `logistd_spare_sandboxes_total{outcome="discarded"}`)
	if started != 1 || served != 1 || discarded != 0 {
		t.Errorf("spares started %v, served %v, discarded %v; want 1, 1, 0", started, served, discarded)
	}
}
