package sandbox

import (
	"io"
	"net"
	"sync"
)

// forward accepts connections on ln and joins each to a new connection to
// the unix socket at socket (the metering proxy), until ln is closed. A
// connection the proxy refuses is closed at once.
func forward(ln net.Listener, socket string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close() //nolint:errcheck // a connection: nothing to lose
			u, err := net.Dial("unix", socket)
			if err != nil {
				return
			}
			defer u.Close() //nolint:errcheck // a connection: nothing to lose
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				// Either side gone ends this direction; the proxy logs
				// what it refused.
				_, _ = io.Copy(dst, src)
				// Pass the end of one direction on, keep the other open
				// (a client that half-closes still gets its answer).
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
				}
			}
			go pipe(u, c)
			go pipe(c, u)
			wg.Wait()
		}()
	}
}
