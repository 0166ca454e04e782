package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/logist/logist/internal/lifecycle"
	"github.com/logist/logist/internal/manifest"
	"github.com/logist/logist/internal/testkit"
)

func drop(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// TestFolderIntake: two nodes watch folders of their own. The same job id
// dropped in both with other content is inserted once, and the other file
// is a conflict left in place and reported; the same manifest dropped in
// both is taken once and removed from both; a manifest without job_id
// takes its file's name, as in file mode; an invalid one is left in place
// and reported with file mode's validation error, once; a file still
// being written is left alone.
func TestFolderIntake(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	var logs testkit.SyncBuffer
	nodes := []*Node{newNode(t, s, "n1", 0), newNode(t, s, "n2", 0)}
	for _, n := range nodes {
		n.IntakeDir = filepath.Join(t.TempDir(), "intake")
		if err := os.MkdirAll(n.IntakeDir, 0o700); err != nil {
			t.Fatal(err)
		}
		n.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	}
	in1, in2 := nodes[0].IntakeDir, nodes[1].IntakeDir
	first := scripted("dup", 1)
	other := bytes.Replace(first, []byte("Write greet.py"), []byte("Write hello.py"), 1)
	a := drop(t, in1, "dup.json", first)
	b := drop(t, in2, "dup.json", other)
	same1 := drop(t, in1, "same.json", scripted("same", 1))
	same2 := drop(t, in2, "copy-of-same.json", scripted("same", 1))
	noID := bytes.Replace(scripted("x", 1), []byte(`"job_id": "x",`), nil, 1)
	named := drop(t, in1, "by-name.json", noID)
	invalid := []byte(`{"schema_version": 1, "job_id": "bad", "task_description": 7}`)
	bad := drop(t, in1, "bad.json", invalid)
	partial := drop(t, in2, "partial.json", []byte("  "))

	problems := []map[string]string{{}, {}}
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { n.intake(ctx, problems[i]) })
	}
	wg.Wait()
	for i, n := range nodes {
		n.intake(ctx, problems[i]) // a second look reports nothing again
	}

	js, err := s.Jobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, j := range js {
		ids[j.ID] = true
		if j.Status != lifecycle.Pending {
			t.Errorf("job %s is %s", j.ID, j.Status)
		}
	}
	if len(js) != 3 || !ids["dup"] || !ids["same"] || !ids["by-name"] {
		t.Fatalf("jobs %v, want dup, same and by-name", ids)
	}
	// dup: exactly one file was taken, the other stays as a conflict.
	j, err := s.Job(ctx, "dup")
	if err != nil {
		t.Fatal(err)
	}
	winner, loser := a, b
	if bytes.Equal(j.Manifest, other) {
		winner, loser = b, a
	}
	if exists(winner) || !exists(loser) {
		t.Fatalf("dup: taken file there %v, conflicting file there %v", exists(winner), exists(loser))
	}
	if exists(same1) || exists(same2) || exists(named) {
		t.Fatal("a submitted manifest was left in its intake folder")
	}
	if !exists(bad) || !exists(partial) {
		t.Fatal("an invalid or incomplete manifest was removed")
	}
	out := logs.String()
	if n := strings.Count(out, "already exists in the cluster with another manifest"); n != 1 {
		t.Fatalf("conflict reported %d times, want once:\n%s", n, out)
	}
	// The validation error is file mode's (manifest.Decode's reason).
	_, want := manifest.Decode(bad, invalid)
	if want == nil {
		t.Fatal("the invalid manifest decodes")
	}
	if n := strings.Count(out, `"invalid manifest"`); n != 2 {
		t.Fatalf("%d invalid-manifest lines, want 2 (conflict, invalid):\n%s", n, out)
	}
	quoted, _ := json.Marshal(want.Error())
	if !strings.Contains(out, string(quoted[1:len(quoted)-1])) || !strings.Contains(out, "MANIFEST_INVALID") {
		t.Fatalf("log lacks file mode's error %q:\n%s", want, out)
	}
}
