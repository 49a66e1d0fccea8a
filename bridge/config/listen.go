package config

// Listen addresses: their syntax, checked wherever the config is read,
// and the checks against this machine (ForServe).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

// CheckListenSyntax reports what is wrong with a listen address on its
// face, wherever the config is read: it must be host:port with a port from
// 0 to 65535 (0: any free port). net.Listen checks the range only when it
// binds, so without this check-config would pass 127.0.0.1:99999.
func CheckListenSyntax(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return errors.New("is not host:port")
	}
	n, err := strconv.ParseUint(port, 10, 64)
	switch {
	case err != nil && port == "":
		return errors.New("has no port")
	case err != nil:
		return fmt.Errorf("port %q is not a number", port)
	case n > 65535:
		return fmt.Errorf("port %d is out of range (0 to 65535)", n)
	}
	return nil
}

// Resolver looks up the host names of listen addresses:
// net.DefaultResolver. Tests replace it with one that answers without
// asking the network's name servers.
var Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
} = net.DefaultResolver

// resolveTimeout bounds the name lookup of a listen address's host.
const resolveTimeout = 5 * time.Second

// CheckListenHost reports why a listener could not bind addr (already
// known to pass CheckListenSyntax) on this machine, short of binding it:
// a host name that does not resolve, or an address that is not this
// machine's. The port itself is not tried: it may belong to the running
// daemon this config is checked for.
func CheckListenHost(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "" {
		return nil // every address
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		defer cancel()
		addrs, err := Resolver.LookupIPAddr(ctx, host)
		if err != nil {
			var dnsErr *net.DNSError
			if errors.As(err, &dnsErr) && dnsErr.IsNotFound {
				return fmt.Errorf("host %q does not resolve (no such host)", host)
			}
			return fmt.Errorf("host %q does not resolve: %w", host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	// Binding port 0 asks the kernel whether the address is one of ours
	// without taking the configured port. It works inside the unit's
	// sandbox, where listing interfaces (netlink) is not allowed.
	var lastErr error
	for _, ip := range ips {
		if ip.IsUnspecified() {
			return nil
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
		if err == nil {
			ln.Close()
			return nil
		}
		lastErr = err
	}
	if errors.Is(lastErr, syscall.EADDRNOTAVAIL) {
		if net.ParseIP(host) != nil {
			return fmt.Errorf("%s is not an address of this machine", host)
		}
		return fmt.Errorf("host %q resolves to %s, not an address of this machine", host, ips[0])
	}
	return fmt.Errorf("cannot listen on %s: %w", host, lastErr)
}

// checkHost adds the problems CheckListenHost finds in the config's listen
// addresses, each at its key's line. Addresses that failed the syntax
// check are skipped: they have their problem already.
func (c *Config) checkHost(ps *Problems, doc *yaml.Node) {
	for _, l := range []struct{ key, addr string }{
		{"listen", c.Server.Listen},
		{"metrics_listen", c.Server.MetricsListen},
	} {
		if l.key == "metrics_listen" && l.addr == "off" {
			continue
		}
		if CheckListenSyntax(l.addr) != nil {
			continue
		}
		if err := CheckListenHost(l.addr); err != nil {
			ps.Add(find(doc, "server", l.key), "server.%s %q: %v", l.key, l.addr, err)
		}
	}
}
