package link_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/store"
)

func lastUsed(t *testing.T, pl *platform, id string) time.Time {
	t.Helper()
	in, err := pl.db.Installation(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return in.LastUsedAt
}

// TestHubReportsUsage: a token accepted at a hub shows as used at the
// platform; a use while the platform is away is reported once the link is
// back; a hub cannot report for another hub's installations.
func TestHubReportsUsage(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	hub := startHub(t, pl, "h1", 10)
	w := store.NewUsageWriter(hub.h, slog.New(slog.DiscardHandler))
	t.Cleanup(func() { w.Close() })
	hub.auth.SetUsed(w.Touch)

	in := pl.install(t, 10, "hub-token")
	other := pl.installApp(t, "c2", 10, "other-token")
	waitUntil(t, "the installations reach the hub", func() bool { return hub.has(in.ID) && hub.has(other.ID) })
	if _, err := hub.auth.Authorize(ctx, "hub-token", in.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the platform records the use at the hub", func() bool { return !lastUsed(t, pl, in.ID).IsZero() })

	// Another hub's report on h1's installation is not recorded.
	if c, body := pl.do(t, "PUT", link.UsagePath, "h2", pl.hubs["h2"], `{"used":{"`+other.ID+`":1700000000}}`); c != http.StatusNoContent {
		t.Fatalf("h2's usage report: %d %s", c, body)
	}
	if !lastUsed(t, pl, other.ID).IsZero() {
		t.Error("h2 reported a use of h1's installation")
	}
	for _, bad := range []string{`{"used":`, `{"used":{}} {}`, `[]`} {
		if c, _ := pl.do(t, "PUT", link.UsagePath, "h2", pl.hubs["h2"], bad); c != http.StatusBadRequest {
			t.Errorf("usage report %s: %d, want 400", bad, c)
		}
	}
	if c, _ := pl.do(t, "PUT", link.UsagePath, "h1", "wrong", `{"used":{}}`); c != http.StatusUnauthorized {
		t.Errorf("usage report with a wrong secret: %d, want 401", c)
	}

	// The platform goes away; a use at the hub waits for the link.
	addr := pl.srv.Listener.Addr().String()
	pl.srv.CloseClientConnections()
	pl.srv.Close()
	waitUntil(t, "the hub sees its link down", func() bool { return !hub.h.Up() })
	if _, err := hub.auth.Authorize(ctx, "other-token", other.ID); err != nil {
		t.Fatalf("the hub without its platform: %v", err)
	}
	waitUntil(t, "the use is kept for the next report", func() bool {
		return link.PendingUsage(hub.h) > 0
	})
	if !lastUsed(t, pl, other.ID).IsZero() {
		t.Fatal("recorded while the platform was away: the check below proves nothing")
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the platform's port was taken meanwhile: %v", err)
	}
	mux := http.NewServeMux()
	pl.p.Register(mux)
	back := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	back.Start()
	t.Cleanup(back.Close)
	deadline := time.Now().Add(20 * time.Second)
	for lastUsed(t, pl, other.ID).IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("the use made while the platform was away never reached it")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
