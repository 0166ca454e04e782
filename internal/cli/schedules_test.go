package cli

import (
	"testing"
	"time"

	"github.com/logist/logist/internal/manifest"
)

// logist schedules' NEXT RUN is the daemon's: an @every schedule's next
// tick counts from its last run (not from now), and a schedule whose next
// tick robfig/cron cannot find says never (it showed 0001-01-01).
func TestNextRunIsTheDaemons(t *testing.T) {
	every := &manifest.Manifest{Schedule: &manifest.Schedule{Cron: "@every 1h"}}
	every.Run.LastScheduledAt = "2026-11-21T10:20:00Z"
	if got := nextRun(every, time.Date(2026, 11, 21, 10, 50, 0, 0, time.UTC)); got != "2026-11-21T11:20:00Z" {
		t.Errorf("@every 1h, last run 10:20, now 10:50: next %s, want 11:20", got)
	}
	leap := &manifest.Manifest{Schedule: &manifest.Schedule{Cron: "0 0 29 2 *"}}
	if got := nextRun(leap, time.Date(2097, 3, 1, 0, 0, 0, 0, time.UTC)); got != "never" {
		t.Errorf("February 29th seen from 2097: next %s, want never", got)
	}
}
