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
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // to read the PostgreSQL rows as they are

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
			var db *store.DB
			var contents func() []byte
			var err error
			if dialect == store.SQLite {
				dir := t.TempDir()
				db, err = store.Open(ctx, dir)
				contents = func() []byte { return filesIn(t, dir) }
			} else {
				dsn := pgtest.DSN(t)
				db, err = store.OpenPostgres(ctx, dsn)
				contents = func() []byte { return postgresRows(t, dsn) }
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
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
	db, err := store.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	alice := seedPlatform(t, db)
	db.Close()

	// The database as migration 0016 left it, with a session in it.
	raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	cookie, oldToken := NewSecret(), NewSecret()
	now := time.Now()
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

	db, err = store.Open(ctx, dir)
	if err != nil {
		t.Fatalf("the upgrade: %v", err)
	}
	t.Cleanup(func() { db.Close() })
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
