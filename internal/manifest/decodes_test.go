package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/logist/logist/schemas/schemastest"
)

// incompleteByDecode is Incomplete as it was, by a decode of the whole
// document: the fast path for valid JSON must answer as it does.
func incompleteByDecode(data []byte) bool {
	if strings.TrimSpace(string(data)) == "" {
		return true
	}
	var v any
	err := json.Unmarshal(data, &v)
	var se *json.SyntaxError
	return errors.As(err, &se) && se.Offset >= int64(len(data)) && strings.Contains(se.Error(), "unexpected end")
}

func TestIncompleteIsAnUnfinishedDocument(t *testing.T) {
	for _, tc := range []struct {
		data string
		want bool
	}{
		{"", true},
		{"  \n", true},
		{`{"task_description": "t"`, true},
		{`{"task_description": "t", "agents": {`, true},
		{`{"task_description": "t"}`, false},
		{`{"task_description": "t"} `, false},
		{`[1, 2]`, false},
		{`{"task_description": }`, false},
		{`{"a": 1}}`, false},
	} {
		if got := Incomplete([]byte(tc.data)); got != tc.want || got != incompleteByDecode([]byte(tc.data)) {
			t.Errorf("Incomplete(%q) = %v, want %v (by decode: %v)", tc.data, got, tc.want, incompleteByDecode([]byte(tc.data)))
		}
	}
}

func FuzzIncomplete(f *testing.F) {
	f.Add([]byte(`{"task_description": "t"`))
	f.Add([]byte(`{"task_description": "t"}`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer schemastest.NoFault(t)()
		if got, want := Incomplete(data), incompleteByDecode(data); got != want {
			t.Fatalf("Incomplete(%q) = %v, by decode %v", data, got, want)
		}
	})
}

// Check, given what DecodeTrusted made of the bytes, answers as Decode:
// the same manifest, or the same errors naming the file and the field.
func TestCheckIsDecode(t *testing.T) {
	const agents = `"agents": {"worker": {"provider": "script", "script": []}, "supervisor": {"provider": "script", "script": []}}`
	for _, data := range []string{
		`{"task_description": "t", ` + agents + `}`,
		`{"task_description": "t", "status": "BOGUS", ` + agents + `}`,
		`{"task_description": "t", "agents": {"worker": {"provider": "script", "script": []}}}`,
		`{"task_description": "t", "schema_version": 9, ` + agents + `}`,
		`{"task_description": "t", "time_threshold_minutes": 1e-400, ` + agents + `}`,
	} {
		want, werr := Decode("/jobs/j/job.json", []byte(data))
		trusted, err := DecodeTrusted("/jobs/j/job.json", []byte(data))
		if err != nil {
			t.Fatalf("DecodeTrusted(%s): %v", data, err)
		}
		got, gerr := Check("/jobs/j/job.json", []byte(data), trusted)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
			t.Errorf("Check(%s) = %+v, %v; Decode: %+v, %v", data, got, gerr, want, werr)
		}
	}
}
