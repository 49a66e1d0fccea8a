package config

// The platform section, which makes the daemon a hub of another
// switchbridge, and its rules.

import (
	"fmt"
	"net/url"
	"strings"

	"gopkg.in/yaml.v3"
)

// Platform, when present, makes this daemon a hub of the platform at URL:
// it serves the installation API for the installations in its locations,
// from a replica of the platform's records, and leaves users, apps, OAuth
// and discovery to the platform. Without it a daemon is its own platform.
type Platform struct {
	// URL is the platform's public URL (its {auth_url}).
	URL string `yaml:"url"`
	// HubID is the id `switchbridge hub add` printed on the platform.
	HubID string `yaml:"hub_id"`
	// SecretFile holds the secret hub add printed (one line), readable by
	// the hub only.
	SecretFile string `yaml:"secret_file"`
}

func (c *Config) validatePlatform(ps *Problems, doc *yaml.Node) {
	if c.Platform == nil {
		if n := find(doc, "platform"); n != nil {
			ps.Add(n, "platform needs url, hub_id and secret_file")
		}
		return
	}
	line := func(path ...string) *yaml.Node {
		if n := find(doc, append([]string{"platform"}, path...)...); n != nil {
			return n
		}
		return find(doc, "platform")
	}
	p := c.Platform
	p.URL = strings.TrimRight(p.URL, "/")
	if u, err := url.Parse(p.URL); p.URL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.Path != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		ps.Add(line("url"), "platform.url %q must be the platform's public URL: absolute http(s), without path, user, query or fragment", RedactURL(p.URL))
	}
	if strings.TrimSpace(p.HubID) == "" {
		ps.Add(line("hub_id"), "platform.hub_id is required: the id `switchbridge hub add` printed on the platform")
	}
	if p.SecretFile == "" {
		ps.Add(line("secret_file"), "platform.secret_file is required: a file holding the secret `switchbridge hub add` printed")
	}
	if c.Demo != nil {
		ps.Add(find(doc, "demo"), "demo needs the platform role (users, apps, OAuth): a hub with platform: cannot have it")
	}
}

// RefusePlatformCommand is why command, which works on the platform's
// records, cannot run with this config: it is a hub's, and a hub holds
// only a replica of those records. nil on a platform or a single box.
func (c *Config) RefusePlatformCommand(command string) error {
	if c.Platform == nil {
		return nil
	}
	return fmt.Errorf("%s is the config of a hub of %s, and %q belongs to the platform: run it there, with the platform's config (a hub keeps only a replica of the platform's records)",
		c.File, c.Platform.URL, command)
}

// RefuseMoveToPostgres is why this config's records cannot move to
// PostgreSQL: it is a hub's, which keeps its SQLite. nil on a platform.
func (c *Config) RefuseMoveToPostgres() error {
	if c.Platform == nil {
		return nil
	}
	return fmt.Errorf("%s is the config of a hub of %s: a hub keeps its SQLite (it holds a replica of the platform's records); only a platform moves to PostgreSQL",
		c.File, c.Platform.URL)
}

// PlatformWithoutSwitches reports whether this config makes a platform
// that runs no switch itself: its hubs hold every switch, and what
// happens to them (the audit log) is theirs.
func (c *Config) PlatformWithoutSwitches() bool {
	return c.Platform == nil && len(c.Locations) == 0
}
