package config

// Loading a config: one Load, whose options say where the text comes from,
// whether the checks against this machine run, and whether to go on past
// problems; the decoding itself, the drivers' sections kept raw, and the
// defaults.

import (
	"fmt"
	"os"
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/switchbridge/switchbridge/bridge"
)

// Option changes how Load reads and checks a config.
type Option func(*loadOptions)

type loadOptions struct {
	text    string // the config's text, instead of the file's
	hasText bool
	host    bool      // the checks against this machine (checkHost)
	all     *Problems // where problems go when Load goes on past them
}

// Text makes Load check text instead of reading the file: path then only
// names the config in messages. For a config built in memory (tests).
func Text(text string) Option {
	return func(o *loadOptions) { o.text, o.hasText = text, true }
}

// ForServe adds the checks against this machine that serve needs before
// it binds: every listen address's host resolves, to an address of this
// machine. check-config and the commands that open the store check the
// same. A reload leaves it out: it keeps the listeners it has, and a name
// server that is down must not refuse it.
func ForServe() Option {
	return func(o *loadOptions) { o.host = true }
}

// AllProblems makes Load go on past the config's problems, so that a
// checker can go on to check the drivers' keys too and list everything at
// once: every problem is added to ps (whose File becomes path), and Load
// returns what could be decoded, nil only when the text is not YAML at
// all. Load's error is then only that the file could not be read.
func AllProblems(ps *Problems) Option {
	return func(o *loadOptions) { o.all = ps }
}

// Load reads the config at path and checks it: unknown keys, wrong types
// and broken rules, every one of them reported at once with its line. It
// returns the config only when it has no problem (but see AllProblems);
// problems come as a *Problems (IsProblems), anything else is the file's
// own error.
func Load(path string, opts ...Option) (*Config, error) {
	var o loadOptions
	for _, opt := range opts {
		opt(&o)
	}
	data := []byte(o.text)
	if !o.hasText {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("reading config: %w", err)
		}
	}
	ps := o.all
	if ps == nil {
		ps = &Problems{}
	}
	ps.File = path
	cfg := check(data, path, o.host, ps)
	if o.all != nil {
		return cfg, nil
	}
	if err := ps.Err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// check decodes and checks a config into ps, going on past problems so
// that all of them are found; with host, the checks against this machine
// too (checkHost). The config is nil only when the text is not YAML.
func check(data []byte, file string, host bool, ps *Problems) *Config {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		ps.List = append(ps.List, parseYAMLMessage(err.Error()))
		return nil
	}
	if doc.Kind == 0 {
		ps.Add(nil, "the config is empty")
		return nil
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
	return cfg
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
