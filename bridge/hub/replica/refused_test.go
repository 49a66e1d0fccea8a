package replica_test

import (
	"context"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/link"
)

// TestRefusedInventoryKeepsFollowing: a reload gives hub h1 a location
// hub h2 holds, and the platform refuses h1's new inventory; h1 says so,
// and goes on following the changes of the location it held, so a token
// revoked there still stops working at h1 within 2 s.
func TestRefusedInventoryKeepsFollowing(t *testing.T) {
	ctx := context.Background()
	pl := newPlatform(t)
	if c, body := pl.do(t, "PUT", link.InventoryPath, "h2", pl.hubs["h2"], inventory(20)); c != http.StatusNoContent {
		t.Fatalf("h2's inventory: %d %s", c, body)
	}
	h1 := startHub(t, pl, "h1", 10)
	in := pl.install(t, 10, "revoke-me")
	waitUntil(t, "the installation reaches h1", func() bool { return h1.has(in.ID) })

	h1.setLocations(10, 20)
	waitUntil(t, "h1 says the platform refused it", func() bool {
		return strings.Contains(h1.h.Refused(), "location 20 is held by another hub") &&
			strings.Contains(h1.logs.String(), "the platform refused this hub")
	})
	if !h1.h.Up() {
		t.Error("h1's link is down after a refused inventory")
	}
	if _, err := h1.auth.Authorize(ctx, "revoke-me", in.ID); err != nil {
		t.Fatalf("the token at h1 before the revocation: %v", err)
	}
	if err := accounts.New(pl.db).Uninstall(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, err := h1.auth.Authorize(ctx, "revoke-me", in.ID)
		if bridge.ErrorCode(err) == bridge.EUNAUTHORIZED {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("2 s after the uninstall the token still works at h1 (%v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The other side gives location 20 up; h1's next report is accepted.
	if c, body := pl.do(t, "PUT", link.InventoryPath, "h2", pl.hubs["h2"], inventory()); c != http.StatusNoContent {
		t.Fatalf("h2 gives location 20 up: %d %s", c, body)
	}
	h1.h.InventoryChanged()
	waitUntil(t, "h1's inventory accepted", func() bool {
		h, err := accounts.New(pl.db).Hub(ctx, "h1")
		return err == nil && len(h.Locations) == 2 && h1.h.Refused() == ""
	})
}
