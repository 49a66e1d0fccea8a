package config

// Secret files the config names, and the warning when others can read
// them.

import (
	"fmt"
	"os"
	"strings"

	"gopkg.in/yaml.v3"
)

// Secret files: a TLS private key or the hub's link secret that every
// user of the machine can read is a key handed to anyone with a shell on
// it (a compromised service, a guest account). serve and check-config warn
// about such a file rather than refuse it, as Mosquitto does for its
// password and ACL files ("world readable permissions", a warning, with
// refusal only announced); Caddy loads the key files it is given without
// looking at their modes. A refusal at start would turn a renewal hook that
// got the mode wrong into a hub that does not come back, and the warning
// says exactly what to run.

// SecretFile is a file a config names that holds a secret.
type SecretFile struct {
	Key  string // the config key naming it, e.g. server.tls.key_file
	Path string
	Line int // the line of the key, 0 when unknown
}

// ExposedMode is the part of a file's mode that gives users other than
// its owner and group access: a secret file must have none of it. The
// group may read (the deploy hook in the config README installs the TLS
// key 0640 for the service's group).
const ExposedMode os.FileMode = 0o007

// noteSecretLines keeps the lines of the keys that name secret files.
func (c *Config) noteSecretLines(doc *yaml.Node) {
	c.secretLines = map[string]int{}
	for _, path := range [][]string{{"server", "tls", "key_file"}, {"platform", "secret_file"}, {"storage", "postgres", "dsn_file"}} {
		if n := find(doc, path...); n != nil {
			c.secretLines[strings.Join(path, ".")] = n.Line
		}
	}
}

// SecretFiles lists the secret files the config names (a driver's own,
// such as an MQTT client key, come from its driver).
func (c *Config) SecretFiles() []SecretFile {
	var out []SecretFile
	if c.Server.TLS.KeyFile != "" {
		out = append(out, SecretFile{"server.tls.key_file", c.Server.TLS.KeyFile, c.secretLines["server.tls.key_file"]})
	}
	if c.Platform != nil && c.Platform.SecretFile != "" {
		out = append(out, SecretFile{"platform.secret_file", c.Platform.SecretFile, c.secretLines["platform.secret_file"]})
	}
	if pg := c.Storage.Postgres; pg != nil && pg.DSNFile != "" {
		out = append(out, SecretFile{"storage.postgres.dsn_file", pg.DSNFile, c.secretLines["storage.postgres.dsn_file"]})
	}
	return out
}

// ExposedSecrets returns a warning for each file that users other than
// its owner and group may read or write. A file that cannot be read is
// not its business: serve and check-config report that on their own.
func ExposedSecrets(files []SecretFile) []Problem {
	var out []Problem
	for _, f := range files {
		fi, err := os.Stat(f.Path) // through symlinks: certbot's live/ files are links
		if err != nil || fi.Mode().Perm()&ExposedMode == 0 {
			continue
		}
		out = append(out, Problem{Line: f.Line, Msg: fmt.Sprintf(
			"%s %s can be read by every user of this machine (mode %04o): it holds a secret; run chmod o-rwx %s (and chgrp the service's group if it needs to read it)",
			f.Key, f.Path, fi.Mode().Perm(), f.Path)})
	}
	return out
}

// RedactURL is a URL as a problem may quote it: its user information
// (user:password@), parseable or not, replaced by "…@", so a URL written
// with a password in it is named without the password.
func RedactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return s
	}
	return scheme + "://…@" + rest[at+1:]
}
