package accounts

import (
	"context"
	"testing"
)

// TestUserIDsAreNeverReused: the newest user deleted, the next user gets
// a new id, not the deleted one's, also across a reopen.
func TestUserIDsAreNeverReused(t *testing.T) {
	ForEachDialect(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		db, err := OpenTest(t, dir), error(nil)
		if err != nil {
			t.Fatal(err)
		}
		alice, err := db.CreateUser(ctx, "alice", []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		bob, err := db.CreateUser(ctx, "bob", []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteUser(ctx, "bob"); err != nil {
			t.Fatal(err)
		}
		carol, err := db.CreateUser(ctx, "carol", []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if carol.ID <= bob.ID || carol.ID == alice.ID {
			t.Errorf("carol got id %d after bob's %d was deleted", carol.ID, bob.ID)
		}
		if err := db.DeleteUser(ctx, "carol"); err != nil {
			t.Fatal(err)
		}
		db.DB().Close()
		db, err = OpenTest(t, dir), error(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.DB().Close()
		dave, err := db.CreateUser(ctx, "dave", []byte("x"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if dave.ID <= carol.ID {
			t.Errorf("dave got id %d after carol's %d was deleted and the database reopened", dave.ID, carol.ID)
		}
		if u, err := db.UserByID(ctx, dave.ID); err != nil || u.Name != "dave" {
			t.Errorf("UserByID(%d) = %+v, %v", dave.ID, u, err)
		}
		// An id given by other means than CreateUser is refused too.
		if _, err := db.db.ExecContext(ctx, `INSERT INTO users (id, name, password_hash, created_at) VALUES (?, 'eve', ?, 0)`, bob.ID, []byte{0}); err == nil {
			t.Error("a deleted user's id was given again by a plain INSERT")
		}
	})
}
