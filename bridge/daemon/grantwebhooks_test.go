package daemon_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// grantRig is a hub with two installations of two apps over alice's
// kitchen and hall: the victim's, whose grant a test takes away, and a
// witness's, whose webhook shows that a change went out.
type grantRig struct {
	f               *fixture
	h               *daemontest.Harness
	victim, witness daemontest.Grant
	vr, wr          *receiver
	vhook           *registered
	// on is what the test switched each switch to last.
	on map[string]bool
}

// newGrantRig makes the rig; witnessLifetime, when not 0, is the witness
// app's access token lifetime.
func newGrantRig(t *testing.T, witnessLifetime time.Duration) *grantRig {
	t.Helper()
	f := newFixture(t)
	rig := &grantRig{f: f, h: f.hub, on: map[string]bool{"kitchen": false, "hall": true}} // as hubConfig starts them
	rig.victim = rig.h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	other := rig.h.AddApp(t, f.alice, true, redirect)
	if witnessLifetime != 0 {
		if err := rig.h.Accounts.SetAppAccessTokenLifetime(context.Background(), other.ClientID, witnessLifetime); err != nil {
			t.Fatal(err)
		}
	}
	rig.witness = rig.h.Authorize(t, other, "alice", "alice-pw", 1, "kitchen", "hall")
	rig.vr, rig.wr = startReceiver(t, "ok"), startReceiver(t, "ok")
	rig.vhook = mustRegister(t, rig.h, rig.victim, rig.vr.URL)
	mustRegister(t, rig.h, rig.witness, rig.wr.URL)
	// Both deliver while the grant is held.
	rig.toggle(t, "kitchen")
	rig.vr.waitFor(1, 10*time.Second)
	return rig
}

// toggle switches sw the other way through the witness's installation and
// waits until the witness's receiver got it and the victim's webhook has
// nothing waiting: the change was queued for both at once (one outbox
// write), so by then the victim's delivery was sent or dropped. It
// returns the value switched to.
func (rig *grantRig) toggle(t *testing.T, sw string) string {
	t.Helper()
	cmd := "on"
	if rig.on[sw] {
		cmd = "off"
	}
	n := len(rig.wr.deliveries())
	if p := rig.h.Call(t, http.MethodPut, rig.witness.URI+"/switches/"+sw+"/"+cmd, rig.witness.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT %s/%s = %d %s", sw, cmd, p.StatusCode, p.Body)
	}
	rig.on[sw] = cmd == "on"
	rig.wr.waitFor(n+1, 10*time.Second)
	waitFor(t, 10*time.Second, "the victim's outbox empty", func() bool { return hookState(t, rig.h, rig.vr.URL).Pending == 0 })
	return cmd
}

// assertSuspended: a change reaches the witness and not the victim, whose
// webhook the hub shows suspended.
func (rig *grantRig) assertSuspended(t *testing.T) {
	t.Helper()
	before := len(rig.vr.deliveries())
	rig.toggle(t, "hall")
	rig.toggle(t, "kitchen")
	if got := rig.vr.deliveries(); len(got) != before {
		t.Errorf("the victim's receiver got %d deliveries after its grant ended, want none: %s", len(got)-before, got[len(got)-1].Body)
	}
	ws, err := rig.h.Webhooks.List(context.Background(), rig.victim.InstallationID())
	if err != nil || len(ws) != 1 || !ws[0].Suspended || ws[0].Disabled || !strings.HasPrefix(ws[0].Status(), "suspended: ") {
		t.Errorf("the victim's webhooks %+v %v, want one suspended", ws, err)
	}
}

// resume authorizes the victim's app again for the same installation and
// checks that its webhook delivers the changes from then on, and none of
// those made while it was suspended.
func (rig *grantRig) resume(t *testing.T) {
	t.Helper()
	before := len(rig.vr.deliveries())
	again := rig.h.Authorize(t, rig.f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	if again.InstallationID() != rig.victim.InstallationID() {
		t.Fatalf("authorized again into installation %s, want %s", again.InstallationID(), rig.victim.InstallationID())
	}
	rig.victim = again
	l := listHooks(t, rig.h, again)
	if len(l) != 1 || l[0].ID != rig.vhook.ID || l[0].State != "active" {
		t.Errorf("after the new authorization GET /webhooks = %+v, want the webhook active", l)
	}
	// hall first: kitchen, changed while suspended, coalesces with a
	// waiting delivery of its own and would hide one left over.
	value := rig.toggle(t, "hall")
	got := rig.vr.waitFor(before+1, 10*time.Second)
	if len(got) != before+1 {
		t.Fatalf("after resumption the receiver got %d deliveries, want 1", len(got)-before)
	}
	if e := got[before].event(t); e.ID != "hall" || str(e.Value) != value {
		t.Errorf("the first delivery after resumption is %s, want hall %s (nothing from while it was suspended)", got[before].Body, value)
	}
}

// TestWebhooksSuspendedByRefreshReuse: the theft response (a spent refresh
// token presented again revokes every token of the grant) suspends the
// grant's webhooks at once: a change of the switch is not delivered; the
// connected apps page shows it suspended; a new authorization of the same
// app for the same installation resumes them.
func TestWebhooksSuspendedByRefreshReuse(t *testing.T) {
	rig := newGrantRig(t, 0)
	h := rig.h
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.Client)
	cfg := h.OAuthConfig(rig.f.app)
	if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rig.victim.Token.RefreshToken}).Token(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	_, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: rig.victim.Token.RefreshToken}).Token()
	assertOAuthError(t, err, "invalid_grant")
	rig.assertSuspended(t)

	page := h.NewBrowser().ConnectedApps(t, "alice", "alice-pw")
	want := `<span class="url">` + rig.vr.URL + `</span>: <span class="status">suspended: `
	if !strings.Contains(page.Body, want) || !strings.Contains(page.Body, `<span class="url">`+rig.wr.URL+`</span>: <span class="status">delivering</span>`) {
		t.Errorf("the connected apps page lacks %s beside the witness delivering:\n%s", want, page.Body)
	}
	rig.resume(t)
}

// TestWebhooksSuspendedByRevocation: /oauth/revoke of the refresh token
// (RFC 7009: the whole grant) suspends the grant's webhooks; revoking
// only an access token, with the refresh token still live, does not.
func TestWebhooksSuspendedByRevocation(t *testing.T) {
	rig := newGrantRig(t, 0)
	h := rig.h
	revoke := func(token string) {
		t.Helper()
		if p := postForm(t, h, "/oauth/revoke", url.Values{"token": {token}}, rig.f.app.ClientID, rig.f.app.Secret); p.StatusCode != http.StatusOK {
			t.Fatalf("revoke = %d %s", p.StatusCode, p.Body)
		}
	}
	revoke(rig.victim.Token.AccessToken)
	n := len(rig.vr.deliveries())
	rig.toggle(t, "kitchen")
	rig.vr.waitFor(n+1, 10*time.Second)

	revoke(rig.victim.Token.RefreshToken)
	rig.assertSuspended(t)
	rig.resume(t)
}

// TestWebhooksSuspendedWhenTheRefreshTokenExpires: a grant whose refresh
// token and access tokens expired has no live token: its webhooks are
// suspended, and what waited in their outbox is dropped, not sent later.
func TestWebhooksSuspendedWhenTheRefreshTokenExpires(t *testing.T) {
	// The witness's access token outlives the year the clock moves on.
	rig := newGrantRig(t, 2*bridge.RefreshLifetime)
	h := rig.h
	// Queued while the receiver is down, then the year passes.
	rig.vr.set("down")
	if p := h.Call(t, http.MethodPut, rig.witness.URI+"/switches/kitchen/off", rig.witness.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT = %d", p.StatusCode)
	}
	rig.on["kitchen"] = false
	waitFor(t, 10*time.Second, "a delivery waiting", func() bool { w := hookState(t, h, rig.vr.URL); return w.Pending == 1 && !w.LastFailureAt.IsZero() })
	var offset atomic.Int64
	h.Webhooks.SetClock(func() time.Time { return time.Now().Add(time.Duration(offset.Load())) })
	offset.Store(int64(bridge.RefreshLifetime + time.Hour))
	rig.vr.set("ok")
	before := len(rig.vr.deliveries())
	rig.assertSuspended(t)
	if n := len(rig.vr.deliveries()); n != before {
		t.Errorf("the delivery that waited was sent after the grant expired")
	}
}

// TestWebhooksEndWhenTheUserRemovesTheApp: the user's Remove on the
// connected apps page ends deliveries at once: the change right after is
// not delivered, and the webhook goes with the installation.
func TestWebhooksEndWhenTheUserRemovesTheApp(t *testing.T) {
	rig := newGrantRig(t, 0)
	h := rig.h
	b := h.NewBrowser()
	page := b.ConnectedApps(t, "alice", "alice-pw")
	if p := b.Post(t, "/oauth/apps/remove", url.Values{"installation": {rig.victim.InstallationID()}, "csrf": {page.CSRF(t)}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove = %d %s", p.StatusCode, p.Body)
	}
	before := len(rig.vr.deliveries())
	n := len(rig.wr.deliveries())
	if p := h.Call(t, http.MethodPut, rig.witness.URI+"/switches/hall/off", rig.witness.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT = %d", p.StatusCode)
	}
	rig.wr.waitFor(n+1, 10*time.Second)
	waitFor(t, 10*time.Second, "the webhook deleted", func() bool {
		ws, _ := h.HubStore.Webhooks(context.Background(), rig.victim.InstallationID())
		return len(ws) == 0
	})
	if got := rig.vr.deliveries(); len(got) != before {
		t.Errorf("the receiver of a removed app got %d deliveries", len(got)-before)
	}
}
