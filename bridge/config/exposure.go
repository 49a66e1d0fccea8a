package config

// Exposure: warnings for a config that works but serves logins and tokens
// to the network in the clear.

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// PlainHTTPOnNetwork returns a warning when server.listen reaches beyond
// this machine (every address, or one that is not loopback) while
// server.tls is unset: passwords, authorization codes and tokens then
// cross the home network readable by anyone on it. A warning, not a
// refusal: a TLS reverse proxy on another machine, or a network the owner
// trusts, are the owner's call, as Mosquitto 2 leaves a listener without
// TLS to its owner once it is configured.
func (c *Config) PlainHTTPOnNetwork() []Problem {
	if c.Server.TLS.Enabled() || !reachesNetwork(c.Server.Listen) {
		return nil
	}
	return []Problem{{Line: c.ListenLine, Msg: fmt.Sprintf(
		"server.listen %s reaches the network over plain HTTP: passwords and tokens cross it readable. "+
			"Set server.tls (bridge/config/README.md, \"HTTPS: server.tls\"), or listen on 127.0.0.1 behind a TLS reverse proxy",
		c.Server.Listen)}}
}

// reachesNetwork reports whether a listen address accepts connections
// from other machines: an empty host or an unspecified address (every
// interface), or an address or name other than loopback's.
func reachesNetwork(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false // a syntax problem, reported as such
	}
	if host == "" {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return true // a name: it may resolve to any interface
	}
	return !ip.Unmap().IsLoopback()
}
