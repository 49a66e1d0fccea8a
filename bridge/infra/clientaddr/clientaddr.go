// Package clientaddr says which client a request comes from, for the
// bounds and throttles counted per client (logins, hub logins, console
// sign-ins). Behind a reverse proxy every request arrives from the proxy,
// so the proxy's X-Forwarded-For or Forwarded header is the only way to
// tell clients apart; but anyone can send those headers, so they are
// believed only from a peer listed in server.trusted_proxies, and even
// then only as far as the hops those proxies added: the right-most
// address that is not a trusted proxy is the client. Everything left of
// it was written by the client itself.
package clientaddr

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
)

// Of returns the address a request comes from, with the peer's
// address as the fallback whenever the forwarding headers cannot be
// trusted: the peer is not a trusted proxy, both headers are present (a
// proxy writes one of them; the other came from the client, and which is
// which cannot be told), or the hop to use is not an address ("unknown",
// an obfuscated Forwarded node). The fallback puts such requests in the
// proxy's own bucket, which no well-formed request shares.
func Of(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer := parseHop(r.RemoteAddr)
	if !peer.IsValid() || !isTrusted(peer, trusted) {
		return peer
	}
	xff := r.Header.Values("X-Forwarded-For")
	fwd := r.Header.Values("Forwarded")
	var hops []string
	switch {
	case len(xff) > 0 && len(fwd) > 0:
		return peer
	case len(xff) > 0:
		for _, v := range xff {
			hops = append(hops, strings.Split(v, ",")...)
		}
	case len(fwd) > 0:
		for _, v := range fwd {
			hops = append(hops, forwardedFor(v)...)
		}
	default:
		return peer
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a := parseHop(hops[i])
		if !a.IsValid() {
			return peer
		}
		client = a
		if !isTrusted(a, trusted) {
			break
		}
	}
	return client
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads one hop: an address, with or without a port, IPv6 in
// brackets or not, possibly quoted (Forwarded). IPv4-mapped IPv6 is
// IPv4; a zone is dropped.
func parseHop(s string) netip.Addr {
	s = strings.TrimSpace(s)
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		s = s[1 : len(s)-1]
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone("")
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone("")
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") { // [v6] without a port
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap().WithZone("")
		}
	}
	return netip.Addr{}
}

// forwardedFor returns the for= value of each element of a Forwarded
// header (RFC 7239), "" for an element without one, honouring quoted
// strings (a quoted value may hold ',' and ';').
func forwardedFor(h string) []string {
	var out []string
	var pair strings.Builder
	found, val := false, ""
	endPair := func() {
		k, v, ok := strings.Cut(pair.String(), "=")
		if ok && strings.EqualFold(strings.TrimSpace(k), "for") && !found {
			found, val = true, strings.TrimSpace(v)
		}
		pair.Reset()
	}
	endElem := func() {
		endPair()
		out = append(out, val)
		found, val = false, ""
	}
	quoted, escaped := false, false
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
			continue
		case c == '"':
			quoted = !quoted
		case !quoted && c == ';':
			endPair()
			continue
		case !quoted && c == ',':
			endElem()
			continue
		}
		pair.WriteByte(c)
	}
	endElem()
	return out
}

// Key is the key a request's client is counted under: the client's
// address behind the trusted proxies, an IPv6 client by its /64
// (bridge.AddrKey).
func Key(r *http.Request, trusted []netip.Prefix) string {
	return bridge.AddrKey(Of(r, trusted))
}

// Ignored returns the peer whose forwarding headers Of does not believe:
// a request that carries X-Forwarded-For or Forwarded from a peer not in
// trusted. ok is false for any other request.
func Ignored(r *http.Request, trusted []netip.Prefix) (peer netip.Addr, ok bool) {
	if r.Header.Get("X-Forwarded-For") == "" && r.Header.Get("Forwarded") == "" {
		return netip.Addr{}, false
	}
	peer = parseHop(r.RemoteAddr)
	return peer, !isTrusted(peer, trusted)
}
