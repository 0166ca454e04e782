package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A first-time workflow author's mistakes, as logist validate (and
// submit, which validates) report them: each names the file, the field
// (a JSON pointer into the manifest) and what would be right.
func TestValidateNamesWorkflowMistakes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const agents = `"agents": {"worker": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "done"}]}, "supervisor": {"provider": "script", "script": [{"action": "COMPLETED", "summary": "ok"}]}}`
	inline := func(on string, phase string) string {
		return `{"task_description": "t", ` + agents + `, "workflow": {"name": "x", "start": "a", "phases": {"a": {"role": "worker"` + phase + `, "on": {` + on + `}}}}}`
	}
	const fine = `"COMPLETED": "SUCCESS", "RETRY": "a", "STUCK": "INTERVENTION_REQUIRED"`
	cases := []struct {
		name, manifest string
		invalid        bool
		want           []string
	}{
		{"bad-effect", inline(fine, `, "effect": "bogus.effect"`), true,
			[]string{"bad-effect.json: /workflow/phases/a/effect: ", `effect "bogus.effect" is not known`, "protocol.plan", "deliberation.parliament"}},
		{"stuck-to-success", inline(`"COMPLETED": "SUCCESS", "RETRY": "a", "STUCK": "SUCCESS"`, ""), true,
			[]string{"stuck-to-success.json: /workflow/phases/a/on/STUCK: ", "STUCK leads to SUCCESS"}},
		{"retry-to-success", inline(`"COMPLETED": "INTERVENTION_REQUIRED", "RETRY": "SUCCESS", "STUCK": "INTERVENTION_REQUIRED"`, ""), true,
			[]string{"retry-to-success.json: /workflow/phases/a/on/RETRY: ", "RETRY leads to SUCCESS"}},
		{"stuck-to-self", inline(`"COMPLETED": "SUCCESS", "RETRY": "a", "STUCK": "a"`, ""), false,
			[]string{"ok (warning: /workflow/phases/a/on/STUCK: ", "not to INTERVENTION_REQUIRED"}},
		{"canceled", inline(`"COMPLETED": "CANCELED", "RETRY": "a", "STUCK": "INTERVENTION_REQUIRED"`, ""), true,
			[]string{"canceled.json: /workflow/phases/a/on/COMPLETED: ", `unknown phase "CANCELED"`, "SUCCESS, INTERVENTION_REQUIRED"}},
		{"bad-schema", inline(fine, `, "schema": "nope.json"`), true,
			[]string{"bad-schema.json: /workflow/phases/a/schema: ", "protocol-answer-planner.json"}},
		{"prompt-for-nobody", `{"task_description": "t", ` + agents + `, "prompts": {"reviewer": "p.md"}}`, false,
			[]string{"ok (warning: /prompts/reviewer: ", `no role "reviewer"`, "supervisor, worker"}},
	}
	// The prompt file the prompt-for-nobody case names is there: what is
	// warned of is its role, not a missing file (PromptFiles refuses one).
	if err := os.WriteFile(filepath.Join(dir, "p.md"), []byte("You review."), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		f := filepath.Join(dir, c.name+".json")
		if err := os.WriteFile(f, []byte(c.manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		code, out, errs := runMain(t, nil, "validate", f)
		if (code != 0) != c.invalid {
			t.Errorf("%s: validate exit %d, invalid %v:\n%s%s", c.name, code, c.invalid, out, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(out+errs, w) {
				t.Errorf("%s: validate does not say %q:\n%s%s", c.name, w, out, errs)
			}
		}
	}
	// submit warns of what validate warns of (one rule,
	// manifestWarnings), and places the job.
	jobs := t.TempDir()
	code, out, errs := runMain(t, nil, "submit", filepath.Join(dir, "stuck-to-self.json"), "--jobs-dir", jobs)
	if code != 0 || !strings.Contains(errs, "logist: warning: /workflow/phases/a/on/STUCK: ") {
		t.Errorf("submit of a workflow with a warning: exit %d\n%s%s", code, out, errs)
	}
	// submit validates with the same registry: the unknown effect is
	// refused there too, and no job is placed.
	code, out, errs = runMain(t, nil, "submit", filepath.Join(dir, "bad-effect.json"), "--jobs-dir", jobs)
	if code == 0 || !strings.Contains(out+errs, "/workflow/phases/a/effect") {
		t.Errorf("submit of an unknown effect: exit %d\n%s%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(jobs, "bad-effect")); err == nil {
		t.Error("submit placed a job whose effect is unknown")
	}
}
