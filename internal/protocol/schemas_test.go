package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/logist/logist/schemas"
)

const base = `"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"s"`

// TestAnswerSchemas: each phase's answer is the base contract plus the
// role's field; both halves are enforced.
func TestAnswerSchemas(t *testing.T) {
	art := `"sha256:` + strings.Repeat("a", 64) + `"`
	cases := []struct {
		schema string
		ok     []string
		bad    []string
	}{
		{"protocol-answer-planner.json",
			[]string{`"proposals":[{"id":"p1","objective":"o","assumptions":[],"required_tools":["shell"],"expected_evidence":["e"]},{"id":"p2","objective":"o","assumptions":[],"required_tools":[],"expected_evidence":[],"revises":"p1"}]`},
			[]string{`"proposals":[]`, `"proposals":[{"id":"P1","objective":"o","assumptions":[],"required_tools":[],"expected_evidence":[]}]`,
				`"proposals":[{"id":"p1","assumptions":[],"required_tools":[],"expected_evidence":[]}]`}},
		{"protocol-answer-critic-proposals.json",
			[]string{`"reviews":[{"proposal_id":"p1","decision":"approved","reason":"r"},{"proposal_id":"p2","decision":"conditionally_approved","conditions":"c","reason":"r"}]`, `"reviews":[]`},
			[]string{`"reviews":[{"proposal_id":"p1","decision":"conditionally_approved","reason":"r"}]`, `"reviews":[{"proposal_id":"p1","decision":"ok","reason":"r"}]`}},
		{"protocol-answer-executor.json",
			[]string{`"tool_intents":[{"id":"i1","proposal_id":"p1","tool":"shell","input":{"command":"ls"},"risk_class":"low","justification":"j"}]`, `"tool_intents":[]`},
			[]string{`"tool_intents":[{"id":"i1","proposal_id":"p1","tool":"shell","input":"ls","risk_class":"low","justification":"j"}]`,
				`"tool_intents":[{"id":"i1","proposal_id":"p1","tool":"shell","input":{},"risk_class":"extreme","justification":"j"}]`}},
		{"protocol-answer-critic-intents.json",
			[]string{`"intent_reviews":[{"intent_id":"i1","decision":"blocked","reason":"r"}]`},
			[]string{`"intent_reviews":[{"intent_id":"i1","decision":"rejected","reason":"r"}]`}},
		{"protocol-answer-claims.json",
			[]string{`"claims":[{"id":"c1","text":"t","confidence":0.5,"evidence":[` + art + `]}]`},
			[]string{`"claims":[]`, `"claims":[{"id":"c1","text":"t","confidence":2,"evidence":[]}]`, `"claims":[{"id":"c1","text":"t","confidence":1,"evidence":["file.txt"]}]`}},
		{"protocol-answer-critic-claims.json",
			[]string{`"challenges":[]`, `"challenges":[{"claim_id":"c1","reason":"weak"}]`},
			[]string{`"challenges":[{"claim_id":"c1"}]`}},
		{"protocol-answer-final.json",
			[]string{`"final_statement":{"summary":"s","claim_ids":["c1"]}`},
			[]string{`"final_statement":{"summary":"s","claim_ids":[]}`, `"final_statement":{"claim_ids":["c1"]}`}},
		{"protocol-answer-auditor.json",
			[]string{`"verdict":{"status":"pass_with_warnings","notes":"n"}`},
			[]string{`"verdict":{"status":"ok","notes":"n"}`, `"verdict":{"status":"pass"}`}},
	}
	for _, c := range cases {
		raw, err := schemas.Raw(c.schema)
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		var doc map[string]any
		if json.Unmarshal(raw, &doc) != nil || doc["$id"] != nil || doc["x-schema-version"] != 1.0 {
			t.Errorf("%s: header %v", c.schema, doc["$id"])
		}
		for _, s := range c.ok {
			if err := schemas.ValidateJSON(c.schema, []byte("{"+base+","+s+"}")); err != nil {
				t.Errorf("%s: %s: %v", c.schema, s, err)
			}
		}
		for _, s := range c.bad {
			var se *schemas.Error
			if err := schemas.ValidateJSON(c.schema, []byte("{"+base+","+s+"}")); !errors.As(err, &se) {
				t.Errorf("%s accepted %s (%v)", c.schema, s, err)
			}
		}
		// The base contract still applies.
		bad := "{" + strings.Replace(base, "COMPLETED", "DONE", 1) + "," + c.ok[0] + "}"
		if err := schemas.ValidateJSON(c.schema, []byte(bad)); err == nil {
			t.Errorf("%s accepted a bad action", c.schema)
		}
	}
}

// TestEventSchemaCoversEveryType: each event type has a body definition
// that refuses unknown fields.
func TestEventSchemaCoversEveryType(t *testing.T) {
	for typ := range Emitters {
		subject := "x1"
		switch typ {
		case SessionInitialized, FinalStatementSigned, VerificationStarted, VerificationCompleted, SessionFailed, SessionAborted:
			subject = ""
		}
		err := schemas.Validate(EventSchema, map[string]any{"type": typ, "subject": subject, "body": map[string]any{"zzz_unknown": true}})
		if err == nil || !strings.Contains(err.Error(), "zzz_unknown") {
			t.Errorf("%s: %v", typ, err)
		}
	}
}
