package clientaddr

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
)

func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.1/32"), netip.MustParsePrefix("fd00::/64")}
	cases := []struct {
		name   string
		peer   string
		header map[string][]string
		want   string
	}{
		{"no proxy", "192.0.2.7:5000", nil, "192.0.2.7"},
		{"untrusted peer's XFF is ignored", "192.0.2.7:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "192.0.2.7"},
		{"untrusted peer's Forwarded is ignored", "192.0.2.7:5000", map[string][]string{"Forwarded": {"for=198.51.100.1"}}, "192.0.2.7"},
		{"trusted proxy without a header", "10.0.0.1:5000", nil, "10.0.0.1"},
		{"trusted proxy's XFF", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		// The client wrote the left entry itself; the proxy appended the right one.
		{"spoofed XFF entries are skipped", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.9, 198.51.100.1"}}, "198.51.100.1"},
		{"right-most untrusted across header lines", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"203.0.113.9", "198.51.100.1, 10.0.0.1"}}, "198.51.100.1"},
		{"XFF with ports", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1:4444"}}, "198.51.100.1"},
		{"all hops trusted", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"fd00::5, 10.0.0.1"}}, "fd00::5"},
		{"garbage hop falls back to the proxy", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"unknown"}}, "10.0.0.1"},
		{"Forwarded", "10.0.0.1:5000", map[string][]string{"Forwarded": {`for=203.0.113.9;proto=https, for="[2001:db8:cafe::17]:4711";by=10.0.0.1`}}, "2001:db8:cafe::17"},
		{"Forwarded quoted comma", "10.0.0.1:5000", map[string][]string{"Forwarded": {`for="198.51.100.1";host="a,b"`}}, "198.51.100.1"},
		{"Forwarded obfuscated", "10.0.0.1:5000", map[string][]string{"Forwarded": {`for=_hidden`}}, "10.0.0.1"},
		{"Forwarded without for", "10.0.0.1:5000", map[string][]string{"Forwarded": {`proto=https`}}, "10.0.0.1"},
		{"both headers: neither believed", "10.0.0.1:5000", map[string][]string{"X-Forwarded-For": {"198.51.100.1"}, "Forwarded": {"for=203.0.113.9"}}, "10.0.0.1"},
		{"IPv6 proxy", "[fd00::1]:5000", map[string][]string{"X-Forwarded-For": {"2001:db8::1"}}, "2001:db8::1"},
		{"IPv4-mapped peer", "[::ffff:10.0.0.1]:5000", map[string][]string{"X-Forwarded-For": {"::ffff:198.51.100.1"}}, "198.51.100.1"},
	}
	for _, c := range cases {
		r := &http.Request{RemoteAddr: c.peer, Header: http.Header{}}
		for k, vs := range c.header {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		if got := Of(r, trusted); got.String() != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func TestAddrKeyGroupsIPv6By64(t *testing.T) {
	k := func(s string) string { return bridge.AddrKey(netip.MustParseAddr(s)) }
	if k("2001:db8:1:2::1") != k("2001:db8:1:2:ffff:ffff:ffff:ffff") {
		t.Error("two addresses of one /64 have different keys")
	}
	if k("2001:db8:1:2::1") == k("2001:db8:1:3::1") {
		t.Error("two /64s share a key")
	}
	if k("192.0.2.1") == k("192.0.2.2") || k("192.0.2.1") != "192.0.2.1" {
		t.Error("IPv4 addresses are not keyed one by one")
	}
}
