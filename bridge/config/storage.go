package config

// The storage section: where a platform keeps its records, and its rules.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"unicode"

	"gopkg.in/yaml.v3"
)

// Storage is the storage: section.
type Storage struct {
	// Postgres, when set, keeps the platform's records in PostgreSQL,
	// where any number of platform processes with the same config share
	// them. Without it they are in SQLite in data_dir.
	Postgres *Postgres `yaml:"postgres"`
}

// Postgres is storage.postgres.
type Postgres struct {
	// DSNFile holds the connection string (postgres://user:password@host/db
	// or key=value pairs), one line, readable by the service only: it
	// usually holds a password, so it is never in the config or the log.
	DSNFile string `yaml:"dsn_file"`
}

func (c *Config) validateStorage(ps *Problems, doc *yaml.Node) {
	n := find(doc, "storage", "postgres")
	if n == nil {
		if s := find(doc, "storage"); s != nil && c.Storage.Postgres == nil && s.Kind == yaml.MappingNode && len(s.Content) == 0 {
			ps.Add(s, "storage is empty: leave it out for SQLite in data_dir, or set storage.postgres.dsn_file")
		}
		return
	}
	if c.Storage.Postgres == nil || c.Storage.Postgres.DSNFile == "" {
		ps.Add(n, "storage.postgres needs dsn_file: a file holding the PostgreSQL connection string")
		return
	}
	if err := checkDSNPath(c.Storage.Postgres.DSNFile); err != nil {
		ps.Add(find(doc, "storage", "postgres", "dsn_file"), "%v", err)
	}
	if c.Platform != nil {
		ps.Add(n, "storage.postgres is for a platform: a hub keeps its replica in SQLite in data_dir (remove storage, or platform)")
	}
	if c.Demo != nil {
		ps.Add(find(doc, "demo"), "demo is for trying switchbridge on one machine, not on PostgreSQL: remove demo, or storage.postgres")
	}
	if len(c.Locations) > 0 {
		// Every platform process with this config would drive the same
		// switches, each with its own connection to them.
		ps.Add(find(doc, "locations"), "a platform on PostgreSQL has no switches of its own (each of its processes would drive them): "+
			"move the locations to a hub, which keeps its own SQLite")
	}
}

// errNotADSNPath is the problem of a dsn_file that is not a file's path.
// It never quotes the value: what is there in place of a path is, most
// likely, the connection string itself, password and all, and this
// message goes to the terminal, the journal and check-config's output.
var errNotADSNPath = errors.New("storage.postgres.dsn_file must be the path of a file, but its value looks like a connection string " +
	"(the value is not repeated here: it may hold a password): put the connection string on the first line of a file " +
	"only the service can read (chmod 600), set dsn_file to that file's path, and remove the password from this config")

// checkDSNPath refuses a dsn_file value that is not a plausible file
// path: one that has a URL's scheme ("postgres://…"), key=value pairs
// ("host=db password=…"), a user:password@host, or whitespace or control
// characters no path of a config file has. A path could hold most of
// these on Linux, but none a service's secret file would, and the cost of
// the mistake is a password in the log.
func checkDSNPath(p string) error {
	lower := strings.ToLower(p)
	switch {
	case strings.Contains(p, "://"), strings.HasPrefix(lower, "postgres:"), strings.HasPrefix(lower, "postgresql:"),
		strings.Contains(p, "="),
		strings.Contains(p, "@") && strings.Contains(p, ":"),
		strings.IndexFunc(p, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return errNotADSNPath
	}
	return nil
}

// ReadDSN reads storage.postgres.dsn_file: the connection string, its
// first line with surrounding space trimmed. Errors name the file, never
// its contents; a dsn_file that is no path (migrate-storage's
// --to-dsn-file is not validated with the config) is refused without
// being quoted.
func (p *Postgres) ReadDSN() (string, error) {
	if err := checkDSNPath(p.DSNFile); err != nil {
		return "", err
	}
	b, err := os.ReadFile(p.DSNFile)
	if err != nil {
		return "", fmt.Errorf("storage.postgres.dsn_file: %w", err)
	}
	dsn, _, _ := strings.Cut(string(b), "\n")
	dsn = strings.TrimSpace(dsn)
	if dsn == "" {
		return "", errors.New("storage.postgres.dsn_file " + p.DSNFile + " is empty: put the connection string on its first line")
	}
	return dsn, nil
}
