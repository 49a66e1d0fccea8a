package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// writePostgresConfig writes a platform config on the PostgreSQL database
// at dsn (into a dsn_file of its own) and returns it with its address.
func writePostgresConfig(t *testing.T, dir, dsn string) (cfg, addr string) {
	t.Helper()
	addr = freePort(t)
	dsnFile := filepath.Join(dir, "pg.dsn")
	writeFile(t, dsnFile, withPassword(dsn)+"\n")
	cfg = filepath.Join(dir, "postgres.yaml")
	writeFile(t, cfg, fmt.Sprintf(`server:
  listen: %s
  metrics_listen: "off"
data_dir: %s
storage:
  postgres:
    dsn_file: %s
`, addr, filepath.Join(dir, "pg-data"), dsnFile))
	return cfg, addr
}

// pgTables lists the tables of the database at dsn.
func pgTables(t *testing.T, dsn string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestMigrateStorage(t *testing.T) {
	dir := t.TempDir()
	sqliteCfg, _ := writeConfig(t, dir)
	app := addDeveloperApp(t, sqliteCfg, "1")
	if r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--config", sqliteCfg); r.code != 0 {
		t.Fatalf("install: %+v", r)
	}
	if r := runCLI(t, "", "hub", "add", "garden", "--base-url", "http://garden.example", "--config", sqliteCfg); r.code != 0 {
		t.Fatalf("hub add: %+v", r)
	}
	dsn := pgtest.DSN(t)
	pgCfg, _ := writePostgresConfig(t, dir, dsn)
	listed := map[string]string{}
	for _, cmd := range []string{"user list", "app list"} {
		r := runCLI(t, "", append(strings.Fields(cmd), "--config", sqliteCfg)...)
		if r.code != 0 {
			t.Fatalf("%s on SQLite: %+v", cmd, r)
		}
		listed[cmd] = r.stdout
	}

	// Data dir by default; the target from the PostgreSQL config's
	// dsn_file, given as --to-dsn-file to the SQLite platform's config.
	r := runCLI(t, "", "migrate-storage", "--to", "postgres", "--to-dsn-file", filepath.Join(dir, "pg.dsn"), "--config", sqliteCfg)
	if r.code != 0 {
		t.Fatalf("migrate-storage: %+v", r)
	}
	for _, re := range []string{
		`copied .*/data/switchbridge\.db\n  into the PostgreSQL database "(test_\d+|t\d+_\d+)" as "postgres" at 127\.0\.0\.1:\d+:`,
		`\n +users +1\n`, `\n +apps +1\n`, `\n +installations +1\n`, `\n +tokens +1\n`, `\n +hubs +1\n`,
		`rows in all +\d+`, `verified: every table holds as many rows as in SQLite`, `the next change is \d+`,
	} {
		if !regexp.MustCompile(re).MatchString(r.stdout) {
			t.Errorf("migrate-storage output lacks %s:\n%s", re, r.stdout)
		}
	}
	if strings.Contains(r.stdout+r.stderr, "postgres://") {
		t.Errorf("migrate-storage printed the DSN:\n%s%s", r.stdout, r.stderr)
	}

	marker := filepath.Join(dir, "data", "moved-to-postgresql")
	if !strings.Contains(r.stdout, marker+" beside it makes switchbridge\nrefuse it from now on") {
		t.Errorf("migrate-storage does not say it marked the SQLite database:\n%s", r.stdout)
	}

	// The administration commands on PostgreSQL see what they saw on
	// SQLite.
	for cmd, want := range listed {
		got := runCLI(t, "", append(strings.Fields(cmd), "--config", pgCfg)...)
		if got.code != 0 || got.stdout != want {
			t.Errorf("%s on PostgreSQL: %+v; on SQLite %q", cmd, got, want)
		}
	}
	// The SQLite database is refused from now on, by the commands and by
	// serve, saying where the records went and how to use it anyway;
	// without the mark it serves again, as it was.
	moved := regexp.MustCompile(`switchbridge\.db was moved to PostgreSQL \(The records of .*switchbridge\.db were copied into the PostgreSQL database "[^"]+" as "postgres" at 127\.0\.0\.1:\d+ by switchbridge migrate-storage on \d{4}-\d\d-\d\dT[0-9:]+Z\.\): .*storage\.postgres\.dsn_file.*remove ` + regexp.QuoteMeta(marker))
	if r := runCLI(t, "", "user", "list", "--config", sqliteCfg); r.code != 1 || !moved.MatchString(r.stderr) {
		t.Errorf("user list on the moved SQLite database: %+v", r)
	}
	// serve as a process of its own: not under qemu-user (skipIfEmulated).
	if os.Getenv("SWITCHBRIDGE_TEST_EMULATED") == "" {
		if code, out := serveRefuses(t, sqliteCfg); code != 1 || !moved.MatchString(out) {
			t.Errorf("serve on the moved SQLite database: exit %d, want 1 with %s in\n%s", code, moved, out)
		}
	}
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if r := runCLI(t, "", "user", "list", "--config", sqliteCfg); r.code != 0 || r.stdout != listed["user list"] {
		t.Errorf("user list on SQLite once the mark is removed: %+v", r)
	}
	// The platform starts on it.
	p := startDaemon(t, pgCfg)
	if r := runCLI(t, "", "hub", "list", "--config", pgCfg); r.code != 0 || !strings.Contains(r.stdout, "garden") {
		t.Errorf("hub list on the running PostgreSQL platform: %+v", r)
	}
	p.cmd.Process.Kill()
	<-p.done

	// A second run is refused: it never merges.
	r = runCLI(t, "", "migrate-storage", "--from", "sqlite:"+filepath.Join(dir, "data", "switchbridge.db"), "--to", "postgres", "--config", pgCfg)
	if r.code != 1 || !strings.Contains(r.stderr, "never merges") {
		t.Errorf("second migrate-storage: %+v", r)
	}
}

// While the platform runs, the copy would miss what it writes next.
func TestMigrateStorageRefusesARunningPlatform(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	addDeveloperApp(t, cfg, "1")
	p := startDaemon(t, cfg)
	dsn := pgtest.DSN(t)
	writeFile(t, filepath.Join(dir, "pg.dsn"), dsn)
	r := runCLI(t, "", "migrate-storage", "--to", "postgres", "--to-dsn-file", filepath.Join(dir, "pg.dsn"), "--config", cfg)
	want := fmt.Sprintf("is open in process %d", p.cmd.Process.Pid)
	if r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "stop the platform first") {
		t.Errorf("migrate-storage under a running platform: %+v; want %q", r, want)
	}
	if tables := pgTables(t, dsn); len(tables) > 0 {
		t.Errorf("the refused migration touched PostgreSQL: %v", tables)
	}
	// Stopped, it moves.
	p.cmd.Process.Kill()
	<-p.done
	if r := runCLI(t, "", "migrate-storage", "--to", "postgres", "--to-dsn-file", filepath.Join(dir, "pg.dsn"), "--config", cfg); r.code != 0 {
		t.Errorf("migrate-storage once the platform stopped: %+v", r)
	}
}

func TestMigrateStorageRefusals(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	addDeveloperApp(t, cfg, "1")
	dsnFile := filepath.Join(dir, "pg.dsn")
	writeFile(t, dsnFile, "postgres://app:pw@127.0.0.1:1/x\n")
	hubCfg := filepath.Join(dir, "hub.yaml")
	secret := filepath.Join(dir, "hub.secret")
	writeFile(t, secret, "s\n")
	writeFile(t, hubCfg, fmt.Sprintf(`server:
  listen: %s
  metrics_listen: "off"
data_dir: %s
platform:
  url: http://platform.example
  hub_id: hub-1
  secret_file: %s
locations:
  - id: 1
    name: Home
    switches:
      - {id: lamp, name: Lamp, driver: virtual}
`, freePort(t), filepath.Join(dir, "data"), secret))

	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no target", []string{"--config", cfg}, 2, "needs --to TARGET"},
		{"another target", []string{"--to", "mysql", "--config", cfg}, 2, `--to takes postgres`},
		{"another source", []string{"--from", "postgres:x", "--to", "postgres", "--config", cfg}, 2, "--from takes sqlite:PATH"},
		{"a hub", []string{"--to", "postgres", "--to-dsn-file", dsnFile, "--config", hubCfg}, 1, "a hub keeps its SQLite"},
		{"no database there", []string{"--from", "sqlite:" + filepath.Join(dir, "nothing"), "--to", "postgres", "--to-dsn-file", dsnFile, "--config", cfg}, 1, "no SQLite database at " + filepath.Join(dir, "nothing")},
		{"no PostgreSQL named", []string{"--to", "postgres", "--config", cfg}, 1, "set storage.postgres.dsn_file in " + cfg + ", or give --to-dsn-file FILE"},
		{"unreachable PostgreSQL", []string{"--to", "postgres", "--to-dsn-file", dsnFile, "--config", cfg}, 1, "cannot reach the server at 127.0.0.1:1"},
	} {
		r := runCLI(t, "", append([]string{"migrate-storage"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%s: %+v; want exit %d with %q", c.name, r, c.code, c.msg)
		}
	}
}

// serve on a PostgreSQL database that is wrong, unreachable or of another
// schema: exit status 1, the reason, and never the password.
func TestServeRefusesHostilePostgres(t *testing.T) {
	const password = "Pw-never-printed-77"
	dsn := pgtest.DSN(t)
	// A database a newer switchbridge migrated.
	newer := pgtest.DSN(t)
	func() {
		cfg, _ := writePostgresConfig(t, t.TempDir(), newer)
		if r := runCLI(t, "", "user", "list", "--config", cfg); r.code != 0 { // creates the schema
			t.Fatalf("user list: %+v", r)
		}
		conn, err := pgx.Connect(context.Background(), newer)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "UPDATE schema_version SET version = version + 1"); err != nil {
			t.Fatal(err)
		}
	}()
	// A database of another application.
	foreign := pgtest.DSN(t)
	func() {
		conn, err := pgx.Connect(context.Background(), foreign)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "CREATE TABLE orders (id int)"); err != nil {
			t.Fatal(err)
		}
	}()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	wrongDB := dsn[:strings.LastIndex(dsn, "/")] + "/missing_db?sslmode=disable"

	for _, c := range []struct{ name, dsn, msg string }{
		{"unparseable", "postgres://app:" + password + "@127.0.0.1:port/db", "the DSN cannot be parsed"},
		{"unreachable", "postgres://app:" + password + "@" + refused + "/db?sslmode=disable", "cannot reach the server at " + refused},
		{"missing database", strings.Replace(wrongDB, "postgres@", "postgres:"+password+"@", 1), `has no database "missing_db"`},
		{"newer schema", newer, "is newer than this binary knows"},
		{"another application's", foreign, "holds tables but no switchbridge schema"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			skipIfEmulated(t)
			cfg, _ := writePostgresConfig(t, t.TempDir(), c.dsn)
			code, out := serveRefuses(t, cfg)
			if code != 1 || !strings.Contains(out, c.msg) {
				t.Errorf("serve: exit %d, want 1 with %q in\n%s", code, c.msg, out)
			}
			if strings.Contains(out, password) {
				t.Errorf("serve printed the password:\n%s", out)
			}
		})
	}
	if tables := pgTables(t, foreign); len(tables) != 1 || tables[0] != "orders" {
		t.Errorf("another application's database after serve: %v", tables)
	}
}
