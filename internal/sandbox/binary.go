package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"syscall"
)

// HelperName is the file name of the sandbox's own binary
// (internal/sandbox/logist-sandbox): the launcher and the in-sandbox
// helper without the rest of logistd, installed next to it. Its start
// pays only this package's inits, not the daemon's (docs/performance.md).
const HelperName = "logist-sandbox"

// Binary is the binary the launcher and the in-sandbox helper run from.
type Binary struct {
	Path string
	// Separate: Path is HelperName next to this process's executable;
	// otherwise it is this executable, and Why says why not the helper.
	Separate bool
	Why      string
}

// ownBinary is resolved once per process: a helper installed or removed
// while the daemon runs changes nothing until its restart, which logs
// the choice (OwnBinary).
var ownBinary = sync.OnceValues(resolveBinary)

// OwnBinary is the binary this process's sandboxed calls run their
// launcher and helper from (Local without Self): HelperName beside this
// executable when it is there and trusted as much as this executable,
// otherwise this executable itself. Helper must have run in this process.
func OwnBinary() (Binary, error) {
	if !hooked.Load() {
		return Binary{}, errors.New("sandbox: this binary does not call sandbox.Helper first thing in main (or TestMain), so it cannot run sandboxed calls")
	}
	return ownBinary()
}

func resolveBinary() (Binary, error) {
	p, err := os.Executable()
	if err != nil {
		return Binary{}, fmt.Errorf("sandbox: own executable: %w", err)
	}
	exe, err := filepath.EvalSymlinks(p)
	if err != nil {
		return Binary{}, fmt.Errorf("sandbox: own executable: %w", err)
	}
	helper, why := trustedHelper(filepath.Join(filepath.Dir(exe), HelperName), exe)
	if why != "" {
		return Binary{Path: exe, Why: why}, nil
	}
	return Binary{Path: helper, Separate: true}, nil
}

// trustedHelper resolves the helper at p and says why it is not to be
// used ("" when it is): it runs every call's sandbox with the daemon's
// rights, so it must be a regular executable file that only the owner of
// the daemon's own executable can change. Falling back to that executable
// is always safe: it holds the same code.
func trustedHelper(p, exe string) (string, string) {
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", "no " + HelperName + " beside " + exe
		}
		return "", err.Error()
	}
	if target == exe {
		return "", target + " is this executable"
	}
	var st, own syscall.Stat_t
	if err := syscall.Stat(target, &st); err != nil {
		return "", err.Error()
	}
	if err := syscall.Stat(exe, &own); err != nil {
		return "", err.Error()
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return "", target + " is not a regular file"
	case st.Mode&0o111 == 0:
		return "", target + " is not executable"
	case st.Mode&0o022 != 0:
		return "", target + " is writable by its group or others"
	case st.Uid != own.Uid:
		return "", fmt.Sprintf("%s is owned by uid %d, %s by uid %d", target, st.Uid, exe, own.Uid)
	}
	return target, ""
}

// protocolRevision is raised whenever what a plan's fields mean changes
// without its fields changing: the launcher runs only plans of its own
// protocol (planProtocol).
const protocolRevision = 1

// planProtocol names the plan's format: protocolRevision and the plan's
// fields, names, types and JSON tags, nested ones included. The daemon
// puts it in every plan and a launcher refuses a plan of another: a
// logist-sandbox left from another build than logistd's would otherwise
// ignore a field it does not know, and could run a call less contained
// than planned.
var planProtocol = sync.OnceValue(func() string {
	h := sha256.New()
	fmt.Fprintf(h, "%d\n", protocolRevision)
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		fmt.Fprintf(h, "%s{", t.Name())
		for i := range t.NumField() {
			f := t.Field(i)
			fmt.Fprintf(h, "%s %s %q;", f.Name, f.Type, f.Tag)
		}
		fmt.Fprint(h, "}\n")
		for i := range t.NumField() {
			walk(t.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[plan]())
	return hex.EncodeToString(h.Sum(nil))[:16]
})
