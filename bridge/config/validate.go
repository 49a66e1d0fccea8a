package config

// Validation: the rules a config's own keys must keep once decoded and
// given their defaults, each broken one a problem at its line. The
// platform section's rules are in platform.go, the checks against this
// machine in listen.go.

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
)

// SwitchIDPattern is what a switch id may look like: it appears in URLs,
// logs and metric labels.
var SwitchIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (c *Config) validate(ps *Problems, doc *yaml.Node) {
	line := func(path ...string) *yaml.Node { return find(doc, path...) }
	if n := line("server", "listen"); n != nil {
		c.ListenLine = n.Line
	}
	if n := line("server", "metrics_listen"); n != nil {
		c.MetricsListenLine = n.Line
	}
	if err := CheckListenSyntax(c.Server.Listen); err != nil {
		ps.Add(line("server", "listen"), "server.listen %q %v", c.Server.Listen, err)
	}
	if c.Server.MetricsListen != "off" {
		if err := CheckListenSyntax(c.Server.MetricsListen); err != nil {
			ps.Add(line("server", "metrics_listen"), "server.metrics_listen %q %v (or off)", c.Server.MetricsListen, err)
		}
	}
	if c.Server.PublicURL != "" {
		u, err := url.Parse(c.Server.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			ps.Add(line("server", "public_url"), "server.public_url %q must be an absolute http(s) URL without user, query or fragment", RedactURL(c.Server.PublicURL))
		} else if u.Path != "" {
			// The pages, cookies and redirects live at /oauth/ and /api/;
			// a reverse proxy must map the hub at the root of a host.
			ps.Add(line("server", "public_url"), "server.public_url %q must not have a path: serve the hub at the root of its host name", c.Server.PublicURL)
		} else if c.Server.TLS.Enabled() && u.Scheme != "https" {
			// The hub answers only TLS on listen: an http address would
			// send clients to a port that cannot answer them.
			ps.Add(line("server", "public_url"), "server.public_url %q must be https:// when server.tls is set", c.Server.PublicURL)
		}
	}
	if n := line("server", "tls"); n != nil {
		c.TLSLine = n.Line
		if c.Server.TLS.CertFile == "" || c.Server.TLS.KeyFile == "" {
			ps.Add(n, "server.tls needs both cert_file and key_file")
		}
		if n := find(doc, "server", "tls", "hsts_max_age"); n == nil {
			c.Server.TLS.HSTSMaxAge = Duration(DefaultHSTSMaxAge)
		} else if h := c.Server.TLS.HSTSMaxAge.Std(); h < 0 || h%time.Second != 0 {
			ps.Add(n, "server.tls.hsts_max_age must be whole seconds, 0 or more (0s: no Strict-Transport-Security), not %s", h)
		}
	}
	for _, a := range c.Webhooks.Allow {
		if err := CheckWebhookAllow(a); err != nil {
			ps.Add(line("webhooks", "allow"), "webhooks.allow %q: %v", a, err)
		}
	}
	c.validateAudit(ps, doc)
	if c.Server.PowerEventsEvery < 0 {
		ps.Add(line("server", "power_events_every"), "server.power_events_every must not be negative")
	}
	if c.Server.CommandTimeout < 0 || c.Server.ShutdownTimeout < 0 {
		ps.Add(line("server"), "server timeouts must be positive")
	}
	if c.Server.MaxConnections < 1 || c.Server.MaxConnections > MaxMaxConnections {
		ps.Add(line("server", "max_connections"), "server.max_connections must be between 1 and %d, not %d", MaxMaxConnections, c.Server.MaxConnections)
	}
	if c.Server.MemoryLimit < MinMemoryLimit {
		ps.Add(line("server", "memory_limit"), "server.memory_limit must be at least %s (or off), not %s", ByteSize(MinMemoryLimit), c.Server.MemoryLimit)
	}
	if c.OAuth.CodeLifetime < 0 || c.OAuth.CodeLifetime.Std() > bridge.MaxCodeLifetime {
		ps.Add(line("oauth", "code_lifetime"), "oauth.code_lifetime must be between 1s and 24h (the spec's limit), not %s", c.OAuth.CodeLifetime.Std())
	}
	if c.OAuth.TokenLifetime < 0 {
		ps.Add(line("oauth", "token_lifetime"), "oauth.token_lifetime must be positive")
	}
	if c.Log.Format != "text" && c.Log.Format != "json" {
		ps.Add(line("log", "format"), "log.format must be text or json, not %q", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		ps.Add(line("log", "level"), "log.level must be debug, info, warn or error, not %q", c.Log.Level)
	}
	if c.Demo != nil && (c.Demo.User == "" || c.Demo.Password == "") {
		ps.Add(line("demo"), "demo needs user and password")
	}
	if c.Demo != nil && !loopbackListen(c.Server.Listen) {
		// The demo user's password is in this file and usually "demo": a
		// hub others can reach must not have it.
		ps.Add(line("demo"), "demo is only for trying the hub on this machine, but server.listen %s is reachable from others: listen on 127.0.0.1 or remove demo", c.Server.Listen)
	}
	if len(c.Locations) == 0 && c.Storage.Postgres == nil {
		ps.Add(line("locations"), "no locations: configure at least one location with its switches")
	}
	c.validatePlatform(ps, doc)
	c.validateStorage(ps, doc)
	c.noteSecretLines(doc)
	locIDs := map[int64]int{}
	swIDs := map[string]int{}
	locNodes := find(doc, "locations")
	for i := range c.Locations {
		if locNodes != nil && locNodes.Kind == yaml.SequenceNode && i < len(locNodes.Content) {
			c.Locations[i].Line = locNodes.Content[i].Line
		}
		l := c.Locations[i]
		at := &yaml.Node{Line: l.Line}
		if l.ID <= 0 {
			ps.Add(at, "locations[%d]: id must be a positive number", i)
		} else if prev, dup := locIDs[l.ID]; dup {
			ps.Add(at, "locations[%d]: id %d is already used at line %d", i, l.ID, prev)
		} else {
			locIDs[l.ID] = l.Line
		}
		if strings.TrimSpace(l.Name) == "" {
			ps.Add(at, "locations[%d]: name is required", i)
		}
		for j, s := range l.Switches {
			at := &yaml.Node{Line: s.Line}
			where := fmt.Sprintf("locations[%d].switches[%d]", i, j)
			if !SwitchIDPattern.MatchString(s.ID) {
				ps.Add(at, "%s: id %q must be 1-64 letters, digits, '.', '_' or '-'", where, s.ID)
			} else if prev, dup := swIDs[s.ID]; dup {
				ps.Add(at, "%s: switch id %q is already used at line %d", where, s.ID, prev)
			} else {
				swIDs[s.ID] = s.Line
			}
			if strings.TrimSpace(s.Name) == "" {
				ps.Add(at, "%s: name is required", where)
			}
			if s.Driver == "" {
				ps.Add(at, "%s: driver is required", where)
			}
		}
	}
}

// validateAudit gives the audit: section its defaults, for the keys left
// out, and checks the keys given: an explicit 0 is no bound, and is
// refused rather than taken for the default.
func (c *Config) validateAudit(ps *Problems, doc *yaml.Node) {
	if n := find(doc, "audit", "max_age"); n == nil {
		c.Audit.MaxAge = Duration(bridge.DefaultAuditMaxAge)
	} else if a := c.Audit.MaxAge.Std(); a < minAuditMaxAge || a > maxAuditMaxAge {
		ps.Add(n, "audit.max_age must be between %s and %s (10 years), not %s; the default is %s (30 days)",
			shortDuration(minAuditMaxAge), shortDuration(maxAuditMaxAge), shortDuration(a), shortDuration(bridge.DefaultAuditMaxAge))
	}
	if n := find(doc, "audit", "max_rows"); n == nil {
		c.Audit.MaxRows = bridge.DefaultAuditMaxRows
	} else if r := c.Audit.MaxRows; r < 1 || r > maxAuditMaxRows {
		ps.Add(n, "audit.max_rows must be between 1 and %d, not %d; the default is %d", maxAuditMaxRows, r, bridge.DefaultAuditMaxRows)
	}
}

// shortDuration is d as a config writes it: 720h, not 720h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// loopbackListen reports whether a listen address is on loopback only. An
// address that is not host:port counts as loopback here: it is reported
// as malformed already.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return true
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// AllowPublic is the webhooks.allow entry for every public unicast
// address; an unset or empty webhooks.allow means [public].
const AllowPublic = "public"

// CheckWebhookAllow checks one webhooks.allow entry: public, an IP
// address, a CIDR prefix or a host name (without port, scheme or
// wildcard); the error says what is wrong with it.
func CheckWebhookAllow(e string) error {
	if strings.EqualFold(e, AllowPublic) || validPrefix(e) {
		return nil
	}
	if strings.Contains(e, "/") {
		if ip, _, ok := strings.Cut(e, "/"); ok && validPrefix(ip) {
			return fmt.Errorf("is not a CIDR prefix (an address, \"/\" and the prefix length: 192.168.1.0/24, fd00::/8)")
		}
	}
	switch {
	case e == "":
		return fmt.Errorf("is empty: list public, an IP address, a CIDR prefix or a host name")
	case strings.Contains(e, "://") || strings.Contains(e, "/"):
		return fmt.Errorf("is a URL or a path: list only its host (nodered.lan), an IP address or a CIDR prefix")
	case strings.Contains(e, "*"):
		return fmt.Errorf("has a wildcard: list each host name, or the CIDR prefix its addresses are in")
	case strings.Contains(e, "@"):
		return fmt.Errorf("has user information: list only the host")
	}
	if h, _, err := net.SplitHostPort(e); err == nil && h != "" {
		return fmt.Errorf("has a port: list only the host (every port of an allowed host is allowed)")
	}
	if !hostName(e) {
		return fmt.Errorf("is not public, an IP address, a CIDR prefix or a host name (letters, digits, \"-\", \"_\" and dots)")
	}
	return nil
}

// hostName reports whether s is a DNS host name: dot-separated labels of
// letters, digits, "-" and "_", 1 to 63 bytes each, 253 in all.
func hostName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(strings.TrimSuffix(s, "."), ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// validPrefix reports whether s is an IP address or a CIDR prefix.
func validPrefix(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}
