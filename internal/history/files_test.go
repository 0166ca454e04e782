package history

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestIsFile(t *testing.T) {
	for _, name := range []string{"history.jsonl", "history-index.json", "jobHistory.json", "history-000001.jsonl",
		"history-000042.jsonl.gz", "history-1000000.jsonl.gz", ".history-000001.jsonl.gz.tmp", ".history-index.json.tmp-12345",
		".jobHistory.json.tmp-9"} {
		if !IsFile(name) {
			t.Errorf("IsFile(%q) = false", name)
		}
	}
	for _, name := range []string{"job.json", "history", "history-notes.md", "history-1.jsonl", "notes.gz", "history.jsonl.bak",
		"xhistory.jsonl", "history-000001.jsonl.gz.old", ".history.jsonl.swp", "requests", "workspace"} {
		if IsFile(name) {
			t.Errorf("IsFile(%q) = true", name)
		}
	}
}

func TestFilesListsTheRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if fs, err := Files(filepath.Join(dir, "none")); err != nil || fs != nil {
		t.Fatalf("no folder: %v, %v", fs, err)
	}
	l, _, err := OpenWith(dir, Options{MaxBytes: 600})
	if err != nil {
		t.Fatal(err)
	}
	appendN(t, l, 12)
	l.Close()
	if err := WriteJobHistory(dir, "j", "", ""); err != nil {
		t.Fatal(err)
	}
	for _, other := range []string{"job.json", "notes.md"} {
		if err := os.WriteFile(filepath.Join(dir, other), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"history-000001.jsonl.gz", "history-000002.jsonl.gz", "history-index.json", "history.jsonl", "jobHistory.json"}
	if !slices.Equal(got[:2], want[:2]) || !slices.Equal(got[len(got)-3:], want[2:]) || !slices.IsSorted(got) {
		t.Fatalf("Files = %v, want archives from %v", got, want)
	}
	for _, f := range got {
		if !IsFile(f) {
			t.Errorf("%s listed but not IsFile", f)
		}
	}
}

// Present tells a history with records (or one a rotation is moving) from
// none or an empty one, without reading it: the scheduler's check before
// starting a new history over a job's recorded work.
func TestPresent(t *testing.T) {
	t.Parallel()
	recs := func(t *testing.T, dir string) {
		l, _, err := OpenWith(dir, Options{MaxBytes: -1})
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, l, 2)
		l.Close()
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  bool
	}{
		{"no history", func(t *testing.T, dir string) {}, false},
		{"records", recs, true},
		{"empty active file", func(t *testing.T, dir string) {
			if err := os.WriteFile(Path(dir), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"empty after a rotation", func(t *testing.T, dir string) {
			if err := os.WriteFile(Path(dir), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"archives": []}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"rotation cut short", func(t *testing.T, dir string) {
			recs(t, dir)
			if err := os.Rename(Path(dir), filepath.Join(dir, archiveName(1))); err != nil {
				t.Fatal(err)
			}
		}, true},
		{"active file deleted after a rotation", func(t *testing.T, dir string) {
			if err := os.WriteFile(filepath.Join(dir, IndexFile), []byte(`{"archives": []}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			c.setup(t, dir)
			if got, err := Present(dir); err != nil || got != c.want {
				t.Fatalf("Present = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	t.Run("unreadable", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := Present(file); err == nil || got || !strings.Contains(err.Error(), "stat history") {
			t.Fatalf("a file for a folder: %v, %v", got, err)
		}
	})
}
