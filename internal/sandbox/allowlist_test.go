package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
)

// TestNetworkAllowlist: on the host network with an allowlist, a call
// connects to a listed port and is refused any other (Landlock), under
// every layer this host has.
func TestNetworkAllowlist(t *testing.T) {
	bin := attacker(t)
	listen := func() (net.Listener, int) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "host heard\n")
				c.Close()
			}
		}()
		return ln, ln.Addr().(*net.TCPAddr).Port
	}
	_, allowed := listen()
	_, other := listen()
	for _, layer := range layers(t) {
		for port, want := range map[int]bool{allowed: true, other: false} {
			spec := shSpec(t, "")
			spec.Layer = layer
			spec.Argv = []string{bin, fmt.Sprintf("127.0.0.1:%d", port)}
			spec.Env = append(spec.Env, "LOGIST_ATTACK_ROLE=dial")
			spec.Network = Network{Mode: NetHost, Ports: []int{allowed}}
			r, err := Run(context.Background(), &Local{}, spec)
			if err != nil {
				t.Fatal(err)
			}
			got := r.Outcome == OutcomeExited && r.ExitCode == 0 && strings.HasPrefix(string(r.Stdout), "host heard")
			if got != want {
				t.Errorf("%s: port %d (allowed %d): connected %v, want %v: %q %q", layer, port, allowed, got, want, r.Stdout, r.Stderr)
			}
		}
	}
}

// TestNetworkAllowlistFailsClosed: a host whose Landlock cannot limit TCP
// ports does not run a call with an allowlist at all.
func TestNetworkAllowlistFailsClosed(t *testing.T) {
	spec := shSpec(t, "true")
	spec.Network = Network{Mode: NetHost, Ports: []int{443}}
	for _, layer := range []Layer{LayerBwrap, LayerLandlock} {
		_, err := makePlan(&spec, layer, tools{self: "/usr/bin/logistd", bwrap: "/usr/bin/bwrap", abi: 3}, currentView())
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "allowlist") {
			t.Errorf("%s with Landlock ABI 3: %v, want ErrUnavailable naming the allowlist", layer, err)
		}
		p, err := makePlan(&spec, layer, tools{self: "/usr/bin/logistd", bwrap: "/usr/bin/bwrap", abi: 7}, currentView())
		if err != nil || !p.Exec.Net || len(p.Exec.ConnectPorts) != 1 || p.Exec.ConnectPorts[0] != 443 {
			t.Errorf("%s with Landlock ABI 7: %+v, %v; want TCP limited to 443", layer, p, err)
		}
	}
	bad := spec
	bad.Network = Network{Mode: NetNone, Ports: []int{443}}
	if err := bad.check(); err == nil {
		t.Error("ports without network host accepted")
	}
}
