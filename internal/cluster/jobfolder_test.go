package cluster

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/logist/logist/internal/clusterstore"
	"github.com/logist/logist/internal/history"
	"github.com/logist/logist/internal/jobstore"
	"github.com/logist/logist/internal/lifecycle"
)

// jobFolder writes a job's folder: job.json and files (by relative path).
func jobFolder(t *testing.T, dir string, manifest []byte, files map[string]string) string {
	t.Helper()
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return drop(t, dir, jobstore.ManifestFile, manifest)
}

// TestReadJobFolder: a job.json's folder goes with it — its files at any
// depth, not its workspace or snapshots — and its name is the job id a
// manifest without one takes; a manifest of another name goes alone. A
// symbolic link, a FIFO, a file or a folder over the limits, and a folder
// that has run are refused, each naming the file and why.
func TestReadJobFolder(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "my-game")
	path := jobFolder(t, dir, scripted("g", 1), map[string]string{
		"scenario.json": "{}", "prompts/worker.md": "Be brief.", "workspace/seed.txt": "no", "snapshots/x": "no"})
	drop(t, filepath.Dir(dir), "lone.json", scripted("lone", 1))
	jf, err := ReadJobFolder(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(jf.Files)); !slices.Equal(got, []string{"prompts/worker.md", "scenario.json"}) {
		t.Fatalf("files %v", got)
	}
	if string(jf.Files["prompts/worker.md"]) != "Be brief." || jf.Fallback != "my-game" || !bytes.Equal(jf.Manifest, scripted("g", 1)) {
		t.Fatalf("read %+v", jf)
	}
	if lone, err := ReadJobFolder(filepath.Join(filepath.Dir(dir), "lone.json")); err != nil || lone.Files != nil || lone.Fallback != "lone" {
		t.Fatalf("a manifest of another name: %+v %v", lone, err)
	}

	refused := func(name string, prepare func(dir string), want string) {
		t.Helper()
		d := filepath.Join(t.TempDir(), name)
		p := jobFolder(t, d, scripted("r", 1), map[string]string{"scenario.json": "{}"})
		prepare(d)
		_, err := ReadJobFolder(p)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, want)
		}
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	refused("symlink", func(d string) {
		if err := os.Symlink(outside, filepath.Join(d, "notes.md")); err != nil {
			t.Fatal(err)
		}
	}, "notes.md: a symbolic link")
	refused("symlinked-folder", func(d string) {
		if err := os.Symlink(filepath.Dir(outside), filepath.Join(d, "more")); err != nil {
			t.Fatal(err)
		}
	}, "more: a symbolic link")
	refused("fifo", func(d string) {
		if err := syscall.Mkfifo(filepath.Join(d, "pipe"), 0o600); err != nil {
			t.Fatal(err)
		}
	}, "pipe: not a regular file")
	refused("big", func(d string) {
		if err := os.WriteFile(filepath.Join(d, "big.bin"), make([]byte, MaxFolderFile+1), 0o600); err != nil {
			t.Fatal(err)
		}
	}, "big.bin: larger than")
	refused("total", func(d string) {
		for _, n := range []string{"a", "b", "c", "d", "e"} {
			if err := os.WriteFile(filepath.Join(d, n), make([]byte, MaxFolderFile), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}, "hold more than")
	refused("ran", func(d string) {
		if err := os.WriteFile(history.Path(d), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}, "it has run already")
}

// TestSubmitJobFolder: a job folder submitted to the cluster stores its
// files with the job; under an idempotency key the same folder again is a
// repeat, the same manifest with another file a conflict. A node that
// claims the job writes the files into its folder before running it.
func TestSubmitJobFolder(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "folder-job")
	m := bytes.Replace(scripted("folder-job", 1), []byte(`"agents": {`), []byte(`"prompts": {"worker": "prompts/worker.md"}, "agents": {`), 1)
	path := jobFolder(t, dir, m, map[string]string{"prompts/worker.md": "PROMPT-MARKER: be brief.", "notes/a.txt": "a"})
	jf, err := ReadJobFolder(path)
	if err != nil {
		t.Fatal(err)
	}
	if id, repeat, err := SubmitKeyed(ctx, s, "sub-1", jf); err != nil || repeat || id != "folder-job" {
		t.Fatalf("submit: %s %v %v", id, repeat, err)
	}
	if _, repeat, err := SubmitKeyed(ctx, s, "sub-1", jf); err != nil || !repeat {
		t.Fatalf("the same folder again: repeat %v, %v", repeat, err)
	}
	other := *jf
	other.Files = maps.Clone(jf.Files)
	other.Files["notes/a.txt"] = []byte("b")
	if _, _, err := SubmitKeyed(ctx, s, "sub-1", &other); !errors.Is(err, clusterstore.ErrIdempotency) {
		t.Fatalf("another file with the key: %v, want ErrIdempotency", err)
	}
	if _, _, err := SubmitKeyed(ctx, s, "", &other); !errors.Is(err, clusterstore.ErrExists) {
		t.Fatalf("the job again without a key: %v, want ErrExists", err)
	}
	files, err := s.Files(ctx, "folder-job")
	if err != nil || string(files["notes/a.txt"]) != "a" || string(files["prompts/worker.md"]) != "PROMPT-MARKER: be brief." {
		t.Fatalf("stored files %v %v", files, err)
	}

	n := newNode(t, s, "n1", time.Minute)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(runCtx) })
	waitAll(t, s, 1, func(j *clusterstore.Job) bool { return j.Status == lifecycle.Success }, 60*time.Second)
	stop()
	wg.Wait()
	if b, err := os.ReadFile(filepath.Join(n.Dir, "folder-job", "notes", "a.txt")); err != nil || string(b) != "a" {
		t.Fatalf("the node's folder lacks notes/a.txt: %q %v", b, err)
	}
	if !promptSeen(t, s, "folder-job", "PROMPT-MARKER") {
		t.Fatal("the worker's call did not have the prompt file's text")
	}
}

// promptSeen says whether an intent of job id carried marker in its
// system prompt (a prompt file read from the job's folder).
func promptSeen(t *testing.T, s clusterstore.Store, id, marker string) bool {
	t.Helper()
	for _, e := range records(t, s, id) {
		if e.Type == history.TypeIntent && e.Request != nil && strings.Contains(e.Request.SystemPrompt, marker) {
			return true
		}
	}
	return false
}

// TestIntakeJobFolder: a job's folder dropped into a node's intake folder
// is submitted with its files and removed whole; the same folder dropped
// again is a drop taken already (removed), one with another file beside
// the same manifest a conflict (left in place).
func TestIntakeJobFolder(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	n := newNode(t, s, "n1", 0)
	n.IntakeDir = t.TempDir()
	noID := bytes.Replace(scripted("x", 1), []byte(`"job_id": "x",`), nil, 1)
	jobFolder(t, filepath.Join(n.IntakeDir, "dropped"), noID, map[string]string{"scenario.json": "{}"})
	n.intake(ctx, map[string]string{})
	if exists(filepath.Join(n.IntakeDir, "dropped")) {
		t.Fatal("the submitted folder was left in the intake folder")
	}
	files, err := s.Files(ctx, "dropped")
	if err != nil || string(files["scenario.json"]) != "{}" {
		t.Fatalf("job dropped (named after its folder): files %v %v", files, err)
	}
	jobFolder(t, filepath.Join(n.IntakeDir, "dropped"), noID, map[string]string{"scenario.json": "{}"})
	n.intake(ctx, map[string]string{})
	if exists(filepath.Join(n.IntakeDir, "dropped")) {
		t.Fatal("the same folder dropped again was left in place")
	}
	jobFolder(t, filepath.Join(n.IntakeDir, "dropped"), noID, map[string]string{"scenario.json": `{"x": 1}`})
	problems := map[string]string{}
	n.intake(ctx, problems)
	if !exists(filepath.Join(n.IntakeDir, "dropped", "scenario.json")) || !strings.Contains(problems["dropped"], "another manifest or other files") {
		t.Fatalf("the same manifest with another file: problems %v", problems)
	}
	if files, err := s.Files(ctx, "dropped"); err != nil || string(files["scenario.json"]) != "{}" {
		t.Fatalf("the conflicting drop changed the job's files: %v %v", files, err)
	}
}

// TestCronRunHasTemplateFiles: a schedule's template submitted with a
// file beside it (its worker's prompt) fires runs that have the file: the
// run's files are the template's, and a node running it reads the prompt
// from its folder.
func TestCronRunHasTemplateFiles(t *testing.T) {
	s, _ := openStore(t)
	ctx := context.Background()
	m := bytes.Replace(templateWith("tpl", "Allow", ""), []byte(`"agents": {`), []byte(`"prompts": {"worker": "prompts/worker.md"}, "agents": {`), 1)
	path := jobFolder(t, filepath.Join(t.TempDir(), "tpl"), m, map[string]string{"prompts/worker.md": "TEMPLATE-PROMPT: be brief."})
	jf, err := ReadJobFolder(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := SubmitKeyed(ctx, s, "", jf); err != nil {
		t.Fatal(err)
	}
	at := cronNodes(t, s, 2)
	t0 := time.Date(2026, 11, 26, 3, 0, 30, 0, time.UTC)
	at(t0)
	at(t0.Add(31 * time.Second))
	runs := runsOf(t, s, "tpl")
	if len(runs) != 1 {
		t.Fatalf("runs %v, want one", ids(runs))
	}
	files, err := s.Files(ctx, runs[0].ID)
	if err != nil || string(files["prompts/worker.md"]) != "TEMPLATE-PROMPT: be brief." {
		t.Fatalf("the run's files %v %v", files, err)
	}
	n := newNode(t, s, "runner", time.Minute)
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(runCtx) })
	waitAll(t, s, 2, func(j *clusterstore.Job) bool { return j.Template || j.Status == lifecycle.Success }, 60*time.Second)
	stop()
	wg.Wait()
	if !promptSeen(t, s, runs[0].ID, "TEMPLATE-PROMPT") {
		t.Fatal("the run's worker did not have the template's prompt file")
	}
}
