package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Check is whether one layer works on this host: what was found, or why
// it does not work.
type Check struct {
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"` // what works (version, features)
	Why    string `json:"why,omitempty"`    // what is missing
}

// Status is which layers work on this host.
type Status struct {
	Bwrap    Check `json:"bwrap"`
	Landlock Check `json:"landlock"`
	// BwrapPath is the bubblewrap found on PATH; LandlockABI the kernel's
	// Landlock ABI version (0: none).
	BwrapPath   string `json:"bwrap_path,omitempty"`
	LandlockABI int    `json:"landlock_abi"`
}

var probeOnce = sync.OnceValue(ProbeNow)

// Probe is ProbeNow, done once per process (a host's kernel and packages
// do not change under a running daemon; restart it after installing
// bubblewrap).
func Probe() *Status { return probeOnce() }

// ProbeNow finds which layers work: bwrap by starting a real sandbox with
// the namespaces every call uses, Landlock by asking the kernel for its
// ABI and creating a ruleset.
func ProbeNow() *Status {
	s := &Status{}
	s.Bwrap = probeBwrap(s)
	s.Landlock = probeLandlock(s)
	return s
}

func probeBwrap(s *Status) Check {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		return Check{Why: "bwrap not installed (Debian and Ubuntu: apt-get install bubblewrap)"}
	}
	s.BwrapPath = path
	version := ""
	if out, err := exec.Command(path, "--version").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	}
	truePath, err := exec.LookPath("true")
	if err != nil || !underSystem(truePath) {
		truePath = "/usr/bin/true"
	}
	args := append(nsArgs(NetNone, false), systemArgs(currentView())...)
	args = append(args, "--tmpfs", "/tmp", "--", truePath)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Stderr = &stderr
	cmd.Env = []string{}
	if err := cmd.Run(); err != nil {
		why := fmt.Sprintf("bwrap cannot create its sandbox: %v: %s", err, strings.TrimSpace(stderr.String()))
		if v := readSysctl("/proc/sys/user/max_user_namespaces"); v == "0" {
			why = "user namespaces disabled: /proc/sys/user/max_user_namespaces = 0"
		} else if v := readSysctl("/proc/sys/kernel/unprivileged_userns_clone"); v == "0" && os.Getuid() != 0 {
			why = "unprivileged user namespaces disabled: /proc/sys/kernel/unprivileged_userns_clone = 0"
		} else if v := readSysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"); v == "1" && os.Getuid() != 0 {
			why += " (AppArmor restricts unprivileged user namespaces: /proc/sys/kernel/apparmor_restrict_unprivileged_userns = 1; give bwrap an AppArmor profile that allows userns)"
		}
		return Check{Why: why}
	}
	return Check{OK: true, Detail: fmt.Sprintf("%s at %s: user, pid, mount, ipc, uts, cgroup and net namespaces", version, path)}
}

func probeLandlock(s *Status) Check {
	abi, err := ll.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return Check{Why: "landlock not supported by kernel (no landlock system calls; needs Linux 5.13 or later built with CONFIG_SECURITY_LANDLOCK)"}
	case errors.Is(err, syscall.EOPNOTSUPP):
		return Check{Why: "landlock disabled at boot (add landlock to the kernel's lsm= parameter)"}
	case err != nil:
		return Check{Why: fmt.Sprintf("landlock: %v", err)}
	case abi < landlockMin:
		return Check{Why: "landlock not supported by kernel"}
	}
	s.LandlockABI = abi
	fd, _, err := landlock.V1.NewRulesetFD()
	if err != nil {
		return Check{Why: fmt.Sprintf("landlock ABI %d: cannot create a ruleset: %v", abi, err)}
	}
	_ = syscall.Close(fd) // a probe's ruleset: nothing to lose
	feats := []string{"files"}
	if abi >= landlockNet {
		feats = append(feats, "TCP bind/connect")
	} else {
		feats = append(feats, "no network rules (needs ABI 4): alone it runs only calls that share the host network")
	}
	if abi >= landlockScop {
		feats = append(feats, "signal and abstract-socket scoping")
	}
	if seccompArch != 0 {
		feats = append(feats, "alone: UDP, Multipath TCP, raw sockets (and new unix sockets before ABI 9) refused by a seccomp filter")
	} else if abi < 10 {
		feats = append(feats, "UDP not restricted (needs ABI 10): alone it runs only calls that share the host network")
	}
	return Check{OK: true, Detail: fmt.Sprintf("ABI %d: %s", abi, strings.Join(feats, ", "))}
}

func readSysctl(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// Resolve turns the layer a job asks for into the one it runs under, or
// an error wrapping ErrUnavailable that names what is missing: a sandbox
// is never silently dropped.
func (s *Status) Resolve(want Layer) (Layer, error) {
	switch want {
	case LayerNone:
		return LayerNone, nil
	case LayerBwrap:
		if !s.Bwrap.OK {
			return "", fmt.Errorf("%w: %s", ErrUnavailable, s.Bwrap.Why)
		}
		return LayerBwrap, nil
	case LayerLandlock:
		if !s.Landlock.OK {
			return "", fmt.Errorf("%w: %s", ErrUnavailable, s.Landlock.Why)
		}
		return LayerLandlock, nil
	case LayerAuto, "":
		if s.Bwrap.OK {
			return LayerBwrap, nil
		}
		if s.Landlock.OK {
			return LayerLandlock, nil
		}
		return "", fmt.Errorf("%w: no sandbox layer works on this host: %s; %s (a steward may opt a job out with sandbox \"none\")", ErrUnavailable, s.Bwrap.Why, s.Landlock.Why)
	}
	return "", fmt.Errorf("sandbox: unknown layer %q", want)
}

// Effective names the containment a layer gives on this host, e.g.
// "bwrap+landlock".
func (s *Status) Effective(l Layer) string {
	if l == LayerBwrap && s.Landlock.OK {
		return "bwrap+landlock"
	}
	return string(l)
}
