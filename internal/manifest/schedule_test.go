package manifest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/logist/logist/schemas"
)

// A zone written into the cron expression is refused, with a reason, where
// robfig/cron v3.0.1 panicked on one with no expression after it ("TZ=UTC":
// the daemon stopped at the manifest's intake). The zone has its field.
func TestCronExpressionHoldsNoZone(t *testing.T) {
	for _, c := range []string{"TZ=0", "CRON_TZ=UTC", "TZ=", "CRON_TZ=", "TZ=TZ=TZ=", "TZ=Europe/Rome 0 2 * * *"} {
		m, err := Decode("job.json", []byte(`{"task_description":"t","agents":{"worker":{"provider":"script","script":[{}]},"supervisor":{"provider":"script","script":[{}]}},"schedule":{"cron":"`+c+`"}}`))
		if err == nil || m != nil || !strings.Contains(err.Error(), "job.json: /schedule/cron: cron \""+c+"\": a time zone goes in schedule.timezone") {
			t.Errorf("%q: %v", c, err)
		}
	}
	s := &Schedule{Cron: "0 2 * * *", Timezone: "Europe/Rome"}
	spec, err := s.Spec()
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC)
	if got, want := spec.Next(from), time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next 02:00 in Rome after %s: %s, want %s", from, got.UTC(), want) // 02:00 CEST is 00:00 UTC
	}
}

// FuzzScheduleSpec: any expression and zone give a schedule or an error,
// never a panic, and a schedule's next tick is later than now.
func FuzzScheduleSpec(f *testing.F) {
	for _, s := range [][2]string{{"0 2 * * *", ""}, {"@every 10m", "UTC"}, {"TZ=UTC", ""}, {"*/5 1-3 * JAN-MAR MON", "Asia/Tokyo"}, {"@daily", "../../etc/passwd"}, {"0 0 30 2 *", ""}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, expr, zone string) {
		spec, err := (&Schedule{Cron: expr, Timezone: zone}).Spec()
		if err != nil {
			return
		}
		now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		if next := spec.Next(now); !next.IsZero() && !next.After(now) {
			t.Fatalf("%q in %q: next %s is not after %s", expr, zone, next, now)
		}
	})
}

// A panic of the manifest's checks (as robfig/cron's was) refuses that
// manifest, naming its file, counted as a fault; the next one is checked.
func TestCheckFaultRefusesTheManifest(t *testing.T) {
	real := checks
	t.Cleanup(func() { checks = real })
	checks = func(file string, data []byte, m *Manifest) (*Manifest, error) {
		if strings.Contains(string(data), "boom") {
			var none []byte
			return nil, errors.New(string(none[len(data)]))
		}
		return real(file, data, m)
	}
	before := schemas.Faults.Load()
	m, err := Decode("jobs/a/job.json", []byte(`{"task_description":"boom"}`))
	var me *Error
	if m != nil || !errors.As(err, &me) || me.File != "jobs/a/job.json" ||
		!strings.Contains(me.Reason, "could not be checked against the manifest's rules: the check failed on it (runtime error: index out of range [27] with length 0 at github.com/logist/logist/internal/manifest.TestCheckFaultRefusesTheManifest") {
		t.Fatalf("%v, %v", m, err)
	}
	if schemas.Faults.Load() != before+1 {
		t.Errorf("the fault was not counted")
	}
	if _, err := Decode("jobs/b/job.json", []byte(`{"task_description":"t","agents":{"worker":{"provider":"script","script":[{}]},"supervisor":{"provider":"script","script":[{}]}}}`)); err != nil {
		t.Errorf("the next manifest: %v", err)
	}
}

// An expression no time fits (February 30th: robfig/cron's Next gives the
// zero time, which fired at once as 0001-01-01) and an @every interval
// under a minute (@every 0s made a job a second) are refused at intake,
// naming the file, the field and why; a minute, and February 29th, pass.
func TestScheduleRefusesNeverAndTooOften(t *testing.T) {
	decode := func(c string) error {
		_, err := Decode("job.json", []byte(`{"task_description":"t","agents":{"worker":{"provider":"script","script":[{}]},"supervisor":{"provider":"script","script":[{}]}},"schedule":{"cron":"`+c+`"}}`))
		return err
	}
	for c, want := range map[string]string{
		"0 0 30 2 *":   `job.json: /schedule/cron: cron "0 0 30 2 *": never matches`,
		"0 0 31 4,6 *": "never matches",
		"@every 0s":    `job.json: /schedule/cron: cron "@every 0s": an @every interval must be at least 1m`,
		"@every 59s":   "must be at least 1m",
		"@every 500ms": "must be at least 1m",
	} {
		if err := decode(c); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", c, err, want)
		}
	}
	for _, c := range []string{"@every 1m", "@every 10m", "0 0 29 2 *", "* * * * *"} {
		if err := decode(c); err != nil {
			t.Errorf("%q: %v", c, err)
		}
	}
	if MinEvery.String() != "1m0s" || minEveryText != "1m" {
		t.Errorf("MinEvery %s, its text %s", MinEvery, minEveryText)
	}
}
