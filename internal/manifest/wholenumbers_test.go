package manifest

import (
	"errors"
	"strings"
	"testing"
)

// A value the schema takes as an integer but the Go field cannot hold
// (past its range, or spelt with a fraction or an exponent) is refused
// naming the manifest's field by its JSON pointer, not a Go struct field
// (`cannot unmarshal number 1e+308 into Go struct field
// ScriptStep.agents.script.delay_ms of type int64`).
func TestWholeNumbersNameTheField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, data, pointer, value string }{
		{"delay_ms 1e308", `{"task_description": "t", "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "a"}, {"delay_ms": 1e308}]}, "supervisor": {"provider": "script", "script": [{}]}}}`, "/agents/worker/script/1/delay_ms", "1e308"},
		{"max_retries 3.0", withFields(`"limits": {"max_retries": 3.0}`), "/limits/max_retries", "3.0"},
		{"max_retries -0.0", withFields(`"limits": {"max_retries": -0.0}`), "/limits/max_retries", "-0.0"},
		{"backoff 1e2", withFields(`"limits": {"backoff_initial_ms": 1e2}`), "/limits/backoff_initial_ms", "1e2"},
		{"schema_version 1e308", withFields(`"schema_version": 1e308`), "/schema_version", "1e308"},
		{"agent_calls", withFields(`"metrics": {"cumulative_cost": 0, "agent_calls": 1e300}`), "/metrics/agent_calls", "1e300"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := Decode("job.json", []byte(c.data))
			var me *Error
			if !errors.As(err, &me) || me.Pointer != c.pointer || !strings.Contains(me.Reason, c.value+" is not a whole number") ||
				strings.Contains(err.Error(), "Go struct") {
				t.Fatalf("Decode: %v, want %s naming %s", err, c.pointer, c.value)
			}
		})
	}
}

func TestPointerAt(t *testing.T) {
	t.Parallel()
	data := []byte(`{"a": [1, {"b/c": 22, "d": [3, 4]}], "e~": 5}`)
	for _, c := range []struct {
		off  int64
		want string
	}{
		{8, "/a/0"}, {20, "/a/1/b~1c"}, {31, "/a/1/d/1"}, {int64(len(data)) - 1, "/e~0"}, {int64(len(data)) + 1, ""},
	} {
		if got := pointerAt(data, c.off); got != c.want {
			t.Errorf("pointerAt(%d) = %q, want %q", c.off, got, c.want)
		}
	}
}
