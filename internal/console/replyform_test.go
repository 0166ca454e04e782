package console

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/logist/logist/internal/testkit"
)

func TestFormFields(t *testing.T) {
	got := formFields("negotiation-statement.json")
	kinds := map[string]string{}
	for _, f := range got {
		kinds[f.Name] = f.Kind
	}
	if len(got) == 0 || got[0].Name != "text" || !got[0].Required || kinds["text"] != "text" || kinds["issues"] != "json" || kinds["concessions"] != "json" {
		t.Errorf("fields %+v", got)
	}
	if formFields("no-such-schema.json") != nil {
		t.Error("fields of a missing schema")
	}
}

func TestAnswerFromForm(t *testing.T) {
	a, err := answerFromForm(url.Values{"f.text.text": {"We accept B."}, "f.number.n": {"2.5"}, "f.boolean.ok": {"false", "true"},
		"f.boolean.no": {"false"}, "f.json.issues": {`["a","b"]`}, "f.enum.vote": {"aye"}, "f.string.empty": {""}, "csrf": {"x"}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	_ = json.Unmarshal(a, &got)
	want := map[string]any{"text": "We accept B.", "n": 2.5, "ok": true, "no": false, "issues": []any{"a", "b"}, "vote": "aye"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answer %v, want %v", got, want)
	}
	if a, err := answerFromForm(url.Values{"as": {"x"}}); a != nil || err != nil {
		t.Errorf("no fields: %s %v", a, err)
	}
	for _, bad := range []url.Values{{"f.number.n": {"many"}}, {"f.json.j": {"{"}}, {"f.nokind": {"x"}}, {"f.weird.x": {"1"}}} {
		if _, err := answerFromForm(bad); err == nil {
			t.Errorf("%v taken", bad)
		}
	}
}

// TestReplyThroughTheForm: a job waiting for a human's reply shows the
// reply form for the waiting role, and the form's answer is filed.
func TestReplyThroughTheForm(t *testing.T) {
	w := newWorld(t)
	w.k.WriteJob("human", map[string]any{"agents": map[string]any{
		"worker":     map[string]any{"provider": "human"},
		"supervisor": testkit.Script(testkit.Step("COMPLETED", "ok")),
	}})
	w.k.Run("human")
	if m := w.k.Load("human"); m.Run.ErrorCode != "AWAITING_REPLY" {
		t.Fatalf("human is %s %s", m.Status, m.Run.ErrorCode)
	}
	cl := w.browser()
	csrf := w.login(cl, stewardTok)
	for _, p := range []string{"/jobs/human", "/needs"} {
		if _, page := get(t, cl, w.srv.URL+p); !strings.Contains(page, `class="action reply-form" data-role="worker"`) {
			t.Errorf("%s has no reply form for worker", p)
		}
	}
	answer := `{"action": "STUCK", "summary_for_supervisor": "A human says: stop here.", "evidence_files": []}`
	resp, err := cl.PostForm(w.srv.URL+"/jobs/human/reply", url.Values{"csrf": {csrf}, "as": {"worker"}, "answer": {answer}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("reply: %d", resp.StatusCode)
	}
	if m := w.k.Load("human"); m.Status != "PENDING" || m.Run.ErrorCode != "" {
		t.Errorf("after the reply: %s %s", m.Status, m.Run.ErrorCode)
	}
	// An answer that is not one is refused as the CLI refuses it.
	if code, body := w.call("POST", "/api/v1/jobs/human/reply", stewardTok, map[string]any{"as": "worker", "answer": map[string]any{"x": 1}}); code < 400 {
		t.Errorf("a second reply: %d %v", code, body)
	}
}
