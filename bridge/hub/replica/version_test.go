package replica_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/store"
)

// TestHubFollowsANewerPlatform: every answer of a newer platform carries a
// field this hub does not know; the hub ignores it and follows the
// platform as usual, so the platform can be upgraded before its hubs.
func TestHubFollowsANewerPlatform(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	inner := pl.srv.Config.Handler
	var added atomic.Int32
	newer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		inner.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") && len(body) > 2 && body[0] == '{' && body[1] != '}' {
			body = append([]byte(`{"added_in_a_later_version":{"x":[1,2]},`), body[1:]...)
			added.Add(1)
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(bytes.Clone(body))
	}))
	t.Cleanup(newer.Close)
	via := *pl
	via.srv = newer

	db, err := store.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	hub := runHub(t, &via, "h1", db, 10)
	in := pl.install(t, 10, "a-token")
	waitUntil(t, "the installation reaches the hub", func() bool { return hub.has(in.ID) })
	if _, err := hub.auth.Authorize(ctx, "a-token", in.ID); err != nil {
		t.Errorf("the token at the hub: %v", err)
	}
	if added.Load() == 0 {
		t.Error("no answer carried the unknown field: the test proves nothing")
	}
	if strings.Contains(hub.logs.String(), "unknown field") {
		t.Errorf("the hub refused an answer:\n%s", hub.logs.String())
	}
}
