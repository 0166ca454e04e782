package effect_test

import (
	"testing"

	"github.com/logist/logist/internal/effect"
	"github.com/logist/logist/internal/jobtx"
	"github.com/logist/logist/internal/response"
	"github.com/logist/logist/internal/workflow"
)

type nop struct{ name string }

func (nop) Prepare(*jobtx.Tx, string) (*workflow.Prep, error) { return &workflow.Prep{}, nil }
func (nop) Finish(*jobtx.Tx, string, *response.Answer, map[string]any) (*workflow.Outcome, error) {
	return &workflow.Outcome{}, nil
}

func TestAddRegistersEachEffectOnce(t *testing.T) {
	r := effect.Registry{}
	effect.Add(r, map[string]nop{"a.one": {"1"}, "a.two": {"2"}})
	effect.Add(r, map[string]*nop{"b.one": {"3"}})
	if len(r) != 3 || r["a.two"].(nop).name != "2" || r["b.one"].(*nop).name != "3" {
		t.Fatalf("registry %v", r)
	}
	defer func() {
		if recover() == nil {
			t.Errorf("a second effect named a.one was accepted")
		}
		if r["a.one"].(nop).name != "1" {
			t.Errorf("a.one was replaced")
		}
	}()
	effect.Add(r, map[string]nop{"a.one": {"4"}})
}
