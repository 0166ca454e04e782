package daemon

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
)

// A pickup reads, decodes and checks the job's manifest once, however the
// job arrives: the intake's read is handed to the run's first transaction
// (jobstore.Loaded, jobtx.Kept.Start), and the later ones go on from their
// own saves. Counted by the daemon's store over the job's whole run; the
// owner's store (clusterstore.OwnFolder, the history's commit hook) reads
// the file through it once more, as it first meets the job, at the first
// unit's commit: that read is its own, not the pickup's, and is allowed.
func TestPickupReadsTheManifestOnce(t *testing.T) {
	const ownersRead = 1
	for _, tc := range []struct {
		name string
		once bool // found by the start-up scan (--once), not heard of
		bare bool // dropped as t.json, not as the folder t/
	}{
		{name: "folder renamed in"},
		{name: "bare file placed", bare: true},
		{name: "folder at start", once: true},
		{name: "bare file at start", once: true, bare: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			stage := t.TempDir()
			drop := func() {
				src, dst := filepath.Join(stage, "t.json"), filepath.Join(dir, "t.json")
				if !tc.bare {
					src, dst = filepath.Join(stage, "t"), filepath.Join(dir, "t")
					if err := os.Mkdir(src, 0o700); err != nil {
						t.Fatal(err)
					}
					src2 := filepath.Join(src, jobstore.ManifestFile)
					if err := os.WriteFile(src2, []byte(quick), 0o600); err != nil {
						t.Fatal(err)
					}
				} else if err := os.WriteFile(src, []byte(quick), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(src, dst); err != nil {
					t.Fatal(err)
				}
			}
			got := make(chan *Daemon, 1)
			testHookScanned = func(d *Daemon) {
				select {
				case got <- d:
				default:
				}
			}
			t.Cleanup(func() { testHookScanned = nil })
			if tc.once {
				drop()
				if err := Run(context.Background(), Options{JobsDir: dir, Once: true, MaxParallel: 1}, discard()); err != nil {
					t.Fatal(err)
				}
			} else {
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- Run(ctx, Options{JobsDir: dir, MaxParallel: 1, Grace: time.Second}, discard()) }()
				d := <-got
				got <- d
				drop()
				waitFor(t, "the job to succeed", func() bool {
					m, err := manifest.ReadFile(filepath.Join(dir, "t", jobstore.ManifestFile))
					return err == nil && m.Status == lifecycle.Success
				})
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			d := <-got
			m, err := manifest.ReadFile(filepath.Join(dir, "t", jobstore.ManifestFile))
			if err != nil || m.Status != lifecycle.Success || m.Metrics.AgentCalls != 2 {
				t.Fatalf("job t: %+v %v", m, err)
			}
			if c := d.store.Counts(); c.Reads > 1+ownersRead || c.Decodes != 1 || c.Checks != 1 {
				t.Fatalf("the job's manifest was read %d times, decoded %d, checked %d: want once each", c.Reads, c.Decodes, c.Checks)
			}
		})
	}
}
