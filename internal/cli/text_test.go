package cli

import "testing"

// A time budget prints with the precision the steward gave it, no more.
func TestMinutesText(t *testing.T) {
	for _, c := range []struct {
		min  float64
		want string
	}{
		{90, "1h30m"}, {0.5, "30s"}, {10, "10m"}, {60, "1h"}, {1.5, "1m30s"}, {2.25, "2m15s"},
		{0.001, "0.06s"}, {0.333, "19.98s"}, {1500, "25h"}, {0, "0s"}, {61.01, "1h1m0.6s"},
	} {
		if got := minutesText(c.min); got != c.want {
			t.Errorf("minutesText(%v) = %q, want %q", c.min, got, c.want)
		}
	}
}
