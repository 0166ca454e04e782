package sandbox

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

var (
	helperOnce sync.Once
	helperPath string
	helperErr  error
)

// helperBinary builds the real logist-sandbox (./logist-sandbox) once per
// test binary, beside the attacker (a folder the escape suite's
// unprivileged daemon user may enter).
func helperBinary(t testing.TB) string {
	attacker(t)
	helperOnce.Do(func() {
		helperPath = filepath.Join(attackerDir, HelperName)
		cmd := exec.Command("go", "build", "-o", helperPath, "./logist-sandbox")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // as make build links it
		if out, err := cmd.CombinedOutput(); err != nil {
			helperErr = errors.New("build " + HelperName + ": " + err.Error() + ": " + string(out))
		}
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	return helperPath
}

// binaries are the helper binaries the contained-call tests run each
// call through: this test binary re-executed (what a binary with
// sandbox.Helper in main does without a logist-sandbox beside it), and
// the real logist-sandbox.
func binaries(t testing.TB) []struct{ name, self string } {
	return []struct{ name, self string }{{"", ""}, {"-" + HelperName, helperBinary(t)}}
}

// TestHelperBinaryChoice: logistd takes logist-sandbox beside its
// executable only when it is a regular executable file that only the
// owner of logistd's executable can change, and otherwise runs itself.
func TestHelperBinaryChoice(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "logistd")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, HelperName)
	put := func(mode os.FileMode) {
		t.Helper()
		_ = os.RemoveAll(helper)
		if err := os.WriteFile(helper, []byte("#!/bin/sh\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(helper, mode); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, wantSeparate bool, wantWhy string) {
		t.Helper()
		p, why := trustedHelper(helper, exe)
		if got := why == ""; got != wantSeparate || !strings.Contains(why, wantWhy) {
			t.Errorf("%s: helper %q, why not %q; want separate=%v (why containing %q)", what, p, why, wantSeparate, wantWhy)
		}
		if wantSeparate && p == "" {
			t.Errorf("%s: no path", what)
		}
	}
	check("absent", false, "no "+HelperName)
	put(0o755)
	check("installed", true, "")
	put(0o644)
	check("not executable", false, "not executable")
	put(0o775)
	check("group-writable", false, "writable")
	put(0o757)
	check("writable by others", false, "writable")
	_ = os.Remove(helper)
	if err := os.Mkdir(helper, 0o755); err != nil {
		t.Fatal(err)
	}
	check("a folder", false, "not a regular file")
	_ = os.Remove(helper)
	real := filepath.Join(t.TempDir(), "real-helper")
	if err := os.WriteFile(real, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, helper); err != nil {
		t.Fatal(err)
	}
	if p, why := trustedHelper(helper, exe); p != real || why != "" {
		t.Errorf("a link to a trusted file: %q (%q), want its target %s", p, why, real)
	}
	if os.Getuid() == 0 {
		put(0o755)
		if err := os.Chown(helper, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		check("another owner", false, "owned by uid")
	}
}

// TestHelperBinaryRefusesPlanOfAnotherBuild: a launcher handed a plan of
// another protocol (a logist-sandbox left from another build than the
// daemon's) runs nothing and says why in the call's result.
func TestHelperBinaryRefusesPlanOfAnotherBuild(t *testing.T) {
	for _, b := range binaries(t) {
		self := b.self
		if self == "" {
			self, _ = os.Executable()
		}
		spec := shSpec(t, "touch ran")
		spec.Layer = LayerNone
		if err := os.MkdirAll(spec.CallDir, 0o700); err != nil {
			t.Fatal(err)
		}
		p, err := makePlan(&spec, LayerNone, tools{self: self}, currentView())
		if err != nil {
			t.Fatal(err)
		}
		if p.Protocol != planProtocol() || p.Protocol == "" {
			t.Fatalf("plan protocol %q, want %q", p.Protocol, planProtocol())
		}
		p.Protocol = "another-build"
		body, _ := json.Marshal(p)
		cmd := exec.Command(self, verbLaunch)
		cmd.Stdin = bytes.NewReader(body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("launcher%s: %v: %s", b.name, err, out)
		}
		r, err := readResult(spec.CallDir)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != OutcomeStartFailed || !strings.Contains(r.Error, "not from the same build") {
			t.Errorf("launcher%s: %s %q, want start_failed naming another build", b.name, r.Outcome, r.Error)
		}
		if _, err := os.Stat(filepath.Join(spec.Dir, "ran")); err == nil {
			t.Errorf("launcher%s ran the program of a plan of another build", b.name)
		}
	}
}

// TestHelperBinaryRunsCalls: the real logist-sandbox runs a call under
// every layer this host has (and none), and refuses to run by hand.
func TestHelperBinaryRunsCalls(t *testing.T) {
	bin := helperBinary(t)
	for _, layer := range append(layers(t), LayerNone) {
		spec := shSpec(t, "echo hello")
		spec.Layer = layer
		r, err := Run(context.Background(), &Local{Self: bin}, spec)
		if err != nil {
			t.Fatal(err)
		}
		if r.Outcome != OutcomeExited || r.ExitCode != 0 || !strings.HasPrefix(string(r.Stdout), "hello\n") {
			t.Errorf("%s: %+v stdout %q stderr %q", layer, r, r.Stdout, r.Stderr)
		}
	}
	out, err := exec.Command(bin).CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "not for use by hand") {
		t.Errorf("%s without a verb: %v %q, want exit 2 and a word of why", HelperName, err, out)
	}
}

// TestHelperLinkedStatically: make build links logist-sandbox without
// cgo, as helperBinary does for these tests, so that none of its two
// starts per sandboxed call pays the dynamic loader and cgo's start (about
// 1 ms of CPU each on the bench machine, docs/performance.md).
func TestHelperLinkedStatically(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(mk), "\n") {
		if strings.Contains(l, "-o bin/"+HelperName+" ") {
			line = l
		}
	}
	if !strings.Contains(line, "CGO_ENABLED=0 ") {
		t.Errorf("Makefile builds bin/%s with %q, want CGO_ENABLED=0", HelperName, strings.TrimSpace(line))
	}
	f, err := elf.Open(helperBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() //nolint:errcheck // read only
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s has an ELF interpreter (dynamically linked): want it static", HelperName)
		}
	}
}
