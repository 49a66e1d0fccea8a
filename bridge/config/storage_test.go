package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/config"
)

// The DSN file is a secret file (warned about when others can read it),
// read as its first line, and never quoted in an error.
func TestPostgresDSNFile(t *testing.T) {
	dir := t.TempDir()
	dsnFile := filepath.Join(dir, "pg.dsn")
	if err := os.WriteFile(dsnFile, []byte("  postgres://sb:hunter2@db/sb  \nsecond line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load("p.yaml", config.Text("storage:\n  postgres:\n    dsn_file: "+dsnFile+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	dsn, err := cfg.Storage.Postgres.ReadDSN()
	if err != nil || dsn != "postgres://sb:hunter2@db/sb" {
		t.Errorf("ReadDSN = %q, %v", dsn, err)
	}
	var named bool
	for _, s := range cfg.SecretFiles() {
		if s.Key == "storage.postgres.dsn_file" && s.Path == dsnFile && s.Line == 3 {
			named = true
		}
	}
	if !named {
		t.Errorf("the DSN file is not among the secret files: %+v", cfg.SecretFiles())
	}
	exposed := config.ExposedSecrets(cfg.SecretFiles())
	if len(exposed) != 1 || !strings.Contains(exposed[0].Msg, dsnFile) {
		t.Errorf("a DSN file others can read: %+v", exposed)
	}
	if err := os.WriteFile(dsnFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Storage.Postgres.ReadDSN(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("an empty DSN file: %v", err)
	}
	os.Remove(dsnFile)
	if _, err := cfg.Storage.Postgres.ReadDSN(); err == nil || !strings.Contains(err.Error(), "storage.postgres.dsn_file") {
		t.Errorf("a missing DSN file: %v", err)
	}
}
