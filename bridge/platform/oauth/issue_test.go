package oauth_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// issuerFixture is a real store with a developer (alice, locations 1 and
// 2), another user (bob, location 2), alice's unpublished app and a hub
// table of two locations.
type issuerFixture struct {
	db         *accounts.Store
	hub        *bridge.Switchboard
	alice, bob *bridge.User
	app        *bridge.App
}

func newIssuerFixture(t *testing.T) *issuerFixture {
	t.Helper()
	ctx := context.Background()
	db, err := records(store.OpenFile(ctx, t.TempDir()+"/"+store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.DB().Close() })
	hub, err := bridge.NewSwitchboard([]bridge.Location{
		{ID: 1, Name: "Home", Switches: []string{"lamp", "fan"}},
		{ID: 2, Name: "Garage", Switches: []string{"door"}},
	}, nil, bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &issuerFixture{db: db, hub: hub}
	if f.alice, err = db.CreateUser(ctx, "alice", []byte("x"), []int64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if f.bob, err = db.CreateUser(ctx, "bob", []byte("x"), []int64{2}); err != nil {
		t.Fatal(err)
	}
	f.app = &bridge.App{ClientID: "app1", Name: "App", SecretHash: oauth.Hash("s"), RedirectURIs: []string{"https://x/cb"}, OwnerID: f.alice.ID}
	if err := db.CreateApp(ctx, f.app); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestInstallRules(t *testing.T) {
	f := newIssuerFixture(t)
	iss := oauth.NewIssuer(f.db, f.hub)
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		user   *bridge.User
		loc    int64
		ids    []string
		reason error
	}{
		{"unpublished app, not its developer", f.bob, 2, []string{"door"}, oauth.ErrNotInstallable},
		{"location not configured", f.alice, 7, []string{"lamp"}, oauth.ErrUnknownLocation},
		{"no location", f.alice, 0, []string{"lamp"}, oauth.ErrUnknownLocation},
		{"no switch", f.alice, 1, nil, oauth.ErrNoSwitch},
		{"switch of another location", f.alice, 1, []string{"lamp", "door"}, oauth.ErrSwitchElsewhere},
		{"unknown switch", f.alice, 1, []string{"nope"}, oauth.ErrSwitchElsewhere},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := iss.Install(ctx, oauth.InstallRequest{App: f.app, User: c.user, LocationID: c.loc, SwitchIDs: c.ids})
			var ie *oauth.InstallError
			if !errors.Is(err, c.reason) || !errors.As(err, &ie) {
				t.Fatalf("err = %v, want an InstallError for %v", err, c.reason)
			}
		})
	}
	// Published, bob may install it, but only into his own location.
	f.app.Published = true
	if _, err := iss.Install(ctx, oauth.InstallRequest{App: f.app, User: f.bob, LocationID: 1, SwitchIDs: []string{"lamp"}}); !errors.Is(err, oauth.ErrNotMember) {
		t.Errorf("bob into Home: %v, want ErrNotMember", err)
	}
	if n, _ := f.db.CountInstallations(ctx); n != 0 {
		t.Fatalf("%d installations recorded by refused installs", n)
	}
	in, err := iss.Install(ctx, oauth.InstallRequest{App: f.app, User: f.alice, LocationID: 1, SwitchIDs: []string{"fan", "lamp", "fan"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"fan", "lamp"}; !slices.Equal(in.SwitchIDs, want) {
		t.Errorf("switches = %v, want %v (order given, repeats dropped)", in.SwitchIDs, want)
	}
	stored, err := f.db.Installation(ctx, in.ID)
	if err != nil || !slices.Equal(stored.SwitchIDs, in.SwitchIDs) || stored.LocationID != 1 {
		t.Errorf("stored installation = %+v, %v", stored, err)
	}
}

// TestDeveloperTokenIsCheckedLikeAnyOther: the CLI's install goes through
// the Issuer, and the token it issues is one the platform's token check
// accepts for that installation and its switches, for TokenLifetime.
func TestDeveloperTokenIsCheckedLikeAnyOther(t *testing.T) {
	f := newIssuerFixture(t)
	f.app.Published = true
	srv := oauth.New(f.db, f.hub, nil, oauth.Options{TokenLifetime: 48 * time.Hour})
	ctx := context.Background()
	// Published or not, install without the OAuth flow is the developer's.
	if _, _, err := srv.Issuer.InstallForDeveloper(ctx, oauth.InstallRequest{App: f.app, User: f.bob, LocationID: 2, SwitchIDs: []string{"door"}}); !errors.Is(err, oauth.ErrNotDeveloper) {
		t.Fatalf("bob: %v, want ErrNotDeveloper", err)
	}
	if _, _, err := srv.Issuer.InstallForDeveloper(ctx, oauth.InstallRequest{App: f.app, User: f.alice, LocationID: 1, SwitchIDs: []string{"door"}}); !errors.Is(err, oauth.ErrSwitchElsewhere) {
		t.Fatalf("a switch of another location: %v, want ErrSwitchElsewhere", err)
	}
	before := time.Now()
	in, tok, err := srv.Issuer.InstallForDeveloper(ctx, oauth.InstallRequest{App: f.app, User: f.alice, LocationID: 1, SwitchIDs: []string{"lamp"}})
	if err != nil {
		t.Fatal(err)
	}
	if tok.ExpiresIn != 48*time.Hour || tok.ExpiresAt.Before(before.Add(48*time.Hour)) || tok.ExpiresAt.After(time.Now().Add(48*time.Hour)) {
		t.Errorf("token lifetime %s, expires %s; want 48h from now", tok.ExpiresIn, tok.ExpiresAt)
	}
	g, err := srv.Authorize(ctx, tok.Token, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if g.ClientID != f.app.ClientID || g.UserID != f.alice.ID || g.LocationID != 1 || !slices.Equal(g.SwitchIDs, []string{"lamp"}) {
		t.Errorf("grant = %+v", g)
	}
	if _, err := srv.Authorize(ctx, tok.Token, "another-installation"); bridge.ErrorCode(err) != bridge.EFORBIDDEN {
		t.Errorf("token for another installation: %v, want forbidden", err)
	}
}
