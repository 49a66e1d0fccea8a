// Package configtest helps tests of code that reads configs: it keeps the
// listen-address checks off the network.
package configtest

import (
	"context"
	"net"
	"strings"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// Hosts is a resolver that knows localhost and nothing else, as a machine
// without name servers would: a test that checks an unresolvable listen
// host must not send a DNS query off the machine.
type Hosts struct{}

// LookupIPAddr answers localhost with the loopback addresses and every
// other name with "no such host".
func (Hosts) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	if h := strings.TrimSuffix(strings.ToLower(host), "."); h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return []net.IPAddr{{IP: net.IPv4(127, 0, 0, 1)}, {IP: net.IPv6loopback}}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// UseHosts makes config look listen hosts up with Hosts until the test
// ends.
func UseHosts(t interface{ Cleanup(func()) }) {
	old := config.Resolver
	config.Resolver = Hosts{}
	t.Cleanup(func() { config.Resolver = old })
}
