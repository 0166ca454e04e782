package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// The JSON envelope: ok and the command's data, or ok false and the error;
// a status at the top level would be ambiguous (the command's outcome or
// the job's?), so there is none.
func TestEnvelope(t *testing.T) {
	decode := func(r *Result, err error) map[string]any {
		var b bytes.Buffer
		render(&b, "json", r, err)
		var obj map[string]any
		if e := json.Unmarshal(b.Bytes(), &obj); e != nil {
			t.Fatalf("%s: %v", b.String(), e)
		}
		return obj
	}
	fields := &Result{Message: "m", Fields: []Field{{"job_id", "Job", "j"}, {"status", "Status", "RUNNING"}}}
	obj := decode(fields, nil)
	if obj["ok"] != true || obj["job_id"] != "j" || obj["message"] != "m" {
		t.Errorf("from fields: %v", obj)
	}
	if _, ok := obj["status"]; ok {
		t.Errorf("a top-level status: %v", obj)
	}
	obj = decode(&Result{Data: map[string]any{"job": map[string]any{"status": "RUNNING"}}, Items: []int{1}}, nil)
	if obj["job"].(map[string]any)["status"] != "RUNNING" || len(obj["items"].([]any)) != 1 {
		t.Errorf("from data: %v", obj)
	}
	obj = decode(&Result{Items: []string{"x"}}, &failedWith{nil, &validationFailed{1}})
	e := obj["error"].(map[string]any)
	if obj["ok"] != false || e["code"] != "invalid" || e["exit_code"] != 1.0 || e["message"] != "1 file(s) invalid" || obj["items"] == nil {
		t.Errorf("failure with details: %v", obj)
	}
	var b bytes.Buffer
	renderError(&b, nil, "json", errors.New("boom"))
	if !strings.Contains(b.String(), `"ok": false`) || strings.Contains(b.String(), `"status"`) {
		t.Errorf("error: %s", b.String())
	}
	// Documents are printed as they are.
	b.Reset()
	render(&b, "json", &Result{Document: map[string]any{"job_id": "j"}}, nil)
	if strings.Contains(b.String(), `"ok"`) {
		t.Errorf("document wrapped: %s", b.String())
	}
}
