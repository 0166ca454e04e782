package manifest

import (
	"strings"
	"testing"
)

func TestWorkspaceSource(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{
		`"workspace": {"git": {"repo": "/srv/repos/app"}}`,
		`"workspace": {"git": {"repo": "/srv/repos/app", "ref": "v1.2"}}`,
		`"workspace": {"git": {"repo": "https://example.com/app.git", "ref": "main"}}`,
		`"workspace": {"git": {"repo": "git@example.com:team/app.git"}}`,
		`"workspace": {"copy": "/srv/templates/app"}`,
	} {
		m := decodeOK(t, withFields(ok))
		if m.Workspace == nil || m.IsGit() != strings.Contains(ok, `"git"`) {
			t.Errorf("%s: decoded %+v", ok, m.Workspace)
		}
	}
	for src, want := range map[string]string{
		`"workspace": {"git": {"repo": "repos/app"}}`:                    "/workspace/git/repo",
		`"workspace": {"git": {"repo": "-uhack"}}`:                       "/workspace/git/repo",
		`"workspace": {"git": {"repo": "/r", "ref": "--upload-pack=x"}}`: "/workspace/git/ref",
		`"workspace": {"copy": "relative/folder"}`:                       "/workspace/copy",
		`"workspace": {"git": {"repo": "/r"}, "copy": "/c"}`:             "/workspace",
		`"workspace": {}`:                                        "/workspace",
		`"workspace": {"git": {"ref": "main"}}`:                  "/workspace/git",
		`"workspace": {"git": {"repo": "/r", "branch": "main"}}`: "/workspace/git",
	} {
		_, err := Decode("job.json", []byte(withFields(src)))
		ps := problems(t, err)
		found := false
		for _, p := range ps {
			found = found || strings.HasPrefix(p.Pointer, want)
		}
		if !found {
			t.Errorf("%s: %v, want a problem at %s", src, err, want)
		}
	}
	m := decodeOK(t, withFields(`"workspace": {"git": {"repo": "/r", "ref": "main"}}`))
	if c := m.Clone(); c.Workspace == m.Workspace || c.Workspace.Git == m.Workspace.Git || c.Workspace.Git.Ref != "main" {
		t.Error("Clone shares or loses the workspace")
	}
}

// A git job's id names its branch (logist/ID): an id git would refuse as
// a branch name is refused with the job, not when its workspace is made.
// Another job may take it.
func TestGitJobIDMakesABranch(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"foo.lock", "x.", "v1.2.lock"} {
		src := withFields(`"job_id": "` + id + `", "workspace": {"git": {"repo": "/r", "ref": "main"}}`)
		_, err := Decode("job.json", []byte(src))
		ps := problems(t, err)
		if len(ps) != 1 || ps[0].Pointer != "/job_id" || !strings.Contains(ps[0].Reason, "logist/"+id+" would be a name git refuses") {
			t.Errorf("job id %q: %v", id, err)
		}
		decodeOK(t, withFields(`"job_id": "`+id+`"`))
	}
	decodeOK(t, withFields(`"job_id": "v1.2_fix-login", "workspace": {"git": {"repo": "/r"}}`))
}
