package oauth

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/hex"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // to read the PostgreSQL rows as they are

	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// TestSessionSecretsAreNotStored: after a login, the consent, a look at
// the connected apps page and a logout form rendered, the database (the
// SQLite files as they are on disk, WAL included; every PostgreSQL row as
// text) holds neither the session's cookie nor any CSRF token a page
// handed to the browser. The session's token is an HMAC of the cookie; it
// is checked all the same (a token of another session fails).
func TestSessionSecretsAreNotStored(t *testing.T) {
	for _, dialect := range []store.Dialect{store.SQLite, store.Postgres} {
		t.Run(string(dialect), func(t *testing.T) {
			ctx := context.Background()
			var db *accounts.Store
			var contents func() []byte
			var err error
			if dialect == store.SQLite {
				dir := t.TempDir()
				db, err = records(store.Open(ctx, dir))
				contents = func() []byte { return filesIn(t, dir) }
			} else {
				dsn := pgtest.DSN(t)
				db, err = records(store.OpenPostgres(ctx, dsn))
				contents = func() []byte { return postgresRows(t, dsn) }
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.DB().Close() })
			seedPlatform(t, db)
			_, mux := platformProcess(t, db)

			br := newBrowser(t, "198.51.100.7")
			var handed []string
			loginPage := br.page(mux, "/oauth/authorize?"+authQuery)
			handed = append(handed, br.csrf(loginPage))
			consent := br.login(mux, mux, "alice", "alice-pw")
			token := br.csrf(consent)
			handed = append(handed, token, br.csrf(br.page(mux, "/oauth/apps")))
			cookie := br.cookies[sessionCookie].Value

			// Another browser's session: its token passes no form of this one.
			other := newBrowser(t, "198.51.100.8")
			otherToken := other.csrf(other.login(mux, mux, "alice", "alice-pw"))
			handed = append(handed, otherToken, other.cookies[sessionCookie].Value)
			if otherToken == token {
				t.Fatal("two sessions have the same CSRF token")
			}
			form, _ := url.ParseQuery(authQuery)
			form.Set("action", "approve")
			form.Set("location", "1")
			form.Set("switch", "lamp")
			form.Set("csrf", otherToken)
			if w := br.do(mux, "/oauth/authorize", form); w.Code != 403 {
				t.Errorf("consent with another session's token = %d, want 403", w.Code)
			}
			form.Set("csrf", token)
			if w := br.do(mux, "/oauth/authorize", form); w.Code != 303 {
				t.Errorf("consent with the session's token = %d, want 303: %s", w.Code, w.Body)
			}

			stored := contents()
			if len(stored) == 0 {
				t.Fatal("read nothing of the database")
			}
			for _, secret := range append(handed, cookie) {
				for _, form := range []string{secret, hex.EncodeToString([]byte(secret))} {
					if bytes.Contains(stored, []byte(form)) {
						t.Errorf("the database holds %q, handed to a browser", secret)
					}
				}
			}
			// The check can see a session row: its cookie's hash is there.
			if !bytes.Contains(stored, Hash(cookie)) && !bytes.Contains(stored, []byte(hex.EncodeToString(Hash(cookie)))) {
				t.Error("the session's row is not in what was read: the check looks at the wrong bytes")
			}
		})
	}
}

// filesIn is every file of dir, concatenated.
func filesIn(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	names, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, n := range names {
		if b, err := os.ReadFile(n); err == nil {
			all = append(all, b...)
		}
	}
	return all
}

// postgresRows is every row of every table of the database at dsn, as
// PostgreSQL writes it as text (bytea as \x and hex).
func postgresRows(t *testing.T, dsn string) []byte {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		rows.Scan(&n)
		tables = append(tables, n)
	}
	rows.Close()
	var all strings.Builder
	for _, tb := range tables {
		var text sql.NullString
		if err := db.QueryRow(`SELECT string_agg(t::text, E'\n') FROM "` + tb + `" t`).Scan(&text); err != nil {
			t.Fatal(err)
		}
		all.WriteString(text.String)
	}
	return []byte(all.String())
}

// TestSessionFromBeforeDerivedCSRF: a session stored before the CSRF token
// was derived (migration 0017 drops the stored one) stays logged in after
// the upgrade; a form it had open, with the old token, is refused as
// expired, and the page reloaded carries a token that passes.
func TestSessionFromBeforeDerivedCSRF(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := records(store.Open(ctx, dir))
	if err != nil {
		t.Fatal(err)
	}
	alice := seedPlatform(t, db)
	db.DB().Close()

	// The database as migration 0016 left it, with a session in it.
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	cookie, oldToken := NewSecret(), NewSecret()
	now := time.Now()
	for _, q := range undoMigrationsAfter(t, 17) {
		if _, err := raw.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	for _, q := range []string{
		`ALTER TABLE login_sessions ADD COLUMN csrf TEXT NOT NULL DEFAULT ''`,
		`INSERT INTO login_sessions (hash, user_id, password, csrf, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		`PRAGMA user_version = 16`,
	} {
		var args []any
		if strings.HasPrefix(q, "INSERT") {
			args = []any{Hash(cookie), alice.ID, passwordDigest(alice.PasswordHash), oldToken, now.UnixMilli(), now.Add(time.Hour).UnixMilli()}
		}
		if _, err := raw.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	raw.Close()

	db, err = records(store.Open(ctx, dir))
	if err != nil {
		t.Fatalf("the upgrade: %v", err)
	}
	t.Cleanup(func() { db.DB().Close() })
	_, mux := platformProcess(t, db)
	br := newBrowser(t, "198.51.100.9")
	br.cookies[sessionCookie] = &http.Cookie{Name: sessionCookie, Value: cookie}
	consent := br.page(mux, "/oauth/authorize?"+authQuery)
	if !strings.Contains(consent, "Allow App") {
		t.Fatalf("the session from before the upgrade is not logged in:\n%.400s", consent)
	}
	form, _ := url.ParseQuery(authQuery)
	form.Set("action", "approve")
	form.Set("location", "1")
	form.Set("switch", "lamp")
	form.Set("csrf", oldToken)
	if w := br.do(mux, "/oauth/authorize", form); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "This form has expired") {
		t.Errorf("a form with the token stored before the upgrade = %d: %.300s", w.Code, w.Body)
	}
	form.Set("csrf", br.csrf(consent))
	if w := br.do(mux, "/oauth/authorize", form); w.Code != http.StatusSeeOther {
		t.Errorf("the reloaded form = %d: %.300s", w.Code, w.Body)
	}
}

// undoMigrationsAfter returns the statements that take a database of the
// newest schema back to where SQLite migration n left it, newest first,
// read from the migrations themselves: tables, indexes and triggers made
// are dropped, columns added dropped. A migration that does anything
// else fails the test, which then needs another way to build the old
// schema.
func undoMigrationsAfter(t *testing.T, n int) []string {
	t.Helper()
	files, err := filepath.Glob("../../store/migrations/sqlite/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("the SQLite migrations: %v", err)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(files)))
	made := regexp.MustCompile(`(?i)^CREATE\s+(TABLE|UNIQUE\s+INDEX|INDEX|TRIGGER)\s+(\w+)`)
	added := regexp.MustCompile(`(?i)^ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+(\w+)`)
	var undo []string
	for _, f := range files {
		v, err := strconv.Atoi(strings.SplitN(filepath.Base(f), "_", 2)[0])
		if err != nil {
			t.Fatalf("%s: not numbered", f)
		}
		if v <= n {
			continue
		}
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, stmt := range statements(string(body)) {
			if m := made.FindStringSubmatch(stmt); m != nil {
				kind := strings.ToUpper(strings.Fields(m[1])[len(strings.Fields(m[1]))-1])
				undo = append(undo, "DROP "+kind+" IF EXISTS "+m[2])
			} else if m := added.FindStringSubmatch(stmt); m != nil {
				undo = append(undo, "ALTER TABLE "+m[1]+" DROP COLUMN "+m[2])
			} else {
				t.Fatalf("%s: %q cannot be undone here; build the schema of migration %d another way", f, stmt, n)
			}
		}
	}
	return undo
}

// statements splits a migration into its statements, comments left out;
// a trigger's body (BEGIN … END;) stays whole.
func statements(body string) []string {
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "--") {
			lines = append(lines, l)
		}
	}
	var out []string
	var cur []string
	inTrigger := false
	for _, l := range lines {
		cur = append(cur, l)
		if strings.HasPrefix(strings.ToUpper(l), "CREATE TRIGGER") {
			inTrigger = true
		}
		if (inTrigger && strings.EqualFold(l, "END;")) || (!inTrigger && strings.HasSuffix(l, ";")) {
			out = append(out, strings.Join(cur, " "))
			cur, inTrigger = nil, false
		}
	}
	return out
}
