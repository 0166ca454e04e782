package daemon

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A killed daemon's metering folder is removed by the next daemon's start;
// a live proxy's, and one too young to judge, are left alone.
func TestSweepMeterDirsRemovesOnlyStoppedProxies(t *testing.T) {
	tmp := socketTempDir(t)
	t.Setenv("TMPDIR", tmp)
	hermetic(t, tmp)
	old := time.Now().Add(-2 * meterDirGrace)
	mk := func(name string, listen, keep bool, mtime time.Time) string {
		t.Helper()
		dir := filepath.Join(tmp, meterDirPrefix+name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if listen {
			ln, err := net.Listen("unix", filepath.Join(dir, "meter.sock"))
			if err != nil {
				t.Fatal(err)
			}
			if keep {
				t.Cleanup(func() { _ = ln.Close() })
			} else {
				// The socket file stays; nothing listens on it any more,
				// as after a SIGKILL.
				ln.(*net.UnixListener).SetUnlinkOnClose(false)
				_ = ln.Close()
			}
		}
		if err := os.Chtimes(dir, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	killed := mk("killed", true, false, old)
	neverBound := mk("neverbound", false, false, old)
	live := mk("live", true, true, old)
	young := mk("young", false, false, time.Now())
	other := filepath.Join(tmp, "not-a-meter-dir")
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}

	log := slog.New(slog.NewJSONHandler(io.Discard, nil))
	if n := sweepMeterDirs(log, time.Now()); n != 2 {
		t.Errorf("removed %d folders, want 2", n)
	}
	for _, dir := range []string{killed, neverBound} {
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("%s: stale folder left (%v)", filepath.Base(dir), err)
		}
	}
	for _, dir := range []string{live, young, other} {
		if _, err := os.Lstat(dir); err != nil {
			t.Errorf("%s: removed, want it kept (%v)", filepath.Base(dir), err)
		}
	}
	if _, err := net.Dial("unix", filepath.Join(live, "meter.sock")); err != nil {
		t.Errorf("the live proxy's socket no longer answers: %v", err)
	}
}

// startMeter sweeps before it makes its own folder.
func TestStartMeterSweepsStoppedProxies(t *testing.T) {
	tmp := socketTempDir(t)
	t.Setenv("TMPDIR", tmp)
	hermetic(t, tmp)
	stale := filepath.Join(tmp, meterDirPrefix+"stale")
	if err := os.Mkdir(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * meterDirGrace)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	m, err := startMeter(slog.New(slog.NewJSONHandler(io.Discard, nil)), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("stale folder left by startMeter (%v)", err)
	}
	m.close()
	if _, err := os.Lstat(m.dir); !os.IsNotExist(err) {
		t.Errorf("close left its own folder (%v)", err)
	}
}

// socketTempDir is a temporary folder short enough for the sockets the
// tests bind in its children: t.TempDir's path carries the test's name,
// and under a TMPDIR of 18 bytes or so a socket's path in it went past the
// 107 bytes a unix socket's may have.
func socketTempDir(t *testing.T) string {
	d, err := os.MkdirTemp("", "lm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// hermetic keeps the fallback folder to the test's own.
func hermetic(t *testing.T, dir string) {
	old := meterFallback
	meterFallback = dir
	t.Cleanup(func() { meterFallback = old })
}

// A $TMPDIR too deep for a socket's path falls back to the short folder;
// when that is too deep as well, the error says what to do.
func TestMeterDirFallsBackWhenTMPDIRIsTooDeep(t *testing.T) {
	short := socketTempDir(t)
	deep := filepath.Join(short, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", deep)
	hermetic(t, short)
	m, err := startMeter(slog.New(slog.NewJSONHandler(io.Discard, nil)), "")
	if err != nil {
		t.Fatalf("startMeter with a deep TMPDIR: %v", err)
	}
	defer m.close()
	if filepath.Dir(m.dir) != short {
		t.Errorf("runtime folder %s, want it in %s", m.dir, short)
	}
	if c, err := net.Dial("unix", m.socket); err != nil {
		t.Errorf("socket %s: %v", m.socket, err)
	} else {
		_ = c.Close()
	}

	hermetic(t, deep)
	if _, err := makeMeterDir(); err == nil || !strings.Contains(err.Error(), "TMPDIR") {
		t.Errorf("both folders too deep: err = %v, want one that names TMPDIR", err)
	}
}
