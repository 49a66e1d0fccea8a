// Package config reads switchbridge's YAML config strictly: an unknown key, a
// value of the wrong type or a rule broken is a problem reported with its
// file and line, and every problem in a file is reported at once.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Defaults for keys the config leaves out.
const (
	DefaultListen          = "127.0.0.1:8080"
	DefaultMetricsListen   = "127.0.0.1:9180"
	DefaultDataDir         = "/var/lib/switchbridge"
	DefaultTokenLifetime   = 90 * 24 * time.Hour
	DefaultCodeLifetime    = 10 * time.Minute
	MaxCodeLifetime        = 24 * time.Hour // the spec's limit
	DefaultCommandTimeout  = 5 * time.Second
	DefaultShutdownTimeout = 10 * time.Second
)

// Config is one switchbridge config file.
type Config struct {
	Server    Server     `yaml:"server"`
	DataDir   string     `yaml:"data_dir"`
	OAuth     OAuth      `yaml:"oauth"`
	Log       Log        `yaml:"log"`
	MQTT      yaml.Node  `yaml:"mqtt"` // read by the mqtt driver
	Demo      *Demo      `yaml:"demo"`
	Locations []Location `yaml:"locations"`

	// File is the path the config was read from ("" when parsed from memory).
	File string `yaml:"-"`
}

// Server is the HTTP side of the daemon.
type Server struct {
	Listen string `yaml:"listen"`
	// PublicURL is the address clients reach the hub at: the auth_url and the
	// base_url advertised by discovery. Empty means http://<listen address>.
	PublicURL       string   `yaml:"public_url"`
	MetricsListen   string   `yaml:"metrics_listen"` // "off" disables the metrics listener
	CommandTimeout  Duration `yaml:"command_timeout"`
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
}

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
	ID      string
	Name    string
	Driver  string
	Options *yaml.Node // a mapping node with the driver's own keys
	Line    int
}

// UnmarshalYAML splits the common keys from the driver's own.
func (s *Switch) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return typeError(n, "a switch must be a mapping with id, name and driver")
	}
	s.Line = n.Line
	s.Options = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var dst *string
		switch k.Value {
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
	return nil
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

// LoadAll reads the config at path like Load, but returns what could be
// decoded together with every problem found, so a checker can go on to
// check the drivers' keys too. The config is nil only when the file could
// not be read or is not YAML at all.
func LoadAll(path string) (*Config, *Problems, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading config: %w", err)
	}
	cfg, ps := Check(data, path)
	return cfg, ps, nil
}

// Check decodes and checks a config, going on past problems so that all of
// them are found: unknown keys, wrong types and broken rules. The config is
// nil only when the text is not YAML.
func Check(data []byte, file string) (*Config, *Problems) {
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
	// yaml.v3 decodes what it can around a value of the wrong type, so the
	// rules below still see the rest of the file.
	ps.Merge(DecodeStrict(&doc, cfg), 0)
	cfg.applyDefaults()
	cfg.validate(ps, &doc)
	ps.Err() // sorts by line
	return cfg, ps
}

func (c *Config) applyDefaults() {
	if c.Server.Listen == "" {
		c.Server.Listen = DefaultListen
	}
	if c.Server.MetricsListen == "" {
		c.Server.MetricsListen = DefaultMetricsListen
	}
	if c.Server.CommandTimeout == 0 {
		c.Server.CommandTimeout = Duration(DefaultCommandTimeout)
	}
	if c.Server.ShutdownTimeout == 0 {
		c.Server.ShutdownTimeout = Duration(DefaultShutdownTimeout)
	}
	c.Server.PublicURL = strings.TrimRight(c.Server.PublicURL, "/")
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
		if d := os.Getenv("STATE_DIRECTORY"); d != "" { // set by systemd's StateDirectory=
			c.DataDir = strings.Split(d, ":")[0]
		}
	}
	if c.OAuth.TokenLifetime == 0 {
		c.OAuth.TokenLifetime = Duration(DefaultTokenLifetime)
	}
	if c.OAuth.CodeLifetime == 0 {
		c.OAuth.CodeLifetime = Duration(DefaultCodeLifetime)
	}
	if c.Log.Format == "" {
		c.Log.Format = "text"
	}
	if c.Log.Level == "" {
		c.Log.Level = "info"
	}
}

// AdvertisedURL is the address clients are told to use ({auth_url} and
// base_url): public_url when set, else http:// and the listen address, with
// an unspecified host (0.0.0.0, [::]) replaced by loopback, the only
// address that is sure to reach it. boundAddr is the address actually bound
// (it differs from server.listen for port 0); "" means server.listen.
func (c *Config) AdvertisedURL(boundAddr string) string {
	if c.Server.PublicURL != "" {
		return c.Server.PublicURL
	}
	if boundAddr == "" {
		boundAddr = c.Server.Listen
	}
	host, port, err := net.SplitHostPort(boundAddr)
	if err != nil {
		return "http://" + boundAddr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// SwitchIDPattern is what a switch id may look like: it appears in URLs,
// logs and metric labels.
var SwitchIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func (c *Config) validate(ps *Problems, doc *yaml.Node) {
	line := func(path ...string) *yaml.Node { return find(doc, path...) }
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		ps.Add(line("server", "listen"), "server.listen %q is not host:port", c.Server.Listen)
	}
	if c.Server.MetricsListen != "off" {
		if _, _, err := net.SplitHostPort(c.Server.MetricsListen); err != nil {
			ps.Add(line("server", "metrics_listen"), "server.metrics_listen %q is not host:port (or off)", c.Server.MetricsListen)
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
		}
	}
	if c.Server.CommandTimeout < 0 || c.Server.ShutdownTimeout < 0 {
		ps.Add(line("server"), "server timeouts must be positive")
	}
	if c.OAuth.CodeLifetime < 0 || c.OAuth.CodeLifetime.Std() > MaxCodeLifetime {
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
	if len(c.Locations) == 0 {
		ps.Add(line("locations"), "no locations: configure at least one location with its switches")
	}
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
