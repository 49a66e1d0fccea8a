package bridge

import "net/netip"

// AddrKey is the key under which a client address is counted for a bound
// or a throttle: an IPv4 address as it is, an IPv6 address by its /64,
// since one home or one host is usually given a whole /64 and can pick any
// address in it. An invalid address is "unknown".
func AddrKey(a netip.Addr) string {
	if !a.IsValid() {
		return "unknown"
	}
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
