// Package pgtest runs a throwaway PostgreSQL for tests: the server binaries
// of Debian's postgresql package, started in a temporary directory on a free
// loopback port as an unprivileged user, never the machine's own server.
// DSN hands a test a fresh, empty database on one server shared by the test
// process; Start gives a test a server of its own to stop and restart.
//
// A package using the shared server stops it when its tests end:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without PostgreSQL installed the tests are skipped, except under CI=true,
// where they fail. Under go test -short (make check) they are skipped too.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchbridge/switchbridge/bridge/infra/porttest"
)

// User is the superuser every DSN names. initdb is told the name, so it is
// the same whichever system user runs the server.
const User = "postgres"

// dirPrefix names the temporary directories, so that a later run can find
// and remove those of a test binary that was killed.
const dirPrefix = "switchbridge-pgtest-"

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = time.Minute

// settings keep the server small and fast; durability is not wanted from a
// server that is deleted after the test. They go on the postgres command
// line, which outranks postgresql.conf, so a template data directory stays
// exactly as initdb made it.
var settings = []string{
	"listen_addresses=127.0.0.1",
	// No Unix socket: nothing is created in /var/run/postgresql, and
	// nothing can reach the server but TCP on loopback.
	"unix_socket_directories=",
	"fsync=off",
	"synchronous_commit=off",
	"full_page_writes=off",
	// No replication, so WAL carries only what crash recovery needs.
	"wal_level=minimal",
	"max_wal_senders=0",
	// WAL is recycled at checkpoints, which cost little without fsync;
	// kept small as the data directory may be in memory (parentDir).
	"min_wal_size=32MB",
	"max_wal_size=256MB",
	"shared_buffers=16MB",
	// Load tests run thousands of hub links through two platform
	// processes, each with its own pool.
	"max_connections=200",
	"huge_pages=off",
	// Compiling test queries to machine code only costs time.
	"jit=off",
	"TimeZone=UTC",
	"log_timezone=UTC",
}

var (
	binOnce sync.Once
	bins    binaries
	binsErr error
)

// Available reports whether the PostgreSQL server binaries (initdb and
// postgres, version 13 or later) were found, and if not, why.
func Available() error {
	binOnce.Do(func() { bins, binsErr = findBinaries() })
	return binsErr
}

// skipShort skips tb under go test -short: make check's loop leaves
// PostgreSQL to make test, as a server's start and a schema's migration
// cost seconds each.
func skipShort(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: needs PostgreSQL (make test runs it)")
	}
}

// unavailable skips tb, or fails it under CI=true, where a missing
// PostgreSQL means the machine was not set up and skipping would hide the
// tests that need it.
func unavailable(tb testing.TB, err error) {
	tb.Helper()
	msg := fmt.Sprintf("PostgreSQL is not available (%v); install it with: sudo apt-get install postgresql", err)
	if os.Getenv("CI") == "true" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

var shared struct {
	mu  sync.Mutex
	srv *Server
	err error // the first start's failure, so later tests fail fast
}

// DSN returns the URL of a fresh, empty database on the test process's
// shared server, which it starts on first use. The database is dropped
// when tb ends, its remaining connections terminated first.
func DSN(tb testing.TB) string {
	tb.Helper()
	skipShort(tb)
	if err := Available(); err != nil {
		unavailable(tb, err)
	}
	shared.mu.Lock()
	if shared.srv == nil && shared.err == nil {
		shared.srv, shared.err = newServer(tb.Logf)
	}
	s, err := shared.srv, shared.err
	shared.mu.Unlock()
	if err != nil {
		tb.Fatalf("starting the shared PostgreSQL: %v", err)
	}
	return s.DSN(tb)
}

// Main runs the tests and then stops the shared server; call it from
// TestMain. A package with a TestMain of its own calls StopShared after
// m.Run instead.
func Main(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// StopShared stops the shared server and deletes its files. A later DSN
// starts a new one.
//
// A test binary that ends without calling it, or is killed, does not
// leave the server running: postgres gets SIGQUIT when its parent dies.
// Its directory is left behind and removed by the next process that
// starts a server.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.srv != nil {
		shared.srv.close()
	}
	shared.srv, shared.err = nil, nil
}

// Server is one PostgreSQL server on a loopback port.
type Server struct {
	bins binaries
	cred *syscall.Credential // whom postgres runs as; nil for ourselves
	base string              // the temporary directory, removed at close
	data string              // the data directory, inside base
	log  string              // the server's output, inside base
	port int

	mu     sync.Mutex
	proc   *os.Process
	exited chan struct{} // closed when proc has exited
}

// Start starts a server for tb alone, for tests that stop or restart
// PostgreSQL; it is stopped and deleted when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	skipShort(tb)
	if err := Available(); err != nil {
		unavailable(tb, err)
	}
	s, err := newServer(tb.Logf)
	if err != nil {
		tb.Fatalf("starting PostgreSQL: %v", err)
	}
	tb.Cleanup(s.close)
	return s
}

// Port is the loopback TCP port the server listens on, the same across
// restarts: the DSNs handed out name it.
func (s *Server) Port() int { return s.port }

// dbSeq numbers the databases of the process. A number alone is unique:
// every server belongs to one test process.
var dbSeq atomic.Int64

// DSN creates a fresh, empty database on s and returns its URL, for
// database/sql with the pgx driver (sql.Open("pgx", dsn)) or for pgx
// itself. The database is dropped when tb ends, its remaining connections
// terminated first; if s is stopped by then, it goes with the server.
func (s *Server) DSN(tb testing.TB) string {
	tb.Helper()
	name := "test_" + strconv.FormatInt(dbSeq.Add(1), 10)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.admin(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("creating a test database: %v", err)
	}
	tb.Cleanup(func() {
		if !s.running() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE terminates the connections a test left open (a pool not
		// closed, a process killed mid-query), which would otherwise make
		// the drop fail.
		if err := s.admin(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("dropping test database %s: %v", name, err)
		}
	})
	return s.url(name)
}

func (s *Server) url(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", User, s.port, db)
}

// admin runs one statement in the maintenance database. A connection of
// its own each time: the server may have been restarted since the last.
func (s *Server) admin(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// query is admin for a statement that returns one value, scanned into
// dest.
func (s *Server) query(ctx context.Context, sql string, dest any) error {
	conn, err := pgx.Connect(ctx, s.url("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dest)
}

// newServer makes a data directory and starts a server on it, on a free
// port; logf tells the test of a start made again on another port.
func newServer(logf func(format string, args ...any)) (*Server, error) {
	return newServerOn(freePort, logf)
}

// newServerOn is newServer on the ports pick gives, a new one for each
// start whose port was taken.
func newServerOn(pick func() (int, error), logf func(format string, args ...any)) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	cred, err := unprivileged()
	if err != nil {
		return nil, err
	}
	sweepOnce.Do(func() {
		sweepStale(shmDir)
		sweepStale(os.TempDir())
	})
	parent := parentDir()
	if err := searchable(parent, cred); err != nil {
		return nil, err
	}
	base, err := os.MkdirTemp(parent, dirPrefix)
	if err != nil {
		return nil, err
	}
	s := &Server{
		bins: bins,
		cred: cred,
		base: base,
		data: filepath.Join(base, "data"),
		log:  filepath.Join(base, "postgres.log"),
	}
	// The owner file lets a later process tell that this directory's test
	// binary is gone; it is written before anything else, so a directory
	// without it is one still being set up.
	if err := os.WriteFile(filepath.Join(base, "owner"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		s.close()
		return nil, err
	}
	if err := s.chown(base); err != nil {
		s.close()
		return nil, err
	}
	if err := s.makeData(); err != nil {
		s.close()
		return nil, err
	}
	if err := s.writeHBA(); err != nil {
		s.close()
		return nil, err
	}
	// The port is free when picked, but another process may take it before
	// postgres binds it ("could not bind ...: Address already in use");
	// then try another.
	for attempt := 1; ; attempt++ {
		if s.port, err = pick(); err != nil {
			s.close()
			return nil, err
		}
		// A fresh log, so the check below reads this attempt's reason.
		os.Remove(s.log)
		err = s.Start()
		if err == nil {
			return s, nil
		}
		if attempt == porttest.Attempts || !porttest.InUse(s.logTail()) {
			s.close()
			return nil, err
		}
		logf("PostgreSQL could not listen on 127.0.0.1:%d: another process took the port after it was picked; starting it again on another port (start %d of at most %d)",
			s.port, attempt+1, porttest.Attempts)
	}
}

// makeData fills s.data with a new cluster: a copy of the cached template
// when there is one, else initdb's output, which then becomes the template.
func (s *Server) makeData() error {
	tmpl := templateDir(s.bins)
	if tmpl != "" && useTemplate {
		pruneOnce.Do(func() { pruneTemplates(tmpl, time.Now()) })
		if _, err := os.Stat(filepath.Join(tmpl, "global", "pg_control")); err == nil {
			if err := copyTree(tmpl, s.data, s.cred); err == nil {
				return nil
			}
			// A template that cannot be copied is no reason to fail:
			// initdb below makes the cluster anyway.
			os.RemoveAll(s.data)
		}
	}
	if err := s.initdb(); err != nil {
		return err
	}
	if tmpl != "" && useTemplate {
		saveTemplate(s.data, tmpl)
	}
	return nil
}

// pruneOnce prunes the template cache once a test process.
var pruneOnce sync.Once

// useTemplate is switched off by the test and the benchmark of initdb.
var useTemplate = true

// initdbArgs make every cluster; the template cache's name depends on them.
var initdbArgs = []string{
	"-U", User,
	"--auth=trust",
	"--encoding=UTF8",
	// The C locale needs no locale installed, and sorts bytes the same on
	// every machine.
	"--locale=C",
	// The cluster is thrown away; flushing it to disk is wasted time.
	"--no-sync",
}

func (s *Server) initdb() error {
	cmd := exec.Command(filepath.Join(s.bins.dir, "initdb"), append([]string{"-D", s.data}, initdbArgs...)...)
	s.prepare(cmd)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	return nil
}

// writeHBA replaces initdb's client rules with one: anyone on loopback, by
// trust. The server listens nowhere else and is deleted after the test.
func (s *Server) writeHBA() error {
	p := filepath.Join(s.data, "pg_hba.conf")
	if err := os.WriteFile(p, []byte("# generated for tests: loopback only, no password\nhost all all 127.0.0.1/32 trust\n"), 0o600); err != nil {
		return err
	}
	return s.chown(p)
}

// prepare makes cmd run as the server's user, in a directory that user
// can reach (initdb looks up the working directory and fails if it cannot),
// without the caller's PG* variables, which would redirect it elsewhere.
func (s *Server) prepare(cmd *exec.Cmd) {
	cmd.Dir = s.base
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
}

func (s *Server) chown(path string) error {
	if s.cred == nil {
		return nil
	}
	return os.Lchown(path, int(s.cred.Uid), int(s.cred.Gid))
}

// Start starts the server again after Stop, on the same port and data
// directory, and returns once it accepts connections. The port cannot move
// (the DSNs handed out name it): should another process have taken it
// since Stop, Start fails.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.exited != nil {
		select {
		case <-s.exited:
		default:
			return errors.New("pgtest: the server is already running")
		}
	}
	logf, err := os.OpenFile(s.log, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"-D", s.data, "-c", "port=" + strconv.Itoa(s.port)}
	for _, kv := range settings {
		args = append(args, "-c", kv)
	}
	cmd := exec.Command(filepath.Join(s.bins.dir, "postgres"), args...)
	s.prepare(cmd)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The postmaster is our own child, not pg_ctl's, so that it can be
	// told when the test binary dies: SIGQUIT, PostgreSQL's immediate
	// shutdown, as nothing in it is worth keeping.
	cmd.SysProcAttr.Pdeathsig = syscall.SIGQUIT
	exited, err := startLocked(cmd)
	if err != nil {
		return fmt.Errorf("starting postgres: %v", err)
	}
	s.proc, s.exited = cmd.Process, exited
	if err := s.waitReady(exited); err != nil {
		s.stopLocked()
		return fmt.Errorf("postgres on port %d: %v\n%s", s.port, err, s.logTail())
	}
	return nil
}

// startLocked starts cmd from a goroutine locked to its OS thread until
// cmd exits. The parent-death signal fires when the thread that forked
// the child ends, not the process, and Go may end idle threads.
func startLocked(cmd *exec.Cmd) (exited chan struct{}, err error) {
	started := make(chan error, 1)
	exited = make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
		close(exited)
	}()
	return exited, <-started
}

// waitReady polls until the server answers a query: it accepts
// connections before recovery ends, and refuses them until then. The
// answer must come from this server, whose data directory it names: on a
// port another process took after it was picked (another test process's
// PostgreSQL, say), that process answers while this server fails to bind
// and exits.
func (s *Server) waitReady(exited <-chan struct{}) error {
	deadline := time.Now().Add(startTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return errors.New("exited")
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var dir string
		lastErr = s.query(ctx, "SHOW data_directory", &dir)
		cancel()
		if lastErr == nil && dir == s.data {
			return nil
		}
		if lastErr == nil {
			lastErr = fmt.Errorf("the server answering on port %d is another one, on %s", s.port, dir)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %v: %v", startTimeout, lastErr)
}

// Stop shuts the server down fast, as pg_ctl stop -m fast does (SIGINT):
// open sessions are ended, and the data is kept for Start.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

func (s *Server) stopLocked() {
	if s.proc == nil {
		return
	}
	escalate := []struct {
		sig  syscall.Signal
		wait time.Duration
	}{
		{syscall.SIGINT, 30 * time.Second}, // fast shutdown
		{syscall.SIGQUIT, 5 * time.Second}, // immediate shutdown
		{syscall.SIGKILL, time.Minute},
	}
	for _, e := range escalate {
		_ = s.proc.Signal(e.sig)
		select {
		case <-s.exited:
			s.proc = nil
			return
		case <-time.After(e.wait):
		}
	}
	s.proc = nil
}

// Restart stops the server and starts it again.
func (s *Server) Restart() error {
	s.Stop()
	return s.Start()
}

func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// close stops the server and deletes its files.
func (s *Server) close() {
	s.Stop()
	os.RemoveAll(s.base)
}

// logTail is the end of the server's output, for error messages.
func (s *Server) logTail() string {
	f, err := os.Open(s.log)
	if err != nil {
		return ""
	}
	defer f.Close()
	const max = 4 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > max {
		f.Seek(fi.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// freePort returns a loopback port nothing listens on now, never one
// handed out before in this process, and never 5432, where the machine's
// own PostgreSQL may come up later.
func freePort() (int, error) { return porttest.Free(5432) }
