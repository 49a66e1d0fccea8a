package pgtest_test

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// orphanEnv makes the test binary start a server, print its port and data
// directory, and wait to be killed.
const orphanEnv = "PGTEST_ORPHAN"

func TestMain(m *testing.M) {
	if os.Getenv(orphanEnv) == "1" {
		s, err := pgtest.NewServer()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(s.Port(), s.DataDir())
		time.Sleep(time.Hour)
		return
	}
	pgtest.Main(m)
}

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func exec1(t *testing.T, db *sql.DB, query string, args ...any) {
	t.Helper()
	if _, err := db.ExecContext(ctx(t), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func show(t *testing.T, db *sql.DB, setting string) string {
	t.Helper()
	var v string
	if err := db.QueryRowContext(ctx(t), "SHOW "+setting).Scan(&v); err != nil {
		t.Fatalf("SHOW %s: %v", setting, err)
	}
	return v
}

func TestDSNIsALoopbackDatabaseToWriteIn(t *testing.T) {
	start := time.Now()
	dsn := pgtest.DSN(t)
	t.Logf("first DSN (server start included if not already running) in %v", time.Since(start))

	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "postgres" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "5432" || u.Query().Get("sslmode") != "disable" {
		t.Errorf("DSN %s: want postgres://…@127.0.0.1:<port other than 5432>/…?sslmode=disable", dsn)
	}

	db := open(t, dsn)
	exec1(t, db, "CREATE TABLE things (id integer PRIMARY KEY, name text NOT NULL)")
	exec1(t, db, "INSERT INTO things VALUES (1, 'lamp'), (2, 'kettle')")
	var names string
	if err := db.QueryRowContext(ctx(t), "SELECT string_agg(name, ',' ORDER BY id) FROM things").Scan(&names); err != nil {
		t.Fatal(err)
	}
	if names != "lamp,kettle" {
		t.Errorf("read back %q", names)
	}

	// The settings the package promises, as the server reports them.
	for setting, want := range map[string]string{
		"listen_addresses":        "127.0.0.1",
		"unix_socket_directories": "",
		"fsync":                   "off",
		"max_connections":         "200",
		"port":                    u.Port(),
	} {
		if got := show(t, db, setting); got != want {
			t.Errorf("%s = %q, want %q", setting, got, want)
		}
	}

	// PostgreSQL refuses root; when the tests run as root the data
	// directory belongs to the user it runs as instead.
	fi, err := os.Stat(show(t, db, "data_directory"))
	if err != nil {
		t.Fatal(err)
	}
	owner := fi.Sys().(*syscall.Stat_t).Uid
	if os.Geteuid() == 0 && owner == 0 {
		t.Error("the data directory belongs to root")
	}
	if os.Geteuid() != 0 && int(owner) != os.Geteuid() {
		t.Errorf("the data directory belongs to uid %d, not to us (%d)", owner, os.Geteuid())
	}
}

func TestDSNsAreSeparateDatabases(t *testing.T) {
	a, b := pgtest.DSN(t), pgtest.DSN(t)
	if a == b {
		t.Fatalf("two DSNs are the same: %s", a)
	}
	dbA, dbB := open(t, a), open(t, b)
	exec1(t, dbA, "CREATE TABLE only_in_a (x integer)")

	var nameA, nameB string
	var inB sql.NullString
	if err := dbA.QueryRowContext(ctx(t), "SELECT current_database()").Scan(&nameA); err != nil {
		t.Fatal(err)
	}
	if err := dbB.QueryRowContext(ctx(t), "SELECT current_database(), to_regclass('only_in_a')::text").Scan(&nameB, &inB); err != nil {
		t.Fatal(err)
	}
	if nameA == nameB {
		t.Errorf("both DSNs reach database %s", nameA)
	}
	if inB.Valid {
		t.Errorf("a table made through one DSN is seen through the other as %s", inB.String)
	}
}

// A test's database is gone when it ends, even if the test left a
// connection to it open.
func TestCleanupDropsTheDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: needs PostgreSQL (make test runs it)")
	}
	var name string
	var leftover *sql.DB
	t.Run("user", func(t *testing.T) {
		var err error
		leftover, err = sql.Open("pgx", pgtest.DSN(t))
		if err != nil {
			t.Fatal(err)
		}
		// Not closed: the drop must end this connection itself.
		if err := leftover.QueryRowContext(ctx(t), "SELECT current_database()").Scan(&name); err != nil {
			t.Fatal(err)
		}
	})
	if leftover == nil {
		t.Fatal("the subtest did not run")
	}
	defer leftover.Close()

	db := open(t, pgtest.DSN(t))
	var n int
	if err := db.QueryRowContext(ctx(t), "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after its test ended", name)
	}
	if err := leftover.PingContext(ctx(t)); err == nil {
		t.Error("the connection left open to the dropped database still works")
	}
}

func TestServerStopsAndStartsWithItsData(t *testing.T) {
	start := time.Now()
	s := pgtest.Start(t)
	t.Logf("own server started in %v", time.Since(start))
	dsn := s.DSN(t)
	if !strings.Contains(dsn, "127.0.0.1:"+strconv.Itoa(s.Port())+"/") {
		t.Errorf("DSN %s is not on the server's port %d", dsn, s.Port())
	}
	db := open(t, dsn)
	exec1(t, db, "CREATE TABLE kept (v text)")
	exec1(t, db, "INSERT INTO kept VALUES ('before stop')")

	if err := s.Start(); err == nil {
		t.Error("Start on a running server did not fail")
	}

	s.Stop()
	if err := db.PingContext(ctx(t)); err == nil {
		t.Fatal("the database answers after Stop")
	}
	if c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.Port())), time.Second); err == nil {
		c.Close()
		t.Fatal("the port accepts connections after Stop")
	}

	start = time.Now()
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted in %v", time.Since(start))
	exec1(t, db, "INSERT INTO kept VALUES ('after start')")

	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := db.QueryRowContext(ctx(t), "SELECT string_agg(v, ',' ORDER BY v DESC) FROM kept").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "before stop,after start" {
		t.Errorf("after Stop, Start and Restart the table holds %q", got)
	}
}

// A server made by initdb, not copied from the cached template, works the
// same: the first test process on a machine makes it that way.
func TestServerFromInitdb(t *testing.T) {
	defer pgtest.SetTemplate(false)()
	start := time.Now()
	s := pgtest.Start(t)
	t.Logf("server with initdb started in %v", time.Since(start))
	db := open(t, s.DSN(t))
	exec1(t, db, "CREATE TABLE t (x integer)")
	if got := show(t, db, "server_encoding"); got != "UTF8" {
		t.Errorf("server_encoding %q, want UTF8", got)
	}
	if got := show(t, db, "lc_collate"); got != "C" {
		t.Errorf("lc_collate %q, want C", got)
	}
}

// A test binary that is killed does not leave its server running: the
// postmaster is told by the kernel when its parent dies.
func TestServerDiesWithTheTestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts PostgreSQL in a child process")
	}
	if e := os.Getenv("SWITCHBRIDGE_TEST_EMULATED"); e != "" {
		t.Skipf("runs the test binary as a process, which cannot be done under %s", e)
	}
	if err := pgtest.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's server: %v", err)
	}
	var port int
	var dataDir string
	if _, err := fmt.Sscan(line, &port, &dataDir); err != nil {
		t.Fatalf("the child printed %q", line)
	}
	defer os.RemoveAll(filepath.Dir(dataDir))
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("the child's server does not accept connections: %v", err)
	}
	c.Close()

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	killed := time.Now()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil && errors.Is(err, syscall.ECONNREFUSED) {
			break
		}
		if err == nil {
			c.Close()
		}
		if time.Since(killed) > 20*time.Second {
			t.Fatalf("the server on %s still runs %v after its test binary was killed", addr, time.Since(killed))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the server stopped %v after its test binary was killed", time.Since(killed))
}

// BenchmarkStart measures what a test process pays for its server: a copy
// of the cached template cluster, then the start.
func BenchmarkStart(b *testing.B) {
	benchmarkStart(b, true)
}

// BenchmarkStartInitdb is the same with initdb every time, to show what
// the template saves.
func BenchmarkStartInitdb(b *testing.B) {
	benchmarkStart(b, false)
}

func benchmarkStart(b *testing.B, template bool) {
	if err := pgtest.Available(); err != nil {
		b.Skip(err)
	}
	defer pgtest.SetTemplate(template)()
	if template {
		// Make sure the template exists before timing.
		s, err := pgtest.NewServer()
		if err != nil {
			b.Fatal(err)
		}
		s.Close()
	}
	for b.Loop() {
		s, err := pgtest.NewServer()
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
}

// BenchmarkDSN is the cost of a fresh database, its drop included.
func BenchmarkDSN(b *testing.B) {
	s := pgtest.Start(b)
	for b.Loop() {
		tb := &cleanups{TB: b}
		s.DSN(tb)
		tb.run()
	}
}

// cleanups runs a TB's cleanups when told, not when the benchmark ends.
type cleanups struct {
	testing.TB
	fns []func()
}

func (c *cleanups) Cleanup(f func()) { c.fns = append(c.fns, f) }

func (c *cleanups) run() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}
