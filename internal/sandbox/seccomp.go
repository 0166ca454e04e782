package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Without a network namespace (Landlock alone), Landlock restricts TCP
// only: UDP (before ABI 10), Multipath TCP, SCTP and raw sockets pass. So
// the helper also installs a seccomp filter that refuses every Internet
// socket but a plain TCP one, and io_uring (whose socket operation
// seccomp cannot see). Landlock then decides which TCP ports a socket may
// connect to.

// seccompArch is this build's seccomp audit architecture; 0 where the
// filter is not built (the layer then refuses calls that need it).
var seccompArch = map[string]uint32{"amd64": unix.AUDIT_ARCH_X86_64, "arm64": unix.AUDIT_ARCH_AARCH64}[runtime.GOARCH]

// netFilter is the BPF program. seccomp_data: nr at 0, arch at 4, args
// at 16+8*i (the low 32 bits first on these little-endian machines).
func netFilter() []unix.SockFilter {
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
	s := func(code uint16, jt, jf uint8, k uint32) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	return []unix.SockFilter{
		/* 0 */ s(ld, 0, 0, 4), // arch
		/* 1 */ s(jeq, 1, 0, seccompArch),
		/* 2 */ s(ret, 0, 0, nosys), // another ABI (32-bit calls on a 64-bit kernel)
		/* 3 */ s(ld, 0, 0, 0), // nr
		/* 4 */ s(jge, 12, 0, 0x40000000), // x32 calls -> deny
		/* 5 */ s(jeq, 12, 0, unix.SYS_IO_URING_SETUP), // -> nosys
		/* 6 */ s(jeq, 0, 9, unix.SYS_SOCKET), // else allow
		/* 7 */ s(ld, 0, 0, 16), // domain
		/* 8 */ s(jeq, 1, 0, unix.AF_INET),
		/* 9 */ s(jeq, 0, 6, unix.AF_INET6), // else allow
		/* 10 */ s(ld, 0, 0, 24), // type
		/* 11 */ s(and, 0, 0, 0xf), // less SOCK_NONBLOCK, SOCK_CLOEXEC
		/* 12 */ s(jeq, 0, 4, unix.SOCK_STREAM), // else deny
		/* 13 */ s(ld, 0, 0, 32), // protocol
		/* 14 */ s(jeq, 1, 0, 0),
		/* 15 */ s(jeq, 0, 1, unix.IPPROTO_TCP), // else deny
		/* 16 */ s(ret, 0, 0, allow),
		/* 17 */ s(ret, 0, 0, deny),
		/* 18 */ s(ret, 0, 0, nosys),
	}
}

// installNetFilter applies netFilter to this thread (and what it
// executes); no_new_privs must be set.
func installNetFilter() error {
	if seccompArch == 0 {
		return fmt.Errorf("no seccomp network filter for %s", runtime.GOARCH)
	}
	f := netFilter()
	prog := unix.SockFprog{Len: uint16(len(f)), Filter: &f[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("seccomp: %v", err)
	}
	return nil
}
