package store_test

import (
	"context"
	"errors"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/bridge/store/pgtest"
)

// While PostgreSQL is stopped the store's errors say the database is
// unavailable (EUNAVAILABLE with a Retry-After: the daemon answers 503),
// whether a query meets a pooled connection the server closed or a new
// one it refuses, and Ping fails (the watchdog stops). A statement's own
// error is not that. Once the server is back the same handle works.
func TestPostgresAwayIsUnavailable(t *testing.T) {
	srv := pgtest.Start(t)
	ctx := context.Background()
	db, err := store.OpenPostgres(ctx, srv.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := accounts.New(db).CreateUser(ctx, "alice", []byte("x"), []int64{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := accounts.New(db).CreateUser(ctx, "alice", []byte("x"), []int64{1}); bridge.ErrorCode(err) != bridge.ECONFLICT {
		t.Errorf("a second alice: %v, want ECONFLICT", err)
	}
	ops := []struct {
		name string
		do   func() error
	}{
		{"ping", func() error { return db.Ping(ctx) }},
		{"read", func() error { _, err := accounts.New(db).UserByName(ctx, "alice"); return err }},
		{"prepared read", func() error { _, err := accounts.New(db).Token(ctx, []byte("no such token")); return err }},
		{"write", func() error { _, err := accounts.New(db).CreateUser(ctx, "bob", []byte("x"), []int64{2}); return err }},
	}
	for _, op := range ops {
		if err := op.do(); err != nil && !errors.Is(err, bridge.ErrTokenUnknown) {
			t.Fatalf("%s before the stop: %v", op.name, err)
		}
	}

	srv.Stop()
	for _, op := range ops {
		err := op.do()
		var e *bridge.Error
		if bridge.ErrorCode(err) != bridge.EUNAVAILABLE || !errors.As(err, &e) || e.RetryAfter <= 0 {
			t.Errorf("%s with PostgreSQL stopped: %v, want EUNAVAILABLE with a Retry-After", op.name, err)
		}
	}

	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(ctx); err != nil {
		t.Errorf("ping once PostgreSQL is back: %v", err)
	}
	if u, err := accounts.New(db).UserByName(ctx, "alice"); err != nil || u.Name != "alice" {
		t.Errorf("alice once PostgreSQL is back: %+v %v", u, err)
	}
	if _, err := accounts.New(db).CreateUser(ctx, "carol", []byte("x"), []int64{3}); err != nil {
		t.Errorf("a write once PostgreSQL is back: %v", err)
	}
}
