package app

import (
	"net"
	"net/netip"
)

func listen(addr string) (net.Listener, error) { return net.Listen("tcp", addr) }

// IsLoopback reports whether a listen address binds only loopback
// interfaces. An empty host (":8480") binds every interface, so it is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
