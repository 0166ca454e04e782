package bench

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A round's excess is taken apart from the histories: the parts sum to the
// total less the ideal, and each is where the timeline puts it.
func TestSplitExcessFromHistories(t *testing.T) {
	jobs := t.TempDir()
	began := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	agent := time.Second
	// 4 jobs, 2 slots: the first wave's intents at +10 and +30 ms, the
	// second's at +1,015 and +1,050 ms; each response comes late (the
	// outcome's wait), which must not move the parts.
	startsAt := []time.Duration{30 * time.Millisecond, 10 * time.Millisecond, 1050 * time.Millisecond, 1015 * time.Millisecond}
	var list []string
	for i, at := range startsAt {
		id := fmt.Sprintf("k-%d", i)
		list = append(list, id)
		if err := os.MkdirAll(filepath.Join(jobs, id), 0o755); err != nil {
			t.Fatal(err)
		}
		start := began.Add(at)
		lines := fmt.Sprintf(`{"hash":"w","rec":{"type":"recovery_point","ts":%q}}
{"hash":"x","rec":{"type":"intent","ts":%q,"role":"worker"}}
{"hash":"y","rec":{"type":"response","ts":%q,"role":"worker"}}
{"hash":"z","rec":{"type":"intent","ts":%q,"role":"supervisor"}}
`, start.Add(-time.Millisecond).Format(time.RFC3339Nano), start.Format(time.RFC3339Nano), start.Add(agent+time.Duration(i+3)*7*time.Millisecond).Format(time.RFC3339Nano),
			start.Add(agent+40*time.Millisecond).Format(time.RFC3339Nano))
		if err := os.WriteFile(filepath.Join(jobs, id, "history.jsonl"), []byte(lines), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	starts, err := jobStarts(jobs, list)
	if err != nil {
		t.Fatal(err)
	}
	total := 2070 * time.Millisecond
	parts, err := splitExcess(began, total, starts, 2, agent)
	if err != nil {
		t.Fatal(err)
	}
	want := concParts{Ramp: 30, Handovers: 20, Tail: 20}
	if math.Abs(parts.Ramp-want.Ramp) > 1e-6 || math.Abs(parts.Handovers-want.Handovers) > 1e-6 || math.Abs(parts.Tail-want.Tail) > 1e-6 {
		t.Fatalf("parts %+v, want %+v", parts, want)
	}
	if sum := parts.Ramp + parts.Handovers + parts.Tail; math.Abs(sum-(2070-2000)) > 1e-6 {
		t.Fatalf("parts sum to %.3f ms, want the excess 70 ms", sum)
	}
	// A job with no intent is an error, not a silent zero.
	if err := os.WriteFile(filepath.Join(jobs, "k-0", "history.jsonl"), []byte(`{"rec":{"type":"recovery_point","ts":"2026-11-27T08:00:00Z"}}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := jobStarts(jobs, list); err == nil {
		t.Fatal("a history with no intent gave no error")
	}
}
