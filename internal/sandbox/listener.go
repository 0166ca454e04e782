package sandbox

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// Under bwrap the metering proxy's address must be a listener in the
// sandbox's own network namespace, which only a process inside can make;
// the forwarding to the proxy's socket is done outside, by the launcher,
// so that the call costs one helper process, not a forwarder that runs the
// program as its child (a second start of this binary per call), and
// nothing of the proxy (its socket) is bound into the sandbox. The
// in-sandbox helper makes the listener and hands it to the launcher over
// listenerFD (one end of a socket pair), then executes the program, which
// holds neither the listener nor the pair. The launcher accepts on it and
// forwards each connection (forward.go), as it does for Landlock alone.

// handOverListener is the helper's side: a listener on 127.0.0.1:port,
// sent to the launcher, then closed here (the launcher holds it).
func handOverListener(port int) error {
	// The pair's end is no business of the program's.
	syscall.CloseOnExec(listenerFD)
	defer unix.Close(listenerFD) //nolint:errcheck // sent or not, our end is done
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("proxy listener: %v", err)
	}
	defer unix.Close(fd) //nolint:errcheck // our copy: the launcher has its own once sent
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		return fmt.Errorf("proxy listener on 127.0.0.1:%d: %v", port, err)
	}
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		return fmt.Errorf("proxy listener: %v", err)
	}
	if err := unix.Sendmsg(listenerFD, []byte{0}, unix.UnixRights(fd), nil, 0); err != nil {
		return fmt.Errorf("hand the proxy listener to the launcher: %v", err)
	}
	return nil
}

// listenerPair is the launcher's side before the sandbox starts: a socket
// pair whose second end the helper gets as listenerFD.
func listenerPair() (ours, theirs *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("proxy listener pair: %v", err)
	}
	return os.NewFile(uintptr(fds[0]), "listener-pair"), os.NewFile(uintptr(fds[1]), "listener-pair-child"), nil
}

// takeListener waits for the helper's listener on ours (until every other
// end is closed: the helper failed, or the sandbox ended) and returns it.
func takeListener(ours *os.File) (net.Listener, error) {
	rc, err := ours.SyscallConn()
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1)
	oob := make([]byte, unix.CmsgSpace(4))
	var n, oobn int
	var rerr error
	if err := rc.Read(func(fd uintptr) bool {
		n, oobn, _, _, rerr = unix.Recvmsg(int(fd), buf, oob, unix.MSG_CMSG_CLOEXEC)
		return rerr != unix.EAGAIN
	}); err != nil {
		return nil, err
	}
	if rerr != nil {
		return nil, rerr
	}
	if n == 0 && oobn == 0 {
		return nil, errors.New("no proxy listener: the helper ended first")
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return nil, fmt.Errorf("proxy listener: no descriptor received (%v)", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd) // not the one descriptor expected
		}
		return nil, fmt.Errorf("proxy listener: %d descriptors received (%v)", len(fds), err)
	}
	f := os.NewFile(uintptr(fds[0]), "proxy-listener")
	defer f.Close() //nolint:errcheck // FileListener holds its own copy
	return net.FileListener(f)
}
