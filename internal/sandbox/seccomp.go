package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Without namespaces (Landlock alone), Landlock restricts TCP only, and
// pathname unix sockets only from ABI 9: UDP (before ABI 10), Multipath
// TCP, SCTP and raw sockets pass, and so does a connection to any unix
// socket the user may open (a container runtime's, a desktop's). So the
// helper also installs a seccomp filter that refuses every Internet
// socket but a plain TCP one (unless the call shares the host network),
// every new unix socket (before ABI 9; socketpair still works), and
// io_uring (whose socket operation seccomp cannot see). Landlock then
// decides which TCP ports a socket may connect to.

// seccompArch is this build's seccomp audit architecture; 0 where the
// filter is not built (the layer then refuses calls that need it).
var seccompArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]

// sockFilter is the BPF program: inet refuses Internet sockets but plain
// TCP, unixSock refuses new unix sockets. seccomp_data: nr at 0, arch at
// 4, args at 16+8*i (the low 32 bits first on these little-endian
// machines).
func sockFilter(inet, unixSock bool) []unix.SockFilter {
	const (
		ld    = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq   = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge   = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and   = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret   = unix.BPF_RET | unix.BPF_K
		allow = unix.SECCOMP_RET_ALLOW
		deny  = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)
		nosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	// Instructions with jump targets named by label, resolved below.
	type ins struct {
		code   uint16
		k      uint32
		jt, jf string
		label  string
	}
	onUnix, onInet := "allow", "allow"
	if unixSock {
		onUnix = "deny"
	}
	if inet {
		onInet = "inet"
	}
	prog := []ins{
		{code: ld, k: 4}, // arch
		{code: jeq, k: seccompArch, jt: "native", jf: "nosys"},
		{label: "native", code: ld, k: 0},      // nr
		{code: jge, k: 0x40000000, jt: "deny"}, // x32 calls
		{code: jeq, k: unix.SYS_IO_URING_SETUP, jt: "nosys"},
		{code: jeq, k: unix.SYS_SOCKET, jf: "allow"},
		{code: ld, k: 16}, // domain
		{code: jeq, k: unix.AF_UNIX, jt: onUnix},
		{code: jeq, k: unix.AF_INET, jt: onInet},
		{code: jeq, k: unix.AF_INET6, jt: onInet, jf: "allow"},
		{label: "inet", code: ld, k: 24}, // type
		{code: and, k: 0xf},              // less SOCK_NONBLOCK, SOCK_CLOEXEC
		{code: jeq, k: unix.SOCK_STREAM, jf: "deny"},
		{code: ld, k: 32}, // protocol
		{code: jeq, k: 0, jt: "allow"},
		{code: jeq, k: unix.IPPROTO_TCP, jt: "allow", jf: "deny"},
		{label: "allow", code: ret, k: allow},
		{label: "deny", code: ret, k: deny},
		{label: "nosys", code: ret, k: nosys},
	}
	at := map[string]int{}
	for i, x := range prog {
		if x.label != "" {
			at[x.label] = i
		}
	}
	out := make([]unix.SockFilter, len(prog))
	for i, x := range prog {
		rel := func(l string) uint8 {
			if l == "" {
				return 0 // the next instruction
			}
			return uint8(at[l] - i - 1)
		}
		out[i] = unix.SockFilter{Code: x.code, K: x.k, Jt: rel(x.jt), Jf: rel(x.jf)}
	}
	return out
}

// installSockFilter applies sockFilter to this thread (and what it
// executes); no_new_privs must be set.
func installSockFilter(inet, unixSock bool) error {
	if seccompArch == 0 {
		return fmt.Errorf("no seccomp socket filter for %s", runtime.GOARCH)
	}
	f := sockFilter(inet, unixSock)
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %v", err)
	}
	return nil
}
