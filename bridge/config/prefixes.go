package config

// Prefixes: the networks of server.trusted_proxies, as a comparable value.

import (
	"fmt"
	"net/netip"
	"strings"

	"gopkg.in/yaml.v3"
)

// Prefixes is a list of IP networks, each written as CIDR (192.168.1.0/24)
// or as one address (192.168.1.2, meaning /32 or /128). It keeps the
// networks as their canonical text so that Server stays comparable: Reload
// compares sections to tell which changed.
type Prefixes struct{ text string }

// UnmarshalYAML checks every entry and reports each bad one at its line.
func (p *Prefixes) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return typeError(n, "must be a list of addresses or CIDR networks, e.g. [127.0.0.1, 192.168.1.0/24]")
	}
	var parts, errs []string
	for _, el := range n.Content {
		pf, msg := parsePrefix(el)
		if msg != "" {
			errs = append(errs, fmt.Sprintf("line %d: %s", el.Line, msg))
			continue
		}
		parts = append(parts, pf.String())
	}
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	p.text = strings.Join(parts, ",")
	return nil
}

func parsePrefix(n *yaml.Node) (netip.Prefix, string) {
	if n.Kind != yaml.ScalarNode {
		return netip.Prefix{}, "a trusted proxy must be an address or a CIDR network"
	}
	v := strings.TrimSpace(n.Value)
	if !strings.Contains(v, "/") {
		a, err := netip.ParseAddr(v)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Sprintf("%q is not an IP address or CIDR network", n.Value)
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), ""
	}
	pf, err := netip.ParsePrefix(v)
	if err != nil {
		return netip.Prefix{}, fmt.Sprintf("%q is not an IP address or CIDR network", n.Value)
	}
	if pf != pf.Masked() {
		// 10.0.0.1/8 is most likely a typo for one address or for 10.0.0.0/8;
		// guessing which would trust the wrong peers.
		return netip.Prefix{}, fmt.Sprintf("%q has bits set past its prefix length: write %s for the network or %s for one address", n.Value, pf.Masked(), pf.Addr())
	}
	if pf.Addr().Is4In6() && pf.Bits() >= 96 {
		pf = netip.PrefixFrom(pf.Addr().Unmap(), pf.Bits()-96)
	}
	return pf, ""
}

// List returns the networks.
func (p Prefixes) List() []netip.Prefix {
	if p.text == "" {
		return nil
	}
	var out []netip.Prefix
	for _, s := range strings.Split(p.text, ",") {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}
