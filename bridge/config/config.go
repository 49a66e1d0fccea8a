// Package config reads switchbridge's YAML config strictly: an unknown key, a
// value of the wrong type or a rule broken is a problem reported with its
// file and line, and every problem in a file is reported at once.
package config

// This file holds the Config type and its sections, as the YAML file
// writes them; load.go reads them, validate.go checks them.

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"time"

	"gopkg.in/yaml.v3"
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
	// Storage chooses where a platform keeps its records: nil Postgres,
	// the default, is the embedded SQLite database in data_dir.
	Storage Storage `yaml:"storage"`
	// Webhooks bounds where clients' webhooks may point.
	Webhooks Webhooks `yaml:"webhooks"`
	// Audit bounds the audit log of the commands the hub ran.
	Audit Audit `yaml:"audit"`

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
	// ListenLine is the line of server.listen (0 when it is left out),
	// for warnings about where it listens (PlainHTTPOnNetwork).
	ListenLine int `yaml:"-"`
	// MetricsListenLine is the line of server.metrics_listen (0 when it
	// is left out).
	MetricsListenLine int `yaml:"-"`
	// secretLines are the lines of the keys naming secret files, for
	// warnings about their modes (SecretFiles).
	secretLines map[string]int
}

// Webhooks is the webhooks: section.
type Webhooks struct {
	// Allow lists where a webhook may point: public (every public unicast
	// address), host names as written in a URL, IP addresses and CIDR
	// prefixes. Unset or empty means [public]: an app must not reach the
	// owner's network or this machine unless the owner lists them (a
	// Node-RED on the LAN: [public, 192.168.1.0/24]).
	Allow []string `yaml:"allow"`
}

// Audit is the audit: section: how long and how many records the hub
// keeps of the commands its installations sent (one per switch per
// command). Both are bounded, so the log never outgrows the hub's
// storage.
type Audit struct {
	// MaxAge is how long a record is kept; bridge.DefaultAuditMaxAge
	// when left out.
	MaxAge Duration `yaml:"max_age"`
	// MaxRows is how many records are kept at most, the oldest going
	// first; bridge.DefaultAuditMaxRows when left out.
	MaxRows int `yaml:"max_rows"`
}

// Bounds of the audit: section: a minute is the least that makes sense of
// a record; ten years and ten million records (about a gigabyte) the most
// a hub on an SD card should be asked to keep.
const (
	minAuditMaxAge  = time.Minute
	maxAuditMaxAge  = 10 * 365 * 24 * time.Hour
	maxAuditMaxRows = 10_000_000
)

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
	// PowerEventsEvery is how often at most a switch's readings alone
	// make an event on the streams and webhooks (an on/off change carries
	// its reading at once); bridge.DefaultReadingEvery when 0.
	PowerEventsEvery Duration `yaml:"power_events_every"`
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
	// Confirm makes the owner's console ask before it switches the
	// switch (a pump, a heater, a door): confirm: true.
	Confirm bool
	Options *yaml.Node // a mapping node with the driver's own keys
	Line    int
}

// SwitchKeys lists the keys every switch has, whatever its driver, sorted:
// UnmarshalYAML keeps them out of Options, so a driver (or an MQTT
// profile) must not take one of them for a key of its own, which would
// never reach it.
func SwitchKeys() []string { return []string{"confirm", "driver", "id", "max_changes", "name"} }

// UnmarshalYAML splits the common keys from the driver's own
// (SwitchKeys).
func (s *Switch) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return typeError(n, "a switch must be a mapping with id, name and driver")
	}
	s.Line = n.Line
	s.Options = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: n.Line, Column: n.Column}
	var limitErr, confirmErr error
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		var dst *string
		switch k.Value {
		case "confirm":
			// true or false, as YAML writes them: a "yes" or "on" here
			// is a typo, not a wish.
			if v.Kind != yaml.ScalarNode {
				confirmErr = typeError(v, "confirm must be true or false")
			} else if v.ShortTag() != "!!bool" || v.Decode(&s.Confirm) != nil {
				confirmErr = typeError(v, fmt.Sprintf("confirm must be true or false, not %q", v.Value))
			}
			continue
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
	// One *yaml.TypeError for both: decoding goes on past it, and
	// every problem keeps its line.
	var te yaml.TypeError
	for _, err := range []error{limitErr, confirmErr} {
		var e *yaml.TypeError
		if errors.As(err, &e) {
			te.Errors = append(te.Errors, e.Errors...)
		} else if err != nil {
			return err
		}
	}
	if len(te.Errors) > 0 {
		return &te
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

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

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
