package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/logist/logist/internal/manifest"
)

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// The pruning empties a dropped request file into the pool, and a later
// call's request file is that very inode (no new one), with exactly its
// own body.
func TestRequestFilesAreRecycled(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	long := bytes.Repeat([]byte("x"), 5000)
	for n := range KeepRequests + 3 {
		if err := WriteRequest(job, n, long); err != nil {
			t.Fatal(err)
		}
	}
	old := inode(t, RequestFile(job, 1))
	if _, err := PruneRequests(job); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(RequestFile(job, 1)); !os.IsNotExist(err) {
		t.Fatalf("call 1's request file was kept: %v", err)
	}
	pool, _ := os.ReadDir(filepath.Join(job, "requests", FreeDir))
	if len(pool) != 3 {
		t.Fatalf("pool holds %d files, want the 3 pruned", len(pool))
	}
	for _, e := range pool {
		if fi, _ := e.Info(); fi.Size() != 0 {
			t.Errorf("pooled file %s holds %d bytes: a pruned request stays in the clear", e.Name(), fi.Size())
		}
	}
	n := 1 + 2*KeepRequests // slot 1's call
	if err := WriteRequest(job, n, []byte(`{"short":true}`)); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, RequestFile(job, n)); got != old {
		t.Errorf("call %d's request file is inode %d, want the pooled %d", n, got, old)
	}
	if b, _ := os.ReadFile(RequestFile(job, n)); string(b) != `{"short":true}` {
		t.Errorf("recycled request file holds %q", b)
	}
	if _, err := os.Lstat(freeSlot(job, n)); !os.IsNotExist(err) {
		t.Errorf("the slot still holds a file after it was taken: %v", err)
	}
}

// A request file another name links to (an uncontained agent's hard link
// in its workspace) is removed, not emptied: the other name keeps it.
func TestPruningKeepsLinkedRequestsWhole(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	for n := range KeepRequests + 1 {
		if err := WriteRequest(job, n, []byte(`{"n":"request"}`)); err != nil {
			t.Fatal(err)
		}
	}
	kept := filepath.Join(job, "kept.json")
	if err := os.Link(RequestFile(job, 0), kept); err != nil {
		t.Fatal(err)
	}
	if _, err := PruneRequests(job); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(kept); string(b) != `{"n":"request"}` {
		t.Errorf("the linked copy holds %q", b)
	}
	if _, err := os.Lstat(freeSlot(job, 0)); !os.IsNotExist(err) {
		t.Errorf("a linked file was pooled: %v", err)
	}
	if _, err := os.Lstat(RequestFile(job, 0)); !os.IsNotExist(err) {
		t.Errorf("call 0's request file was kept: %v", err)
	}
}

// A request file that exists (a predicted call's, which its spare sandbox
// binds by inode) is written in place, never replaced by a pooled one.
func TestRecyclingNeverReplacesARequestFile(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	for n := range KeepRequests + 1 {
		if err := WriteRequest(job, n, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := PruneRequests(job); err != nil {
		t.Fatal(err)
	}
	n := 2 * KeepRequests // slot 0, which holds call 0's file
	if err := os.WriteFile(RequestFile(job, n), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bound := inode(t, RequestFile(job, n))
	if err := WriteRequest(job, n, []byte(`{"x":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, RequestFile(job, n)); got != bound {
		t.Errorf("request file replaced: inode %d, want %d", got, bound)
	}
	if _, err := os.Lstat(freeSlot(job, n)); err != nil {
		t.Errorf("the pooled file was used up: %v", err)
	}
}

// The pool never holds more than KeepRequests files: what a taken slot
// cannot hold is removed.
func TestThePoolIsBounded(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	for round := range 4 {
		for n := round * 3 * KeepRequests; n < (round+1)*3*KeepRequests; n++ {
			// Files made without WriteRequest: the pool is not drawn on.
			if err := os.MkdirAll(filepath.Join(job, "requests"), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(RequestFile(job, n), []byte("{}"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := PruneRequests(job); err != nil {
			t.Fatal(err)
		}
		pool, _ := os.ReadDir(filepath.Join(job, "requests", FreeDir))
		if len(pool) > KeepRequests {
			t.Fatalf("round %d: the pool holds %d files", round, len(pool))
		}
	}
}

// A predicted call's empty request file (made for its spare sandbox to
// bind) is a pooled one where its slot holds one, and goes with the
// prediction's undo like a new one.
func TestPredictedRequestFileIsPooled(t *testing.T) {
	t.Parallel()
	job := t.TempDir()
	ws := filepath.Join(job, "workspace")
	if err := os.Mkdir(ws, 0o700); err != nil {
		t.Fatal(err)
	}
	for n := range KeepRequests + 1 {
		if err := WriteRequest(job, n, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	pooled := inode(t, RequestFile(job, 0))
	if _, err := PruneRequests(job); err != nil {
		t.Fatal(err)
	}
	next := 2 * KeepRequests // slot 0
	c := &Command{Cfg: manifest.Command{Argv: []string{"sh", "-c", "true"}}, Getenv: pathOnly}
	req := &Request{JobID: "j", Phase: "work", Role: "worker", Workspace: ws, JobDir: job, Interaction: next - 1,
		Next: &NextCall{Provider: c, Phase: "work", Role: "worker"}}
	spec, undo, ok := nextCommandRun(req)
	if !ok || spec.Interaction != next {
		t.Fatalf("no prediction of call %d: %+v", next, spec)
	}
	if got := inode(t, RequestFile(job, next)); got != pooled {
		t.Errorf("predicted request file is inode %d, want the pooled %d", got, pooled)
	}
	undo()
	if _, err := os.Lstat(RequestFile(job, next)); !os.IsNotExist(err) {
		t.Errorf("the prediction's request file outlived its undo: %v", err)
	}
}
