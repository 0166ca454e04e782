package jsonkeys

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestDuplicate(t *testing.T) {
	for _, c := range []struct{ doc, key, at string }{
		{`{"a": 1, "b": 2}`, "", "/"},
		{`{"a": 1, "a": 2}`, "a", "/"},
		{`{"a": 1, "\u0061": 2}`, "a", "/"},
		{`{"x": {"a": 1, "b": {"c": [1, {"d": 1, "d": 2}]}}}`, "d", "/x/b/c/1"},
		{`{"a/b~": {"k": 1, "k": 1}}`, "k", "/a~1b~0"},
		{`[{"a": 1}, {"a": 2}]`, "", "/"},
		{`{"s": "a\":\"", "a": 1}`, "", "/"},
		{`{"s": "\\", "s2": ":"}`, "", "/"},
	} {
		key, at := Duplicate([]byte(c.doc))
		if key != c.key || at != c.at {
			t.Errorf("Duplicate(%s) = %q at %q; want %q at %q", c.doc, key, at, c.key, c.at)
		}
		var doc any
		if err := json.Unmarshal([]byte(c.doc), &doc); err != nil {
			t.Fatal(err)
		}
		if key2, at2 := DuplicateIn([]byte(c.doc), doc); key2 != c.key || (c.key != "" && at2 != c.at) {
			t.Errorf("DuplicateIn(%s) = %q at %q; want %q at %q", c.doc, key2, at2, c.key, c.at)
		}
	}
}

// DuplicateIn's count decides as Duplicate's reading does, for any
// well-formed JSON.
func FuzzDuplicateIn(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `{"a":"\":","b":[{"c":1},{"c":1}]}`, `[1,"x:",{"":0,"":1}]`, `{"k\\":1,"k\\\\":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		var doc any
		dec := json.NewDecoder(bytes.NewReader(s))
		dec.UseNumber()
		if !json.Valid(s) || dec.Decode(&doc) != nil {
			return
		}
		k1, _ := Duplicate(s)
		k2, _ := DuplicateIn(s, doc)
		if k1 != k2 {
			t.Fatalf("%q: Duplicate says %q, DuplicateIn %q", s, k1, k2)
		}
	})
}

func BenchmarkDuplicateIn(b *testing.B) {
	s := []byte(`{"job_id": "b", "task_description": "bench", "agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]}}, "metrics": {"cumulative_cost": 1, "agent_calls": 3}}`)
	var doc any
	_ = json.Unmarshal(s, &doc)
	for b.Loop() {
		DuplicateIn(s, doc)
	}
}
