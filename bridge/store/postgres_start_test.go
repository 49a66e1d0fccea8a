package store_test

// A platform process started on a PostgreSQL database that is wrong,
// unreachable or someone else's: a clear refusal at start, which never
// quotes the DSN's password, and never a half-migrated schema.

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

const testPassword = "s3cret-Pw-42"

// pgQuery runs q on the database at dsn and returns the first column of
// every row as text.
func pgQuery(t *testing.T, dsn, q string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		vals, err := rows.Values()
		if err != nil {
			t.Fatal(err)
		}
		if len(vals) > 0 {
			out = append(out, fmt.Sprint(vals[0]))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// refusal opens dsn, which must fail, and returns the error's text, which
// must not hold the password.
func refusal(t *testing.T, dsn string) string {
	t.Helper()
	db, err := store.OpenPostgres(context.Background(), dsn)
	if err == nil {
		db.Close()
		t.Fatal("opened")
	}
	if strings.Contains(err.Error(), testPassword) {
		t.Errorf("the error quotes the password: %v", err)
	}
	return err.Error()
}

func withUserPassword(t *testing.T, dsn, user string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, testPassword)
	return u.String()
}

// closedPort is a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestOpenPostgresRefusesAnUnparseableDSN(t *testing.T) {
	for _, dsn := range []string{
		"postgres://app:" + testPassword + "@127.0.0.1:notaport/switchbridge",
		"postgres://app:" + testPassword + "@[::1/switchbridge",
		"host=127.0.0.1 port=five password=" + testPassword,
		"postgres://app:" + testPassword + "@127.0.0.1/db?sslmode=sometimes",
	} {
		msg := refusal(t, dsn)
		if !strings.Contains(msg, "the DSN cannot be parsed") {
			t.Errorf("%q: %s", dsn, msg)
		}
	}
}

func TestOpenPostgresRefusesAnUnreachableServer(t *testing.T) {
	addr := closedPort(t)
	msg := refusal(t, "postgres://app:"+testPassword+"@"+addr+"/switchbridge?sslmode=disable")
	if !strings.Contains(msg, "cannot reach the server at "+addr) || !strings.Contains(msg, "connection refused") {
		t.Errorf("unreachable server: %s", msg)
	}
}

func TestOpenPostgresRefusesAMissingDatabase(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, _ := url.Parse(withUserPassword(t, dsn, "postgres"))
	u.Path = "/no_such_database"
	msg := refusal(t, u.String())
	if !strings.Contains(msg, `has no database "no_such_database"`) || !strings.Contains(msg, "CREATE DATABASE") {
		t.Errorf("missing database: %s", msg)
	}
}

// The test server trusts every loopback connection, so the refused login
// here is a role that may not log in: the same refusal (SQLSTATE class 28)
// as a wrong password, from a real server.
func TestOpenPostgresRefusesARoleThatMayNotLogIn(t *testing.T) {
	dsn := pgtest.DSN(t)
	u, _ := url.Parse(dsn)
	role := "nologin_" + strings.TrimPrefix(u.Path, "/") // unique: roles are the server's, not the database's
	pgQuery(t, dsn, "DROP ROLE IF EXISTS "+role)
	pgQuery(t, dsn, "CREATE ROLE "+role+" NOLOGIN PASSWORD '"+testPassword+"'")
	t.Cleanup(func() { pgQuery(t, dsn, "DROP ROLE IF EXISTS "+role) })
	msg := refusal(t, withUserPassword(t, dsn, role))
	if !strings.Contains(msg, `refused user "`+role+`"`) || !strings.Contains(msg, "not permitted to log in") {
		t.Errorf("refused role: %s", msg)
	}
}

// A wrong password, from a server that asks for one: a stand-in speaking
// PostgreSQL's protocol, which answers the password as PostgreSQL does
// (FATAL 28P01). It checks that the password was sent, so the refusal
// came after it.
func TestOpenPostgresRefusesAWrongPassword(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var got []string
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				if _, err := be.ReceiveStartupMessage(); err != nil {
					return
				}
				be.Send(&pgproto3.AuthenticationCleartextPassword{})
				if be.Flush() != nil || be.SetAuthType(pgproto3.AuthTypeCleartextPassword) != nil {
					return
				}
				msg, err := be.Receive()
				if err != nil {
					return
				}
				if pw, ok := msg.(*pgproto3.PasswordMessage); ok {
					mu.Lock()
					got = append(got, pw.Password)
					mu.Unlock()
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "28P01", Message: `password authentication failed for user "app"`})
				be.Flush()
			}()
		}
	}()
	msg := refusal(t, "postgres://app:"+testPassword+"@"+ln.Addr().String()+"/switchbridge?sslmode=disable")
	if !strings.Contains(msg, `refused user "app"`) || !strings.Contains(msg, "password authentication failed") {
		t.Errorf("wrong password: %s", msg)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 || got[0] != testPassword {
		t.Errorf("the server was sent %q, not the password", got)
	}
}

// tablesOf lists the tables of the database's public schema.
func tablesOf(t *testing.T, dsn string) []string {
	t.Helper()
	return pgQuery(t, dsn, `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY 1`)
}

func TestOpenPostgresRefusesANewerSchema(t *testing.T) {
	dsn := pgtest.DSN(t)
	db, err := store.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	newer := store.PostgresSchemaVersion() + 1
	pgQuery(t, dsn, fmt.Sprintf("UPDATE schema_version SET version = %d", newer))
	tables := tablesOf(t, dsn)
	msg := refusal(t, dsn)
	if !strings.Contains(msg, fmt.Sprintf("schema version %d is newer than this binary knows (%d)", newer, store.PostgresSchemaVersion())) {
		t.Errorf("newer schema: %s", msg)
	}
	if v := pgQuery(t, dsn, "SELECT version FROM schema_version"); !slices.Equal(v, []string{fmt.Sprint(newer)}) {
		t.Errorf("schema version after the refusal: %v", v)
	}
	if after := tablesOf(t, dsn); !slices.Equal(after, tables) {
		t.Errorf("tables after the refusal: %v, before %v", after, tables)
	}
}

func TestOpenPostgresRefusesAnotherApplicationsDatabase(t *testing.T) {
	dsn := pgtest.DSN(t)
	pgQuery(t, dsn, "CREATE TABLE inventory (id int PRIMARY KEY, name text)")
	pgQuery(t, dsn, "INSERT INTO inventory VALUES (1, 'spanner')")
	msg := refusal(t, dsn)
	if !strings.Contains(msg, "holds tables but no switchbridge schema") || !strings.Contains(msg, "CREATE DATABASE") {
		t.Errorf("another application's database: %s", msg)
	}
	if after := tablesOf(t, dsn); !slices.Equal(after, []string{"inventory"}) {
		t.Errorf("tables after the refusal: %v", after)
	}
	if rows := pgQuery(t, dsn, "SELECT name FROM inventory"); !slices.Equal(rows, []string{"spanner"}) {
		t.Errorf("the other application's rows after the refusal: %v", rows)
	}
}

// Processes starting at once on an empty database: each opens it, and the
// schema is made once, each migration by one transaction that also set
// the version (checked on the newest: update the check with it).
func TestOpenPostgresConcurrentFirstStarts(t *testing.T) {
	const processes = 4
	for round := range 3 {
		dsn := pgtest.DSN(t)
		var wg sync.WaitGroup
		errs := make([]error, processes)
		start := make(chan struct{})
		for i := range processes {
			wg.Go(func() {
				<-start
				// A pool of its own for each, as a process has.
				db, err := store.OpenPostgres(context.Background(), dsn)
				if err == nil {
					err = db.Ping(context.Background())
					db.Close()
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d, process %d: %v", round, i, err)
			}
		}
		// The newest migration altered its table (a column added rewrites
		// the table's row in pg_class) in the transaction that set the
		// version: no process set a version it had not migrated to.
		same := pgQuery(t, dsn, `SELECT (SELECT xmin FROM schema_version)::text = (SELECT xmin FROM pg_class WHERE relname = 'users')::text`)
		if !slices.Equal(same, []string{"true"}) {
			t.Errorf("round %d: the schema version was not set by the transaction of the newest migration", round)
		}
		if v := pgQuery(t, dsn, "SELECT version FROM schema_version"); !slices.Equal(v, []string{fmt.Sprint(store.PostgresSchemaVersion())}) {
			t.Errorf("round %d: schema version %v", round, v)
		}
	}
}

// A migration that fails half way (an object of its own name is there
// already, past the tables it made) leaves nothing of itself, and the
// next start, the object gone, migrates.
func TestOpenPostgresFailedMigrationLeavesNothing(t *testing.T) {
	dsn := pgtest.DSN(t)
	pgQuery(t, dsn, `CREATE FUNCTION switchbridge_log_change(a text, b bigint, c text) RETURNS void LANGUAGE sql AS 'SELECT NULL'`)
	msg := refusal(t, dsn)
	if !strings.Contains(msg, "migration postgres/0001_schema.sql") || !strings.Contains(msg, "already exists") {
		t.Errorf("failed migration: %s", msg)
	}
	if tables := tablesOf(t, dsn); len(tables) > 0 {
		t.Errorf("a failed migration left tables: %v", tables)
	}
	pgQuery(t, dsn, "DROP FUNCTION switchbridge_log_change(text, bigint, text)")
	db, err := store.OpenPostgres(context.Background(), dsn)
	if err != nil {
		t.Fatalf("after removing the object: %v", err)
	}
	db.Close()
}
