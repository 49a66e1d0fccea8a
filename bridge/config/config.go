// Package config reads switchbridge's YAML config strictly: an unknown key, a
// value of the wrong type or a rule broken is a problem reported with its
// file and line, and every problem in a file is reported at once.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"reflect"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
)

// Defaults for keys the config leaves out.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultMetricsListen   = "127.0.0.1:9180"
	DefaultDataDir         = "/var/lib/switchbridge"
	DefaultShutdownTimeout = 10 * time.Second
	// DefaultMaxConnections bounds the API's open connections: plenty for a
	// household's clients, a few megabytes of memory at most.
	DefaultMaxConnections = 256
	// DefaultMemoryLimit is Go's soft memory limit for serve: a quarter of
	// a 512 MB Pi, several times what the hub needs idle (about 20 MB).
	DefaultMemoryLimit = 128 << 20
)

// Config is one switchbridge config file.
type Config struct {
	Server    Server     `yaml:"server"`
	DataDir   string     `yaml:"data_dir"`
	OAuth     OAuth      `yaml:"oauth"`
	Log       Log        `yaml:"log"`
	Demo      *Demo      `yaml:"demo"`
	Locations []Location `yaml:"locations"`
	// Platform makes the daemon a hub of another switchbridge; nil: it is
	// its own platform.
	Platform *Platform `yaml:"platform"`
	// Webhooks bounds where clients' webhooks may point.
	Webhooks Webhooks `yaml:"webhooks"`

	// Sections holds every top-level key that is not one of the above, by
	// name, as it was written: a driver's settings (mqtt:), which that
	// driver decodes itself. The config does not know which names the
	// drivers claim; drivers.Build reports a section no driver claims as an
	// unknown key, so a typo is still an error.
	Sections map[string]Section `yaml:"-"`

	// File is the path the config was read from ("" when parsed from memory).
	File string `yaml:"-"`
	// TLSLine is the line of server.tls, for problems found with its files
	// after the config is read (check-config).
	TLSLine int `yaml:"-"`
	// secretLines are the lines of the keys naming secret files, for
	// warnings about their modes (SecretFiles).
	secretLines map[string]int
}

// Webhooks is the webhooks: section.
type Webhooks struct {
	// Allow lists the hosts (names as written in a URL, IP addresses or
	// CIDR prefixes) a webhook may point at; empty: any, since a receiver
	// on the LAN (Node-RED) is the usual one.
	Allow []string `yaml:"allow"`
}

// Section is one top-level key of the config kept raw.
type Section struct {
	Key   *yaml.Node // the key, for the line of a problem with the name
	Value *yaml.Node // the value, as written
}

// Keys lists the config's own top-level keys, sorted: those that are not
// a Section.
func Keys() []string { return sortedKeys(yamlFields(reflect.TypeOf(Config{}))) }

// Server is the HTTP side of the daemon.
type Server struct {
	Listen string `yaml:"listen"`
	// PublicURL is the address clients reach the hub at: the auth_url and the
	// base_url advertised by discovery. Empty means http://<listen address>.
	PublicURL       string   `yaml:"public_url"`
	MetricsListen   string   `yaml:"metrics_listen"` // "off" disables the metrics listener
	CommandTimeout  Duration `yaml:"command_timeout"`
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// TLS, when set, makes the hub serve HTTPS itself on listen.
	TLS TLS `yaml:"tls"`
	// TrustedProxies are the reverse proxies whose X-Forwarded-For or
	// Forwarded header is believed about who the client is. From any other
	// peer those headers are ignored: anyone can send them.
	TrustedProxies Prefixes `yaml:"trusted_proxies"`
	// MaxConnections caps the API's open connections; past it a client
	// gets 503 and its connection is closed.
	MaxConnections int `yaml:"max_connections"`
	// MemoryLimit is the Go runtime's soft memory limit
	// (debug.SetMemoryLimit); GOMEMLIMIT in the environment wins.
	MemoryLimit ByteSize `yaml:"memory_limit"`
	// RateLimit caps the installation API's requests per installation;
	// DefaultRateRequests per DefaultRatePer when left out.
	RateLimit RateLimit `yaml:"rate_limit"`
}

// TLS is the certificate and key files the hub serves HTTPS with. They are
// read again on SIGHUP and when they change (a renewal), so both may be
// replaced while the hub runs.
type TLS struct {
	// CertFile holds the certificate, then any intermediates (certbot's
	// fullchain.pem); KeyFile its private key (privkey.pem).
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// HSTSMaxAge is the max-age of the Strict-Transport-Security header
	// the hub sends when it serves HTTPS itself; DefaultHSTSMaxAge when
	// the key is left out, 0 for no header.
	HSTSMaxAge Duration `yaml:"hsts_max_age"`
}

// DefaultHSTSMaxAge is modest on purpose: a browser that saw the header
// refuses plain HTTP to the host for that long, so a hub moved back to
// plain HTTP (or behind a proxy on another port) is out of reach for at
// most a week, while a user who logs in now and then stays protected.
const DefaultHSTSMaxAge = 7 * 24 * time.Hour

// HSTS returns the Strict-Transport-Security max-age to send, 0 for none.
func (t TLS) HSTS() time.Duration { return t.HSTSMaxAge.Std() }

// Enabled reports whether the config asks for TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// OAuth holds the lifetimes of what the authorization server issues.
type OAuth struct {
	TokenLifetime Duration `yaml:"token_lifetime"`
	CodeLifetime  Duration `yaml:"code_lifetime"`
}

// Log chooses the log format and level.
type Log struct {
	Format string `yaml:"format"` // text or json
	Level  string `yaml:"level"`  // debug, info, warn or error
}

// Demo, when present, makes serve create a demo user and a published demo app
// and serve a demo third-party client at /demo/.
type Demo struct {
	User     string `yaml:"user"`
	Password string `yaml:"password"`
}

// Location is a grouping of switches.
type Location struct {
	ID       int64    `yaml:"id"`
	Name     string   `yaml:"name"`
	Switches []Switch `yaml:"switches"`
	Line     int      `yaml:"-"`
}

// Switch is one switch's config: the keys every switch has, and Options, the
// rest of its mapping, which its driver decodes.
type Switch struct {
	ID     string
	Name   string
	Driver string
	// MaxChanges caps how often the switch's device may be commanded; nil
	// leaves it to the driver (a GPIO relay has a cap, other devices none).
	MaxChanges *ChangeLimit
	Options    *yaml.Node // a mapping node with the driver's own keys
	Line       int
}

// SwitchKeys lists the keys every switch has, whatever its driver, sorted:
// UnmarshalYAML keeps them out of Options, so a driver (or an MQTT
// profile) must not take one of them for a key of its own, which would
// never reach it.
func SwitchKeys() []string { return []string{"driver", "id", "max_changes", "name"} }

// UnmarshalYAML splits the common keys from the driver's own
// (SwitchKeys).
func (s *Switch) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return typeError(n, "a switch must be a mapping with id, name and driver")
	}
	s.Line = n.Line
	s.Options = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	var limitErr error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var dst *string
		switch k.Value {
		case "max_changes":
			s.MaxChanges = new(ChangeLimit)
			// Its problems are reported once the common keys are read:
			// they are what the other checks need.
			limitErr = s.MaxChanges.UnmarshalYAML(v)
			continue
		case "id":
			dst = &s.ID
		case "name":
			dst = &s.Name
		case "driver":
			dst = &s.Driver
		default:
			s.Options.Content = append(s.Options.Content, k, v)
			continue
		}
		if v.Kind != yaml.ScalarNode {
			return typeError(v, k.Value+" must be a string")
		}
		*dst = v.Value
	}
	return limitErr
}

// Duration is a time.Duration written as "5s", "10m" or "2160h".
type Duration time.Duration

// UnmarshalYAML parses Go duration syntax.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return typeError(n, fmt.Sprintf("%q is not a duration (examples: 5s, 10m, 2160h)", n.Value))
	}
	*d = Duration(v)
	return nil
}

// typeError reports a bad value the way yaml.v3 reports its own type errors,
// which lets decoding go on with the rest of the file (a plain error would
// stop it, hiding every later problem).
func typeError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// Load reads and checks the config at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return Parse(data, path)
}

// Parse checks a config held in memory; file names it in messages. It
// returns the config only when it has no problem.
func Parse(data []byte, file string) (*Config, error) {
	cfg, ps := Check(data, file)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// LoadForServe is Load plus the checks against this machine that serve
// needs before it binds: every listen address's host resolves, to an
// address of this machine. A reload uses Load: it keeps the listeners it
// has, and a name server that is down must not refuse it.
func LoadForServe(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, ps := check(data, path, true)
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// LoadAll reads the config at path and checks it as LoadForServe does, but
// returns what could be decoded together with every problem found, so a
// checker can go on to check the drivers' keys too. The config is nil only
// when the file could not be read or is not YAML at all.
func LoadAll(path string) (*Config, *Problems, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, ps := check(data, path, true)
	return cfg, ps, nil
}

// Check decodes and checks a config, going on past problems so that all of
// them are found: unknown keys, wrong types and broken rules. The config is
// nil only when the text is not YAML.
func Check(data []byte, file string) (*Config, *Problems) {
	return check(data, file, false)
}

// check is Check, with the checks against this machine (checkHost) when
// host is set.
func check(data []byte, file string, host bool) (*Config, *Problems) {
	ps := &Problems{File: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		ps.List = append(ps.List, parseYAMLMessage(err.Error()))
		return nil, ps
	}
	if doc.Kind == 0 {
		ps.Add(nil, "the config is empty")
		return nil, ps
	}
	cfg := &Config{File: file}
	own := splitSections(cfg, &doc, ps)
	// yaml.v3 decodes what it can around a value of the wrong type, so the
	// rules below still see the rest of the file.
	ps.Merge(DecodeStrict(own, cfg), 0)
	cfg.applyDefaults()
	cfg.validate(ps, &doc)
	if host {
		cfg.checkHost(ps, &doc)
	}
	ps.Err() // sorts by line
	return cfg, ps
}

// splitSections moves every top-level key that is not the config's own
// into cfg.Sections and returns the document less those keys, for decoding.
// A section given twice is reported the way yaml.v3 reports a duplicated key
// of its own (it sees only the keys it decodes).
func splitSections(cfg *Config, doc *yaml.Node, ps *Problems) *yaml.Node {
	root := doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return doc // DecodeStrict reports the type
	}
	fields := yamlFields(reflect.TypeOf(Config{}))
	own := *root
	own.Content = nil
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		// "<<" merges a mapping into this one: yaml.v3 resolves it while
		// decoding the config's own keys.
		if _, ok := fields[k.Value]; ok || k.Value == "<<" || k.Kind != yaml.ScalarNode {
			own.Content = append(own.Content, k, v)
			continue
		}
		if prev, dup := cfg.Sections[k.Value]; dup {
			ps.Add(k, "mapping key %q already defined at line %d", k.Value, prev.Key.Line)
			continue
		}
		if cfg.Sections == nil {
			cfg.Sections = map[string]Section{}
		}
		cfg.Sections[k.Value] = Section{Key: k, Value: v}
	}
	return &own
}

func (c *Config) applyDefaults() {
	if c.Server.Listen == "" {
		c.Server.Listen = DefaultListen
	}
	if c.Server.MetricsListen == "" {
		c.Server.MetricsListen = DefaultMetricsListen
	}
	if c.Server.CommandTimeout == 0 {
		c.Server.CommandTimeout = Duration(bridge.DefaultCommandTimeout)
	}
	if c.Server.ShutdownTimeout == 0 {
		c.Server.ShutdownTimeout = Duration(DefaultShutdownTimeout)
	}
	if c.Server.MaxConnections == 0 {
		c.Server.MaxConnections = DefaultMaxConnections
	}
	if c.Server.MemoryLimit == 0 {
		c.Server.MemoryLimit = DefaultMemoryLimit
	}
	if c.Server.RateLimit == (RateLimit{}) {
		c.Server.RateLimit = RateLimit{Requests: DefaultRateRequests, Per: Duration(DefaultRatePer)}
	}
	c.Server.PublicURL = strings.TrimRight(c.Server.PublicURL, "/")
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
		if d := os.Getenv("STATE_DIRECTORY"); d != "" { // set by systemd's StateDirectory=
			c.DataDir = strings.Split(d, ":")[0]
		}
	}
	if c.OAuth.TokenLifetime == 0 {
		c.OAuth.TokenLifetime = Duration(bridge.DefaultTokenLifetime)
	}
	if c.OAuth.CodeLifetime == 0 {
		c.OAuth.CodeLifetime = Duration(bridge.DefaultCodeLifetime)
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
}

// AdvertisedURL is the address clients are told to use ({auth_url} and
// base_url): public_url when set, else http:// (https:// with server.tls)
// and the listen address, with an unspecified host (0.0.0.0, [::]) replaced
// by loopback, the only address that is sure to reach it. boundAddr is the address actually bound
// (it differs from server.listen for port 0); "" means server.listen.
func (c *Config) AdvertisedURL(boundAddr string) string {
	if c.Server.PublicURL != "" {
		return c.Server.PublicURL
	}
	if boundAddr == "" {
		boundAddr = c.Server.Listen
	}
	scheme := "http://"
	if c.Server.TLS.Enabled() {
		scheme = "https://"
	}
	host, port, err := net.SplitHostPort(boundAddr)
	if err != nil {
		return scheme + boundAddr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return scheme + net.JoinHostPort(host, port)
}

// SwitchIDPattern is what a switch id may look like: it appears in URLs,
// logs and metric labels.
var SwitchIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (c *Config) validate(ps *Problems, doc *yaml.Node) {
	line := func(path ...string) *yaml.Node { return find(doc, path...) }
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
			ps.Add(line("server", "public_url"), "server.public_url %q must be an absolute http(s) URL without user, query or fragment", c.Server.PublicURL)
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
		if a == "" || strings.ContainsAny(a, " /:@") && !validPrefix(a) {
			ps.Add(line("webhooks", "allow"), "webhooks.allow %q must be a host name, an IP address or a CIDR prefix", a)
		}
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
	if len(c.Locations) == 0 {
		ps.Add(line("locations"), "no locations: configure at least one location with its switches")
	}
	c.validatePlatform(ps, doc)
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

// Lookup returns the value node at path below n (a document or mapping
// node), or nil. Drivers use it to give a problem the line of the key.
func Lookup(n *yaml.Node, path ...string) *yaml.Node {
	if n == nil {
		return nil
	}
	return find(n, path...)
}

// find returns the value node at path in a document, or nil.
func find(doc *yaml.Node, path ...string) *yaml.Node {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, key := range path {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
				break
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// IsProblems reports whether err lists config problems (as opposed to, say,
// a file that could not be read).
func IsProblems(err error) bool {
	var ps *Problems
	return errors.As(err, &ps)
}

// validPrefix reports whether s is an IP address or a CIDR prefix.
func validPrefix(s string) bool {
	if _, err := netip.ParsePrefix(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}
