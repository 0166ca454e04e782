package sandbox

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/logist/logist/internal/regfile"
)

// fillProxyAddr is the one place the proxy's address as the call reaches
// it (addr, "" when the call has no proxy) replaces ProxyAddr: in the
// arguments, the environment's values and the plan's Fill files, which
// are rewritten in place before the program starts. The environment also
// gets LOGIST_PROXY_ADDR.
func fillProxyAddr(p *plan, addr string) (argv, env []string, err error) {
	if addr == "" {
		return p.Argv, p.Env, nil
	}
	r := strings.NewReplacer(ProxyAddr, addr)
	argv = make([]string, len(p.Argv))
	for i, a := range p.Argv {
		argv[i] = r.Replace(a)
	}
	env = make([]string, 0, len(p.Env)+1)
	for _, kv := range p.Env {
		env = append(env, r.Replace(kv))
	}
	env = setEnv(env, "LOGIST_PROXY_ADDR", addr)
	for _, f := range p.Fill {
		if err := fillFile(f, []byte(ProxyAddr), []byte(addr)); err != nil {
			return nil, nil, fmt.Errorf("fill in the proxy's address: %w", err)
		}
	}
	return argv, env, nil
}

// fillFile replaces old by new in the regular file name, in place. The
// file is in a folder the call may write (its HOME), so it is opened
// without following a symlink and must be a regular file: the launcher,
// which has the daemon's rights, never writes through a link a previous
// call planted.
func fillFile(name string, old, new []byte) error {
	f, err := regfile.OpenFile(name, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close() //nolint:errcheck // closed after the write below
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w", name, regfile.ErrNotRegular)
	}
	if fi.Size() > maxFill {
		return fmt.Errorf("%s: larger than %d bytes", name, maxFill)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFill+1))
	if err != nil {
		return err
	}
	if !bytes.Contains(b, old) {
		return f.Close()
	}
	b = bytes.ReplaceAll(b, old, new)
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Close()
}

// maxFill bounds a file to fill (a CLI's config file is a few KiB).
const maxFill = 1 << 20
