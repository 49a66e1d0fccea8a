package admin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// withSwitches is a platform whose location 1 holds lamp, fan and bell.
type withSwitches struct{}

func (withSwitches) Location(id int64) (*bridge.Location, bool) {
	if id != 1 {
		return nil, false
	}
	return &bridge.Location{ID: 1, Name: "Home", Switches: []string{"lamp", "fan", "bell"}}, true
}

// TestChangeSwitches: an owner changes the switches an installation
// grants under the consent page's rules; the installation stays the same
// one (its tokens keep working), and a switch of another location or a
// see-only switch not granted is refused with the rule's words.
func TestChangeSwitches(t *testing.T) {
	ctx := context.Background()
	s, db := newService(t)
	s.Locations = withSwitches{}
	if _, err := (&admin.Service{Store: db, Locations: withSwitches{}}).ChangeSwitches(ctx, "x", nil, nil); bridge.ErrorCode(err) != bridge.ENOTIMPLEMENTED {
		t.Errorf("without an installer: %v, want ENOTIMPLEMENTED", err)
	}
	s.Installer = oauth.NewIssuer(db, withSwitches{})
	if _, err := s.AddUser(ctx, "alice", "pw-alice", []int64{1}, false); err != nil {
		t.Fatal(err)
	}
	app, _, err := s.CreateApp(ctx, admin.AppSpec{Name: "App", RedirectURIs: []string{"https://app.example/cb"}, Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := db.UserByName(ctx, "alice")
	in, err := s.Installer.Install(ctx, oauth.InstallRequest{App: app, User: alice, LocationID: 1, SwitchIDs: []string{"lamp"}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ChangeSwitches(ctx, in.ID, []string{"fan", "bell"}, []string{"bell"})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.Installation(ctx, in.ID)
	if err != nil {
		t.Fatalf("the installation is gone after the change: %v", err)
	}
	if got.ID != in.ID || !slices.Equal(stored.SwitchIDs, []string{"fan", "bell"}) || !slices.Equal(stored.SeeOnly, []string{"bell"}) {
		t.Errorf("after the change: %+v (returned %s), want the same installation granting fan and bell, bell see-only", stored, got.ID)
	}
	_, err = s.ChangeSwitches(ctx, in.ID, []string{"garage"}, nil)
	wantCode(t, "a switch of another location", err, bridge.EINVALID)
	_, err = s.ChangeSwitches(ctx, in.ID, []string{"fan"}, []string{"bell"})
	wantCode(t, "see-only but not granted", err, bridge.EINVALID)
	_, err = s.ChangeSwitches(ctx, in.ID, nil, nil)
	wantCode(t, "no switch", err, bridge.EINVALID)
	_, err = s.ChangeSwitches(ctx, "no-such", []string{"fan"}, nil)
	wantCode(t, "an unknown installation", err, bridge.ENOTFOUND)
	if stored, _ := db.Installation(ctx, in.ID); !slices.Equal(stored.SwitchIDs, []string{"fan", "bell"}) {
		t.Errorf("a refused change changed the grant: %v", stored.SwitchIDs)
	}
}
