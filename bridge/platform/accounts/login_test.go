package accounts_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

func sessionHash(i int) []byte { return []byte(fmt.Sprintf("session-%03d", i)) }

// TestLoginSessionsAcrossProcesses: a session stored through one
// connection (a platform process) is read and ended through another; a
// login's rotation ends the session it replaces; expired sessions are
// dropped at the next login; a user's deletion ends the user's sessions.
func TestLoginSessionsAcrossProcesses(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
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
		if n, _ := countRows(ctx, one, "login_sessions"); n != 0 {
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
	storetest.ForEachDialect(t, func(t *testing.T) {
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
		if n, _ := countRows(ctx, db, "login_sessions"); n != total {
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
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		dbs := []*accounts.Store{mustOpen(t, dir), mustOpen(t, dir), mustOpen(t, dir)}
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

// always accepts every count: ChargeLoginFailure then always counts.
func always([]bridge.FailureCount) bool { return true }

// charge counts one failure against the keys and returns their counts
// after it.
func charge(t *testing.T, db *accounts.Store, at time.Time, since time.Time, maxKeys int, keys ...[]byte) []int {
	t.Helper()
	before, ok, err := db.ChargeLoginFailure(context.Background(), at, since, maxKeys, always, keys...)
	if err != nil || !ok {
		t.Fatalf("charge: %v, %v", ok, err)
	}
	after := make([]int, len(before))
	for i, c := range before {
		after[i] = c.Count + 1
	}
	return after
}

// TestLoginFailuresAcrossProcesses: failures counted through one
// connection are read and counted on through another; a key whose
// failures are older than since starts over; Forget drops a key's.
func TestLoginFailuresAcrossProcesses(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		one, other := mustOpen(t, dir), mustOpen(t, dir)
		t0 := time.UnixMilli(1_700_000_000_000)
		day := 24 * time.Hour
		a, b := []byte("key-a"), []byte("key-b")
		for i := range 3 {
			db := []*accounts.Store{one, other}[i%2]
			at := t0.Add(time.Duration(i) * time.Second)
			if counts := charge(t, db, at, at.Add(-day), 100, a); len(counts) != 1 || counts[0] != i+1 {
				t.Fatalf("failure %d: counts %v", i+1, counts)
			}
		}
		at := t0.Add(3 * time.Second)
		if counts := charge(t, other, at, at.Add(-day), 100, a, b); counts[0] != 4 || counts[1] != 1 {
			t.Fatalf("counts %v; want [4 1]", counts)
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
		if counts := charge(t, one, next, next.Add(-day), 100, a); counts[0] != 1 {
			t.Errorf("after a day without failures the count is %d, want 1", counts[0])
		}
		if n, _ := countRows(ctx, one, "login_failures"); n != 1 {
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

// TestChargeLoginFailure: allow is given the counts as they are; a refused
// charge writes nothing; an undone charge leaves the key as it was when
// nothing was counted since, else one failure fewer with the later time.
func TestChargeLoginFailure(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		db := mustOpen(t, t.TempDir())
		t0 := time.UnixMilli(1_700_000_000_000)
		since := t0.Add(-time.Hour)
		a, b := []byte("key-a"), []byte("key-b")
		charge(t, db, t0, since, 100, a)
		charge(t, db, t0, since, 100, a)
		var seen []bridge.FailureCount
		before, ok, err := db.ChargeLoginFailure(ctx, t0.Add(time.Second), since, 100, func(c []bridge.FailureCount) bool {
			seen = c
			return false
		}, a, b)
		if err != nil || ok || len(seen) != 2 || seen[0].Count != 2 || !seen[0].Last.Equal(t0) || seen[1].Count != 0 || len(before) != 2 || before[0] != seen[0] {
			t.Fatalf("refused charge: before %+v, charged %v, %v; allow saw %+v", before, ok, err, seen)
		}
		if got, _ := db.LoginFailures(ctx, since, a, b); got[0].Count != 2 || !got[0].Last.Equal(t0) || got[1].Count != 0 {
			t.Fatalf("a refused charge wrote: %+v", got)
		}

		// Undone with nothing counted since: as before, a new key gone.
		at := t0.Add(time.Second)
		before, ok, err = db.ChargeLoginFailure(ctx, at, since, 100, always, a, b)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		for i, k := range [][]byte{a, b} {
			if err := db.UndoLoginFailure(ctx, at, k, before[i]); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := db.LoginFailures(ctx, since, a, b); got[0].Count != 2 || !got[0].Last.Equal(t0) || got[1].Count != 0 {
			t.Errorf("after an undone charge: %+v, want a as before and b gone", got)
		}
		if n, _ := countRows(ctx, db, "login_failures"); n != 1 {
			t.Errorf("%d keys kept after undoing a new key's charge", n)
		}

		// Undone after another failure: one fewer, the later time kept.
		before, _, _ = db.ChargeLoginFailure(ctx, at, since, 100, always, a)
		later := at.Add(time.Second)
		charge(t, db, later, since, 100, a)
		if err := db.UndoLoginFailure(ctx, at, a, before[0]); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.LoginFailures(ctx, since, a); got[0].Count != 3 || !got[0].Last.Equal(later) {
			t.Errorf("undone after a later failure: %+v, want 3 at the later time", got)
		}
		// A key gone since stays gone.
		if err := db.ForgetLoginFailures(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := db.UndoLoginFailure(ctx, later, a, bridge.FailureCount{Count: 2, Last: at}); err != nil {
			t.Fatal(err)
		}
		if got, _ := db.LoginFailures(ctx, since, a); got[0].Count != 0 {
			t.Errorf("an undo brought back a forgotten key: %+v", got)
		}
	})
}

// TestChargeLoginFailureIsAtomic: 30 charges at once through two
// connections (two platform processes), each allowed while fewer than 10
// failures are counted: exactly 10 are charged.
func TestChargeLoginFailureIsAtomic(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		dbs := []*accounts.Store{mustOpen(t, dir), mustOpen(t, dir)}
		t0 := time.UnixMilli(1_700_000_000_000)
		const budget, tries = 10, 30
		var wg sync.WaitGroup
		start := make(chan struct{})
		charged := make(chan bool, tries)
		for i := range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, ok, err := dbs[i%2].ChargeLoginFailure(ctx, t0, t0.Add(-time.Hour), 100, func(c []bridge.FailureCount) bool {
					return c[0].Count < budget
				}, []byte("user"), []byte(fmt.Sprint("addr-", i)))
				if err != nil {
					t.Error(err)
				}
				charged <- ok
			}()
		}
		close(start)
		wg.Wait()
		close(charged)
		n := 0
		for ok := range charged {
			if ok {
				n++
			}
		}
		if n != budget {
			t.Errorf("%d of %d parallel charges went through, budget %d", n, tries, budget)
		}
		if got, _ := dbs[0].LoginFailures(ctx, t0.Add(-time.Hour), []byte("user")); got[0].Count != budget {
			t.Errorf("the key counts %d failures, want %d", got[0].Count, budget)
		}
	})
}

// TestLoginFailuresAreBounded: a flood of new keys keeps the table
// bounded, and the key failing throughout keeps its count.
func TestLoginFailuresAreBounded(t *testing.T) {
	storetest.ForEachDialect(t, func(t *testing.T) {
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
			charge(t, db, at, at.Add(-time.Hour), bound, keys...)
			if n, _ := countRows(ctx, db, "login_failures"); n > bound {
				t.Fatalf("%d keys kept, bound %d", n, bound)
			}
		}
		got, err := db.LoginFailures(ctx, t0, attacked)
		if err != nil || got[0].Count != bound {
			t.Errorf("the attacked key counts %+v, %v; want %d", got, err, bound)
		}
	})
}
