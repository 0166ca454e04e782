package console

import (
	"fmt"
	"net"
)

// CheckListen is the rule for where the console may listen: a loopback
// address as it is; any other (or every interface) only with TLS, or when
// the operator says --insecure-listen (a TLS proxy in front, say).
func CheckListen(addr string, tls, insecure bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", addr, err)
	}
	if loopback(host) || tls || insecure {
		return nil
	}
	return fmt.Errorf("--listen %s is not a loopback address: the console and its tokens would travel in clear; give --tls-cert and --tls-key, or --insecure-listen if a TLS proxy fronts it", addr)
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
