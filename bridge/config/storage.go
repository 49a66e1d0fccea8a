package config

// The storage section: where a platform keeps its records, and its rules.

import (
	"errors"
	"fmt"
	"os"
	"strings"

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

// ReadDSN reads storage.postgres.dsn_file: the connection string, its
// first line with surrounding space trimmed. Errors name the file, never
// its contents.
func (p *Postgres) ReadDSN() (string, error) {
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
