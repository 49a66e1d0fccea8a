package config

// Exposure: warnings for a config that works but serves logins and tokens
// to the network in the clear, or tells clients an address they cannot
// reach.

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
)

// NetworkWarnings returns what check-config and serve warn of when
// server.listen reaches beyond this machine (every address, or one that
// is not loopback):
//   - server.public_url unset, or naming loopback: clients would be sent
//     to an address that reaches the hub only from the hub itself;
//   - server.tls unset: passwords, authorization codes and tokens cross
//     the home network readable by anyone on it (with an https public_url,
//     a TLS proxy's, clients can go around it).
//
// Warnings, not refusals: a TLS reverse proxy on another machine, or a
// network the owner trusts, are the owner's call, as Mosquitto 2 leaves a
// listener without TLS to its owner once it is configured.
func (c *Config) NetworkWarnings() []Problem {
	if !reachesNetwork(c.Server.Listen) {
		return nil
	}
	var ws []Problem
	u, err := url.Parse(c.Server.PublicURL)
	switch {
	case c.Server.PublicURL == "":
		ws = append(ws, Problem{Line: c.ListenLine, Msg: fmt.Sprintf(
			"server.listen %s reaches the network, but server.public_url is not set: clients are told to use %s, which reaches the hub only from this machine; set public_url to the address clients use",
			c.Server.Listen, c.AdvertisedURL(""))})
	case err == nil && isLoopbackHost(u.Hostname()):
		ws = append(ws, Problem{Line: c.ListenLine, Msg: fmt.Sprintf(
			"server.listen %s reaches the network, but server.public_url %s names this machine's loopback: clients elsewhere cannot use it; set public_url to the address clients use",
			c.Server.Listen, c.Server.PublicURL)})
	}
	if c.Server.TLS.Enabled() {
		return ws
	}
	if err == nil && strings.EqualFold(u.Scheme, "https") {
		// The https is a reverse proxy's; this listener speaks plain HTTP
		// to anyone who reaches it, around the proxy.
		return append(ws, Problem{Line: c.ListenLine, Msg: fmt.Sprintf(
			"server.public_url is https but server.listen %s is not loopback: clients on the network can bypass the proxy "+
				"and send passwords and tokens in plain HTTP; listen on 127.0.0.1 behind the proxy", c.Server.Listen)})
	}
	return append(ws, Problem{Line: c.ListenLine, Msg: fmt.Sprintf(
		"server.listen %s reaches the network over plain HTTP: passwords and tokens cross it readable. "+
			"Set server.tls (bridge/config/README.md, \"HTTPS: server.tls\"), or listen on 127.0.0.1 behind a TLS reverse proxy",
		c.Server.Listen)})
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
	return !isLoopbackHost(host)
}

// isLoopbackHost reports whether a host (an address or a name) is this
// machine's loopback: 127.0.0.0/8, ::1 (IPv4-mapped too), or localhost.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}
