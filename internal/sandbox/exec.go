package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// execMain is the in-sandbox helper ("__sandbox-exec CONFIG -- PROGRAM [ARG...]"):
// it contains itself and executes the program in its place. Landlock and
// the capability drop restrict the whole process, so they happen here, in
// a process of its own just before exec, never in the daemon. A failure
// before exec is reported on statusFD (and stderr) and the program never
// runs: a call does not go ahead less contained than planned.
func execMain(args []string) int {
	status := os.NewFile(statusFD, "status")
	syscall.CloseOnExec(statusFD)
	fail := func(err error) int {
		if status != nil {
			fmt.Fprintf(status, "%v", err)
		}
		fmt.Fprintf(os.Stderr, "logist-sandbox: %v\n", err)
		return 127
	}
	if len(args) < 2 || args[1] != "--" {
		return fail(errors.New("usage: __sandbox-exec CONFIG -- PROGRAM [ARG...]"))
	}
	var cfg execConfig
	if err := json.Unmarshal([]byte(args[0]), &cfg); err != nil {
		return fail(fmt.Errorf("config: %v", err))
	}
	argv := args[2:]
	env := os.Environ()
	if (len(argv) == 0) != cfg.Spare {
		return fail(errors.New("usage: __sandbox-exec CONFIG -- PROGRAM [ARG...] (a spare's: no program)"))
	}
	if cfg.Listen > 0 {
		if err := handOverListener(cfg.Listen); err != nil {
			return fail(err)
		}
	}
	// A spare makes Landlock's ruleset while it waits for its program
	// (spare.go): under bwrap, whose sandbox has no capabilities left,
	// it opens the same paths it would after dropCaps below.
	ruleset, rulesetFlags := -1, uint32(0)
	if cfg.Spare {
		if cfg.Landlock {
			fd, flags, err := landlockRuleset(&cfg)
			if err != nil {
				return fail(err)
			}
			ruleset, rulesetFlags = fd, flags
		}
		sp, err := awaitProgram()
		if err != nil {
			return fail(err)
		}
		argv, env = sp.Argv, sp.Env
	}
	// Everything below applies to this thread, which then executes the
	// program: it must stay this thread.
	runtime.LockOSThread()
	if err := setLimits(&cfg.Limits, cfg.NprocShared); err != nil {
		return fail(err)
	}
	if err := dropCaps(); err != nil {
		return fail(err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("no_new_privs: %v", err))
	}
	if cfg.SeccompInet || cfg.SeccompUnix {
		if err := installSockFilter(cfg.SeccompInet, cfg.SeccompUnix); err != nil {
			return fail(err)
		}
	}
	if cfg.Landlock && ruleset < 0 {
		fd, flags, err := landlockRuleset(&cfg)
		if err != nil {
			return fail(err)
		}
		ruleset, rulesetFlags = fd, flags
	}
	if ruleset >= 0 {
		err := ll.LandlockRestrictSelf(ruleset, rulesetFlags)
		_ = unix.Close(ruleset) // enforced or not, the ruleset's descriptor is done
		if err != nil {
			return fail(fmt.Errorf("landlock_restrict_self: %v", err))
		}
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fail(fmt.Errorf("start %s: %v", argv[0], err))
	}
	err = syscall.Exec(path, argv, env)
	return fail(fmt.Errorf("start %s: %v", argv[0], err))
}

// exitCode is a finished process's status as a shell reports it (128+N
// for signal N).
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

// setLimits sets soft and hard rlimits (the program cannot raise them).
// With shared counting (no user namespace) RLIMIT_NPROC covers every
// process of the user, so the ones running now are added to the limit.
func setLimits(l *Limits, nprocShared bool) error {
	nproc := l.Processes
	if nprocShared && nproc != Unlimited {
		nproc += userTasks(os.Getuid())
	}
	for _, r := range []struct {
		res  int
		name string
		v    uint64
	}{
		{syscall.RLIMIT_DATA, "memory", l.MemoryBytes},
		{syscall.RLIMIT_CPU, "cpu", l.CPUSeconds},
		{syscall.RLIMIT_NOFILE, "open files", l.OpenFiles},
		{unix.RLIMIT_NPROC, "processes", nproc},
		{syscall.RLIMIT_FSIZE, "file size", l.FileBytes},
		{syscall.RLIMIT_CORE, "core", 0},
	} {
		v := r.v
		if v == 0 && r.res != syscall.RLIMIT_CORE {
			continue // not a limit of the plan's (the daemon always sends them all)
		}
		var cur syscall.Rlimit
		if err := syscall.Getrlimit(r.res, &cur); err == nil && cur.Max < v {
			v = cur.Max // never above what we have: lowering only
		}
		if err := syscall.Setrlimit(r.res, &syscall.Rlimit{Cur: v, Max: v}); err != nil {
			return fmt.Errorf("rlimit %s=%d: %v", r.name, v, err)
		}
	}
	return nil
}

// userTasks counts the threads of uid's processes (what RLIMIT_NPROC
// counts).
func userTasks(uid int) uint64 {
	ents, _ := os.ReadDir("/proc")
	var n uint64
	want := strconv.Itoa(uid)
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		var ruid string
		threads := uint64(1)
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				switch f[0] {
				case "Uid:":
					ruid = f[1]
				case "Threads:":
					threads, _ = strconv.ParseUint(f[1], 10, 64)
				}
			}
		}
		if ruid == want {
			n += threads
		}
	}
	return n
}

// dropCaps clears this thread's capabilities, its bounding and ambient
// sets, and makes uid 0 gain nothing at exec: a root daemon without a
// user namespace must not hand the program root's powers (Landlock does
// not stop a reboot or a module load). Under bwrap the sets are empty
// already. It fails unless every set ends up empty.
func dropCaps() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %v", err)
	}
	const capSetpcap = 8
	if data[0].Effective&(1<<capSetpcap) != 0 {
		// NOROOT, NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, each locked, and
		// KEEP_CAPS locked off.
		const secure = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7
		if err := unix.Prctl(unix.PR_SET_SECUREBITS, secure, 0, 0, 0); err != nil {
			return fmt.Errorf("securebits: %v", err)
		}
	}
	if data[0].Effective&(1<<capSetpcap) != 0 {
		// Without CAP_SETPCAP (any user but root) the bounding set cannot
		// be changed, and need not be: no_new_privs keeps exec from
		// granting what the set allows.
		last := lastCap()
		for c := 0; c <= last; c++ {
			if in, _ := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); in == 1 {
				if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
					return fmt.Errorf("drop capability %d from the bounding set: %v", c, err)
				}
			}
		}
	}
	// EINVAL: a kernel without ambient capabilities, which has none to clear.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient capabilities: %v", err)
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %v", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %v", err)
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return errors.New("capabilities remain after the drop")
		}
	}
	return nil
}

func lastCap() int {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 63
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 63
	}
	return n
}

// landlockRuleset makes the ruleset that restricts a thread (and what it
// executes) to the config's paths, ports and scope, once enforced
// (landlock_restrict_self): its descriptor, and the flags to enforce it
// with.
func landlockRuleset(cfg *execConfig) (int, uint32, error) {
	abi, _ := ll.LandlockGetABIVersion()
	if abi < landlockMin {
		return -1, 0, errors.New("landlock not supported by this kernel")
	}
	if cfg.Net && abi < landlockNet {
		return -1, 0, fmt.Errorf("landlock ABI %d cannot restrict the network", abi)
	}
	c := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}
	if cfg.Net {
		c.HandledAccessNet = landlock.V11.HandledAccessNet
	}
	var rules []landlock.Rule
	var roDirs, roFiles, rwDirs, rwFiles []string
	for _, g := range cfg.RO {
		if g.Dir {
			roDirs = append(roDirs, g.Path)
		} else {
			roFiles = append(roFiles, g.Path)
		}
	}
	for _, g := range cfg.RW {
		if g.Dir {
			rwDirs = append(rwDirs, g.Path)
		} else {
			rwFiles = append(rwFiles, g.Path)
		}
	}
	rules = append(rules,
		landlock.RODirs(roDirs...).IgnoreIfMissing(),
		landlock.ROFiles(roFiles...).IgnoreIfMissing(),
		landlock.RWDirs(rwDirs...).WithRefer().IgnoreIfMissing(),
		landlock.RWFiles(rwFiles...).IgnoreIfMissing(),
		landlock.RWFiles(cfg.Dev...).WithIoctlDev().IgnoreIfMissing())
	for _, p := range cfg.ConnectPorts {
		rules = append(rules, landlock.ConnectTCP(uint16(p)))
	}
	fd, flags, err := c.BestEffort().NewRulesetFD(rules...)
	if err != nil {
		return -1, 0, fmt.Errorf("landlock ruleset: %v", err)
	}
	if fd < 0 {
		return -1, 0, errors.New("landlock: nothing to enforce")
	}
	syscall.CloseOnExec(fd)
	return fd, flags, nil
}
