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

// A connection string pasted in place of dsn_file's path is refused, and
// neither the problem nor ReadDSN (migrate-storage's --to-dsn-file is not
// validated with a config) repeats it: its password would be in the
// terminal and the journal.
func TestDSNFileThatIsAConnectionString(t *testing.T) {
	for _, f := range []string{"testdata/dsn-url.bad.yaml", "testdata/dsn-keyvalue.bad.yaml", "testdata/dsn-userinfo.bad.yaml"} {
		_, err := config.Load(f)
		if err == nil {
			t.Errorf("%s: accepted", f)
			continue
		}
		msg := err.Error()
		for _, secret := range []string{"hunter2", "db.lan", "switchbridge@", "password="} {
			if strings.Contains(msg, secret) {
				t.Errorf("%s: the problem repeats %q of the value:\n%s", f, secret, msg)
			}
		}
		if !strings.Contains(msg, "put the connection string on the first line of a file") {
			t.Errorf("%s: the problem does not say what to do:\n%s", f, msg)
		}
	}
	for _, v := range []string{
		"postgres://sb:hunter2@db/sb", "postgresql://sb:hunter2@db/sb", "POSTGRES:sb", "host=db password=hunter2",
		"sb:hunter2@db/sb", "/etc/switchbridge/pg.dsn\npassword", "/etc/switch bridge/hunter2", "\t/etc/pg.dsn",
	} {
		_, err := (&config.Postgres{DSNFile: v}).ReadDSN()
		if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "storage.postgres.dsn_file must be the path of a file") {
			t.Errorf("ReadDSN of %q: %v", v, err)
		}
	}
	// Paths as they are: their errors name them.
	for _, v := range []string{"/etc/switchbridge/pg.dsn", "pg.dsn", "/run/credentials/switchbridge.service/pg-dsn", "/srv/a@b/pg.dsn", "/etc/sb/pg:1.dsn"} {
		_, err := (&config.Postgres{DSNFile: v}).ReadDSN()
		if err == nil || !strings.Contains(err.Error(), v) || strings.Contains(err.Error(), "must be the path of a file") {
			t.Errorf("ReadDSN of the missing path %q: %v", v, err)
		}
	}
}
