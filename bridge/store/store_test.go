package store_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// mustOpen opens the store at dir in the dialect under test (see
// store.ForEachDialect).
func mustOpen(t *testing.T, dir string) *store.DB {
	t.Helper()
	return store.OpenTest(t, dir)
}

func seed(t *testing.T, db *store.DB) (*bridge.User, *bridge.App, *bridge.Installation) {
	t.Helper()
	ctx := context.Background()
	u, err := db.CreateUser(ctx, "alice", []byte("hash"), []int64{2, 1, 2})
	if err != nil {
		t.Fatal(err)
	}
	a := &bridge.App{ClientID: "c1", Name: "App", SecretHash: []byte("s"), RedirectURIs: []string{"https://a/cb", "https://b/cb"}, OwnerID: u.ID}
	if err := db.CreateApp(ctx, a); err != nil {
		t.Fatal(err)
	}
	in := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 1, SwitchIDs: []string{"b", "a"}}
	if err := db.Install(ctx, in); err != nil {
		t.Fatal(err)
	}
	return u, a, in
}

func TestUsersAppsInstallations(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		u, _, in := seed(t, db)

		if _, err := db.CreateUser(ctx, "alice", []byte("x"), nil); bridge.ErrorCode(err) != bridge.ECONFLICT {
			t.Errorf("duplicate user: %v", err)
		}
		got, err := db.UserByName(ctx, "alice")
		if err != nil || len(got.Locations) != 2 || got.Locations[0] != 1 {
			t.Errorf("user = %+v %v (locations deduplicated and sorted)", got, err)
		}
		if _, err := db.UserByName(ctx, "nobody"); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("missing user: %v", err)
		}
		if err := db.SetPassword(ctx, "nobody", []byte("x")); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("SetPassword on a missing user: %v", err)
		}
		if err := db.CreateApp(ctx, &bridge.App{ClientID: "c1", Name: "dup", SecretHash: []byte("s"), OwnerID: u.ID}); bridge.ErrorCode(err) != bridge.ECONFLICT {
			t.Errorf("duplicate app: %v", err)
		}
		if err := db.CreateApp(ctx, &bridge.App{ClientID: "c2", Name: "orphan", SecretHash: []byte("s"), OwnerID: 999}); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("app with a missing owner: %v", err)
		}
		a, err := db.App(ctx, "c1")
		if err != nil || len(a.RedirectURIs) != 2 || a.RedirectURIs[0] != "https://a/cb" || a.Published {
			t.Errorf("app = %+v %v", a, err)
		}
		if err := db.SetAppPublished(ctx, "c1", true); err != nil {
			t.Fatal(err)
		}
		if a, _ := db.App(ctx, "c1"); !a.Published {
			t.Error("publish did not stick")
		}
		if err := db.SetAppPublished(ctx, "nope", true); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("publishing a missing app: %v", err)
		}
		if err := db.SetAppPublished(ctx, "c1", false); err != nil {
			t.Fatal(err)
		}
		if a, _ := db.App(ctx, "c1"); a.Published {
			t.Error("unpublish did not stick")
		}
		if err := db.SetAppPublished(ctx, "c1", true); err != nil {
			t.Fatal(err)
		}

		// Installing again into the same location updates, keeping the id.
		again := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 1, SwitchIDs: []string{"c"}}
		if err := db.Install(ctx, again); err != nil {
			t.Fatal(err)
		}
		if again.ID != in.ID {
			t.Errorf("reinstall made a new id %s (was %s)", again.ID, in.ID)
		}
		got2, _ := db.Installation(ctx, in.ID)
		if len(got2.SwitchIDs) != 1 || got2.SwitchIDs[0] != "c" {
			t.Errorf("switches after reinstall = %v", got2.SwitchIDs)
		}
		other := &bridge.Installation{ClientID: "c1", UserID: u.ID, LocationID: 2, SwitchIDs: []string{"x", "y"}}
		db.Install(ctx, other)
		if other.ID == in.ID || len(other.ID) != 36 {
			t.Errorf("second location id %q", other.ID)
		}
		if n, _ := db.CountInstallations(ctx); n != 2 {
			t.Errorf("count = %d", n)
		}
		o, _ := db.Installation(ctx, other.ID)
		if o.SwitchIDs[0] != "x" || o.SwitchIDs[1] != "y" {
			t.Errorf("switch order not kept: %v", o.SwitchIDs)
		}
	})
}

func TestRedeemCode(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		future := time.Now().Add(time.Hour)
		code := bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: in.ID, ExpiresAt: future}
		if err := db.CreateCode(ctx, []byte("code1"), code); err != nil {
			t.Fatal(err)
		}
		ok := func(bridge.AuthCode) error { return nil }
		refuse := errors.New("wrong client")

		// A refusing check leaves the code usable.
		if _, err := db.RedeemCode(ctx, []byte("code1"), func(bridge.AuthCode) error { return refuse }, access([]byte("t0"), future)); !errors.Is(err, refuse) {
			t.Fatalf("refused check: %v", err)
		}
		c, err := db.RedeemCode(ctx, []byte("code1"), ok, access([]byte("t1"), future))
		if err != nil || c.InstallationID != in.ID {
			t.Fatalf("redeem: %+v %v", c, err)
		}
		if tok, err := db.Token(ctx, []byte("t1")); err != nil || tok.Revoked || tok.InstallationID != in.ID {
			t.Fatalf("token: %+v %v", tok, err)
		}
		if _, err := db.Token(ctx, []byte("t0")); !errors.Is(err, bridge.ErrTokenUnknown) {
			t.Errorf("a refused redemption stored a token: %v", err)
		}
		// Replay: refused, and the first token revoked.
		if _, err := db.RedeemCode(ctx, []byte("code1"), ok, access([]byte("t2"), future)); !errors.Is(err, bridge.ErrCodeReused) {
			t.Errorf("replay: %v", err)
		}
		if tok, _ := db.Token(ctx, []byte("t1")); !tok.Revoked {
			t.Error("replay did not revoke the token")
		}
		if _, err := db.RedeemCode(ctx, []byte("nope"), ok, access([]byte("t3"), future)); !errors.Is(err, bridge.ErrCodeInvalid) {
			t.Errorf("unknown code: %v", err)
		}
		// Expired.
		code.ExpiresAt = time.Now().Add(-time.Second)
		db.CreateCode(ctx, []byte("old"), code)
		if _, err := db.RedeemCode(ctx, []byte("old"), ok, access([]byte("t4"), future)); !errors.Is(err, bridge.ErrCodeInvalid) {
			t.Errorf("expired code: %v", err)
		}
	})
}

// access is an access token alone, as the store keeps it.
func access(hash []byte, expires time.Time) bridge.TokenPair {
	return bridge.TokenPair{AccessHash: hash, AccessExpiresAt: expires}
}

func TestConcurrentRedeemOneWinner(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		future := time.Now().Add(time.Hour)
		db.CreateCode(ctx, []byte("c"), bridge.AuthCode{ClientID: "c1", RedirectURI: "https://a/cb", InstallationID: in.ID, ExpiresAt: future})
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins, reused := 0, 0
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := db.RedeemCode(ctx, []byte("c"), func(bridge.AuthCode) error { return nil }, access([]byte{byte(i)}, future))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins++
				case errors.Is(err, bridge.ErrCodeReused):
					reused++
				default:
					t.Errorf("redeem: %v", err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 || reused != 15 {
			t.Errorf("wins %d reused %d, want 1 and 15", wins, reused)
		}
	})
}

func TestSwitchValuesAndPersistence(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	now := time.Now()
	db.SaveSwitchValue(ctx, "a", bridge.Off, now)
	db.SaveSwitchValue(ctx, "a", bridge.On, now.Add(-time.Minute)) // the last write wins, whatever the wall clock says
	db.SaveSwitchValue(ctx, "b", bridge.Off, now)
	seed(t, db)
	db.Close()

	db2 := mustOpen(t, dir)
	vals, err := db2.SwitchValues(ctx)
	if err != nil || vals["a"] != bridge.On || vals["b"] != bridge.Off {
		t.Errorf("values after reopen = %v %v", vals, err)
	}
	if _, err := db2.UserByName(ctx, "alice"); err != nil {
		t.Errorf("user after reopen: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, store.FileName+"-wal")); err != nil {
		t.Errorf("no WAL file: %v", err)
	}
}

func TestPrune(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		_, _, in := seed(t, db)
		old := time.Now().Add(-48 * time.Hour)
		db.CreateCode(ctx, []byte("old"), bridge.AuthCode{ClientID: "c1", RedirectURI: "x", InstallationID: in.ID, ExpiresAt: old})
		db.CreateCode(ctx, []byte("new"), bridge.AuthCode{ClientID: "c1", RedirectURI: "x", InstallationID: in.ID, ExpiresAt: time.Now().Add(time.Minute)})
		db.CreateToken(ctx, []byte("oldtok"), in.ID, old)
		db.CreateToken(ctx, []byte("newtok"), in.ID, time.Now().Add(time.Hour))
		if err := db.Prune(ctx, time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Token(ctx, []byte("oldtok")); !errors.Is(err, bridge.ErrTokenUnknown) {
			t.Errorf("old token kept: %v", err)
		}
		if _, err := db.Token(ctx, []byte("newtok")); err != nil {
			t.Errorf("live token pruned: %v", err)
		}
		ok := func(bridge.AuthCode) error { return nil }
		if _, err := db.RedeemCode(ctx, []byte("old"), ok, access([]byte("t"), time.Now())); !errors.Is(err, bridge.ErrCodeInvalid) {
			t.Errorf("old code: %v", err)
		}
		if _, err := db.RedeemCode(ctx, []byte("new"), ok, access([]byte("t"), time.Now().Add(time.Hour))); err != nil {
			t.Errorf("live code pruned: %v", err)
		}
	})
}

func TestOpenRefusesUnwritableDir(t *testing.T) {
	if os.Geteuid() == 0 {
		// root writes anywhere; use a path under a regular file instead.
		f := filepath.Join(t.TempDir(), "file")
		os.WriteFile(f, nil, 0o600)
		if _, err := store.Open(context.Background(), filepath.Join(f, "data")); err == nil {
			t.Fatal("opened a data dir below a regular file")
		}
		return
	}
	// Open makes a data dir it owns private and writable (0700), so the
	// one it cannot use is one it cannot create.
	parent := t.TempDir()
	os.Chmod(parent, 0o500)
	t.Cleanup(func() { os.Chmod(parent, 0o700) })
	if _, err := store.Open(context.Background(), filepath.Join(parent, "data")); err == nil {
		t.Fatal("opened a data dir below a read-only directory")
	}
}

func TestJournal(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := mustOpen(t, dir)
	j, err := store.OpenJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	now := time.Now()
	db.SaveSwitchValue(ctx, "a", bridge.Off, now.Add(time.Hour)) // a clock that was ahead
	j.Append([]store.SwitchValue{{SwitchID: "a", Value: bridge.On, At: now}, {SwitchID: "b", Value: bridge.On, At: now}})
	j.Append([]store.SwitchValue{{SwitchID: "b", Value: bridge.Off, At: now.Add(time.Second)}})
	// A line torn by a kill in the middle of a write: no newline, id cut.
	f, _ := os.OpenFile(filepath.Join(dir, store.JournalName), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("1700000000000 on ki")
	f.Close()

	read, _ := store.ReadJournal(dir)
	if len(read) != 3 {
		t.Fatalf("ReadJournal = %+v, want the three whole lines", read)
	}
	rep, err := j.Replay(db)
	if err != nil || rep.Replayed != 3 || rep.TornBytes != int64(len("1700000000000 on ki")) {
		t.Fatalf("Replay = %+v, %v", rep, err)
	}
	vals, _ := db.SwitchValues(ctx)
	if vals["a"] != bridge.On || vals["b"] != bridge.Off || vals["ki"] != "" {
		t.Errorf("after replay: %v (the torn line must not count)", vals)
	}
	if read, _ := store.ReadJournal(dir); len(read) != 0 {
		t.Errorf("journal not emptied by Replay: %+v", read)
	}
	// Appends after a truncate land at the start (O_APPEND), and Compact empties it.
	j.Append([]store.SwitchValue{{SwitchID: "c", Value: bridge.On, At: now}})
	if read, _ := store.ReadJournal(dir); len(read) != 1 || read[0].SwitchID != "c" {
		t.Errorf("after truncate and append: %+v", read)
	}
	j.Compact()
	if read, _ := store.ReadJournal(dir); len(read) != 0 {
		t.Errorf("Compact left %+v", read)
	}
}
