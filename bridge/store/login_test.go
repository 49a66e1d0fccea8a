package store_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
)

func sessionHash(i int) []byte { return []byte(fmt.Sprintf("session-%03d", i)) }

// TestLoginSessionsAcrossProcesses: a session stored through one
// connection (a platform process) is read and ended through another; a
// login's rotation ends the session it replaces; expired sessions are
// dropped at the next login; a user's deletion ends the user's sessions.
func TestLoginSessionsAcrossProcesses(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		one, other := mustOpen(t, dir), mustOpen(t, dir)
		u, _, _ := seed(t, one)
		t0 := time.UnixMilli(1_700_000_000_000)
		s := bridge.LoginSession{UserID: u.ID, Password: []byte("digest"), CSRF: "csrf-1", Created: t0, Expires: t0.Add(time.Hour)}
		if err := one.StartLoginSession(ctx, sessionHash(1), s, nil, 20, 100); err != nil {
			t.Fatal(err)
		}
		got, err := other.LoginSession(ctx, sessionHash(1))
		if err != nil || got.UserID != u.ID || !bytes.Equal(got.Password, s.Password) ||
			!got.Created.Equal(s.Created) || !got.Expires.Equal(s.Expires) {
			t.Fatalf("the other process reads %+v, %v; want %+v", got, err, s)
		}
		// The CSRF token is derived from the cookie by the caller, not kept.
		if got.CSRF != "" {
			t.Errorf("the store keeps a session's CSRF token: %q", got.CSRF)
		}
		if err := other.EndLoginSession(ctx, sessionHash(1)); err != nil {
			t.Fatal(err)
		}
		if _, err := one.LoginSession(ctx, sessionHash(1)); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("a session ended through the other process is still read: %v", err)
		}
		if err := one.EndLoginSession(ctx, sessionHash(1)); err != nil {
			t.Errorf("ending a session twice: %v", err)
		}

		// A login replaces the session it rotates from, and drops those
		// expired by its time.
		for i, exp := range []time.Time{t0.Add(time.Minute), t0.Add(time.Hour)} {
			s := s
			s.Expires = exp
			if err := one.StartLoginSession(ctx, sessionHash(10+i), s, nil, 20, 100); err != nil {
				t.Fatal(err)
			}
		}
		later := s
		later.Created, later.Expires = t0.Add(2*time.Minute), t0.Add(time.Hour)
		if err := other.StartLoginSession(ctx, sessionHash(12), later, sessionHash(11), 20, 100); err != nil {
			t.Fatal(err)
		}
		for i, want := range map[int]bool{10: false, 11: false, 12: true} {
			if _, err := one.LoginSession(ctx, sessionHash(i)); (err == nil) != want {
				t.Errorf("session %d: kept %v, want %v (%v)", i, err == nil, want, err)
			}
		}

		// The user's deletion ends the user's sessions; a session for a
		// user who is gone is refused.
		other.DeleteApp(ctx, "c1")
		if err := other.DeleteUser(ctx, "alice"); err != nil {
			t.Fatal(err)
		}
		if _, err := one.LoginSession(ctx, sessionHash(12)); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("a deleted user's session is still read: %v", err)
		}
		if n, _ := one.CountRows(ctx, "login_sessions"); n != 0 {
			t.Errorf("%d sessions left after their user was deleted", n)
		}
		if err := one.StartLoginSession(ctx, sessionHash(13), later, nil, 20, 100); bridge.ErrorCode(err) != bridge.ENOTFOUND {
			t.Errorf("a session of a deleted user: %v, want ENOTFOUND", err)
		}
	})
}

// TestLoginSessionsAreBounded: a user logging in again and again keeps
// fewer than perUser sessions besides the new one, the oldest going first,
// and leaves other users' sessions alone; the table as a whole keeps at
// most total, the oldest of all going first.
func TestLoginSessionsAreBounded(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		alice, _, _ := seed(t, db)
		bob, err := db.CreateUser(ctx, "bob", []byte("hash"), nil)
		if err != nil {
			t.Fatal(err)
		}
		const perUser, total = 4, 7
		t0 := time.UnixMilli(1_700_000_000_000)
		start := func(i int, u *bridge.User) {
			t.Helper()
			at := t0.Add(time.Duration(i) * time.Second)
			s := bridge.LoginSession{UserID: u.ID, Password: []byte("d"), CSRF: "c", Created: at, Expires: at.Add(time.Hour)}
			if err := db.StartLoginSession(ctx, sessionHash(i), s, nil, perUser, total); err != nil {
				t.Fatal(err)
			}
		}
		kept := func(i int) bool {
			_, err := db.LoginSession(ctx, sessionHash(i))
			if err != nil && bridge.ErrorCode(err) != bridge.ENOTFOUND {
				t.Fatal(err)
			}
			return err == nil
		}
		start(0, bob)
		for i := 1; i <= perUser+3; i++ {
			start(i, alice)
		}
		for i := 1; i <= perUser+3; i++ {
			if want := i > 3; kept(i) != want {
				t.Errorf("alice's session %d: kept %v, want %v", i, kept(i), want)
			}
		}
		if !kept(0) {
			t.Error("alice's logins pushed out bob's session")
		}
		// Many users, one login each: the table holds total, the oldest
		// of all going first.
		for i := 100; i < 100+total; i++ {
			u, err := db.CreateUser(ctx, fmt.Sprint("user", i), []byte("hash"), nil)
			if err != nil {
				t.Fatal(err)
			}
			start(i, u)
		}
		if n, _ := db.CountRows(ctx, "login_sessions"); n != total {
			t.Errorf("%d sessions kept, want the bound %d", n, total)
		}
		if kept(0) || !kept(100+total-1) {
			t.Errorf("the bound dropped the wrong session: oldest kept %v, newest kept %v", kept(0), kept(100+total-1))
		}
	})
}

// TestSigningKeyIsMadeOnce: processes asking at once for a key that does
// not exist yet all get the same one, and keep getting it.
func TestSigningKeyIsMadeOnce(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		dbs := []*store.DB{mustOpen(t, dir), mustOpen(t, dir), mustOpen(t, dir)}
		const n = 12
		keys := make([][]byte, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				k, err := dbs[i%len(dbs)].SigningKey(ctx, "pages", []byte(fmt.Sprint("fresh-", i)))
				if err != nil {
					t.Error(err)
				}
				keys[i] = k
			}()
		}
		wg.Wait()
		for i, k := range keys {
			if !bytes.HasPrefix(k, []byte("fresh-")) || !bytes.Equal(k, keys[0]) {
				t.Fatalf("process %d got key %q, process 0 %q", i, k, keys[0])
			}
		}
		if k, err := dbs[1].SigningKey(ctx, "pages", []byte("another")); err != nil || !bytes.Equal(k, keys[0]) {
			t.Errorf("asked again: %q %v, want %q", k, err, keys[0])
		}
		if k, err := dbs[2].SigningKey(ctx, "other", []byte("second")); err != nil || string(k) != "second" {
			t.Errorf("a key of another name: %q %v", k, err)
		}
	})
}

// TestLoginFailuresAcrossProcesses: failures counted through one
// connection are read and counted on through another; a key whose
// failures are older than since starts over; Forget drops a key's.
func TestLoginFailuresAcrossProcesses(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		one, other := mustOpen(t, dir), mustOpen(t, dir)
		t0 := time.UnixMilli(1_700_000_000_000)
		day := 24 * time.Hour
		a, b := []byte("key-a"), []byte("key-b")
		for i := range 3 {
			db := []*store.DB{one, other}[i%2]
			at := t0.Add(time.Duration(i) * time.Second)
			counts, err := db.CountLoginFailure(ctx, at, at.Add(-day), 100, a)
			if err != nil || len(counts) != 1 || counts[0] != i+1 {
				t.Fatalf("failure %d: counts %v, %v", i+1, counts, err)
			}
		}
		at := t0.Add(3 * time.Second)
		counts, err := other.CountLoginFailure(ctx, at, at.Add(-day), 100, a, b)
		if err != nil || counts[0] != 4 || counts[1] != 1 {
			t.Fatalf("counts %v, %v; want [4 1]", counts, err)
		}
		got, err := one.LoginFailures(ctx, at.Add(-day), a, []byte("never"), b)
		if err != nil || got[0].Count != 4 || !got[0].Last.Equal(at) || got[1].Count != 0 || got[2].Count != 1 {
			t.Errorf("read through the first process: %+v, %v", got, err)
		}
		// A day on, the failures are forgotten: not read, and counting
		// starts over.
		next := at.Add(day + time.Second)
		if got, _ := one.LoginFailures(ctx, next.Add(-day), a); got[0].Count != 0 {
			t.Errorf("forgotten failures read: %+v", got)
		}
		if counts, _ := one.CountLoginFailure(ctx, next, next.Add(-day), 100, a); counts[0] != 1 {
			t.Errorf("after a day without failures the count is %d, want 1", counts[0])
		}
		if n, _ := one.CountRows(ctx, "login_failures"); n != 1 {
			t.Errorf("%d keys kept; the forgotten one was not dropped", n)
		}
		if err := other.ForgetLoginFailures(ctx, a); err != nil {
			t.Fatal(err)
		}
		if got, _ := one.LoginFailures(ctx, next.Add(-day), a); got[0].Count != 0 {
			t.Errorf("a forgotten key still counts %d", got[0].Count)
		}
	})
}

// TestLoginFailuresAreBounded: a flood of new keys keeps the table
// bounded, and the key failing throughout keeps its count.
func TestLoginFailuresAreBounded(t *testing.T) {
	store.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		const bound = 40
		t0 := time.UnixMilli(1_700_000_000_000)
		attacked := []byte("attacked")
		for i := range 10 * bound {
			at := t0.Add(time.Duration(i) * time.Millisecond)
			keys := [][]byte{[]byte(fmt.Sprint("flood-", i))}
			if i%10 == 0 {
				keys = append(keys, attacked)
			}
			if _, err := db.CountLoginFailure(ctx, at, at.Add(-time.Hour), bound, keys...); err != nil {
				t.Fatal(err)
			}
			if n, _ := db.CountRows(ctx, "login_failures"); n > bound {
				t.Fatalf("%d keys kept, bound %d", n, bound)
			}
		}
		got, err := db.LoginFailures(ctx, t0, attacked)
		if err != nil || got[0].Count != bound {
			t.Errorf("the attacked key counts %+v, %v; want %d", got, err, bound)
		}
	})
}
