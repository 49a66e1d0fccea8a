package main

// The platform rig of the scale benchmarks: one or more real platform
// processes (this test binary re-executed) on one store, SQLite in a data
// directory or a PostgreSQL database, and a connection of the test's own to
// that store to write the registry as the CLI would.

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// Storage engines a rig runs on.
const (
	engineSQLite   = "sqlite"
	enginePostgres = "postgres"
)

// platformRig is a platform of one or more processes on one store.
type platformRig struct {
	engine string
	procs  []*daemonProcess
	urls   []string  // each process's base URL, in the order of procs
	db     *store.DB // the test's own store connection (as the CLI's)
	raw    *sql.DB   // a plain SQL connection to the same store
	dsn    string    // PostgreSQL only
	dir    string    // the rig's temporary directory
	ready  time.Time // when every process listened
	limits []nofile  // each process's open-files limit
	idle   []int64   // each process's RSS a second after it listened
	conns  int       // server.max_connections of every process
}

// nofile is a process's RLIMIT_NOFILE as /proc shows it.
type nofile struct{ soft, hard int64 }

// startPlatforms starts procs platform processes on engine, each allowing
// maxConns open API connections. SQLite is one process only: its file
// belongs to one machine.
func startPlatforms(b *testing.B, engine string, procs, maxConns int) *platformRig {
	b.Helper()
	skipIfEmulated(b)
	if engine == engineSQLite && procs != 1 {
		b.Fatalf("a platform on SQLite is one process, not %d", procs)
	}
	ctx := context.Background()
	r := &platformRig{engine: engine, dir: b.TempDir(), conns: maxConns}
	var storage string
	switch engine {
	case engineSQLite:
		// A platform on SQLite needs a location of its own to start.
		storage = `locations:
  - id: 1
    name: Office
    switches:
      - {id: desk, name: Desk, driver: virtual}
`
	case enginePostgres:
		r.dsn = pgtest.DSN(b)
		dsnFile := filepath.Join(r.dir, "pg.dsn")
		if err := os.WriteFile(dsnFile, []byte(r.dsn+"\n"), 0o600); err != nil {
			b.Fatal(err)
		}
		storage = fmt.Sprintf("storage:\n  postgres:\n    dsn_file: %s\n", dsnFile)
		// Every process's pool and its listener must fit the server.
		r.checkPostgresConnections(b, procs)
	default:
		b.Fatalf("unknown engine %q", engine)
	}
	for i := range procs {
		addr := freePort(b)
		cfgPath := filepath.Join(r.dir, fmt.Sprintf("platform-%d.yaml", i))
		// Each process has a data directory of its own; on PostgreSQL the
		// records are in the database, shared.
		dataDir := filepath.Join(r.dir, "data")
		if engine == enginePostgres {
			dataDir = filepath.Join(r.dir, fmt.Sprintf("data-%d", i))
		}
		cfg := fmt.Sprintf(`server:
  listen: %s
  metrics_listen: "off"
  max_connections: %d
  rate_limit: off
data_dir: %s
%s`, addr, maxConns, dataDir, storage)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			b.Fatal(err)
		}
		// One after the other: the first migrates an empty database, the
		// second finds it migrated.
		p := startDaemon(b, cfgPath)
		r.procs = append(r.procs, p)
		r.urls = append(r.urls, "http://"+p.addr)
	}
	r.ready = time.Now()
	time.Sleep(time.Second)
	for _, p := range r.procs {
		r.idle = append(r.idle, rssBytes(b, p.cmd.Process.Pid))
		r.limits = append(r.limits, openFilesLimit(b, p.cmd.Process.Pid))
	}
	var err error
	switch engine {
	case engineSQLite:
		dataDir := filepath.Join(r.dir, "data")
		if r.db, err = store.Open(ctx, dataDir); err != nil {
			b.Fatal(err)
		}
		r.raw, err = sql.Open("sqlite", filepath.Join(dataDir, store.FileName)+"?_pragma=busy_timeout(10000)")
	case enginePostgres:
		if r.db, err = store.OpenPostgres(ctx, r.dsn); err != nil {
			b.Fatal(err)
		}
		r.raw, err = sql.Open("pgx", r.dsn)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.raw.Close(); r.db.Close() })
	return r
}

// exec runs one statement on the rig's plain SQL connection; the query is
// written with ? placeholders and numbered for PostgreSQL.
func (r *platformRig) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if r.engine == enginePostgres {
		var sb strings.Builder
		n := 0
		for _, c := range query {
			if c == '?' {
				n++
				sb.WriteString("$" + strconv.Itoa(n))
				continue
			}
			sb.WriteRune(c)
		}
		query = sb.String()
	}
	return r.raw.ExecContext(ctx, query, args...)
}

// name is the rig's label in results: engine and process count.
func (r *platformRig) name() string {
	return fmt.Sprintf("%s, %d process%s", r.engine, len(r.procs), map[bool]string{true: "es"}[len(r.procs) > 1])
}

// checkPostgresConnections fails the benchmark when the server cannot hold
// procs platform processes' pools, their listeners and the test's own
// connections (its store's pool, the plain connection), with a margin.
func (r *platformRig) checkPostgresConnections(b *testing.B, procs int) {
	b.Helper()
	db, err := sql.Open("pgx", r.dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var max, reserved int
	if err := db.QueryRow(`SELECT current_setting('max_connections')::int, current_setting('superuser_reserved_connections')::int`).Scan(&max, &reserved); err != nil {
		b.Fatal(err)
	}
	need := procs*(store.PostgresPoolSize+1) + store.PostgresPoolSize + 1 + 2 + 4
	if max-reserved < need {
		b.Fatalf("PostgreSQL allows %d connections (max_connections %d less %d reserved); %d platform processes and the benchmark need %d",
			max-reserved, max, reserved, procs, need)
	}
}

// openFilesLimit reads a process's RLIMIT_NOFILE from /proc.
func openFilesLimit(tb testing.TB, pid int) nofile {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		tb.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			f := strings.Fields(rest)
			if len(f) < 2 {
				break
			}
			parse := func(s string) int64 {
				if s == "unlimited" {
					return 1 << 62
				}
				n, _ := strconv.ParseInt(s, 10, 64)
				return n
			}
			return nofile{parse(f[0]), parse(f[1])}
		}
	}
	tb.Fatalf("no open-files limit in /proc/%d/limits", pid)
	return nofile{}
}

// needOpenFiles raises the test process's RLIMIT_NOFILE to its hard limit
// (the Go runtime does so at start, but says nothing when the hard limit
// is low) and fails the benchmark when it, or a platform process's, cannot
// hold want descriptors.
func needOpenFiles(b *testing.B, r *platformRig, want, perProc int) {
	b.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			b.Fatal(err)
		}
	}
	if lim.Cur < uint64(want) {
		b.Fatalf("the benchmark needs %d open files, its limit is %d (raise it with ulimit -n)", want, lim.Cur)
	}
	for i, l := range r.limits {
		if l.soft < int64(perProc) {
			b.Fatalf("platform process %d may open %d files, it needs %d", i, l.soft, perProc)
		}
	}
}
