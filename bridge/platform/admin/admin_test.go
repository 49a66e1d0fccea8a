package admin_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// locations is a platform with locations 1 and 2.
type locations map[int64]bool

func (l locations) Location(id int64) (*bridge.Location, bool) {
	if !l[id] {
		return nil, false
	}
	return &bridge.Location{ID: id}, true
}

func newService(t *testing.T) (*admin.Service, *accounts.Store) {
	t.Helper()
	db, err := records(store.Open(context.Background(), t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.DB().Close() })
	return &admin.Service{Store: db, Locations: locations{1: true, 2: true}, PasswordCost: bcrypt.MinCost}, db
}

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if bridge.ErrorCode(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

func TestUsers(t *testing.T) {
	ctx := context.Background()
	s, db := newService(t)
	_, err := s.AddUser(ctx, "has space", "pw-pw", []int64{1}, false)
	wantCode(t, "a name with a space", err, bridge.EINVALID)
	_, err = s.AddUser(ctx, "alice", "pw", []int64{1}, false)
	wantCode(t, "a short password", err, bridge.EINVALID)
	_, err = s.AddUser(ctx, "alice", strings.Repeat("p", 73), []int64{1}, false)
	wantCode(t, "a password bcrypt would cut", err, bridge.EINVALID)
	_, err = s.AddUser(ctx, "alice", "pw-alice", []int64{9}, false)
	wantCode(t, "an unknown location", err, bridge.ENOTFOUND)
	_, err = s.AddUser(ctx, "alice", "pw-alice", nil, false)
	wantCode(t, "no location", err, bridge.EINVALID)
	if _, err := db.UserByName(ctx, "alice"); bridge.ErrorCode(err) != bridge.ENOTFOUND {
		t.Fatalf("a refused user was stored: %v", err)
	}

	u, err := s.AddUser(ctx, "alice", "pw-alice", []int64{1}, false)
	if err != nil {
		t.Fatal(err)
	}
	if bcrypt.CompareHashAndPassword(u.PasswordHash, []byte("pw-alice")) != nil {
		t.Error("the stored hash is not of the password")
	}
	_, err = s.AddUser(ctx, "alice", "pw-alice", []int64{1}, false)
	wantCode(t, "a second alice", err, bridge.ECONFLICT)

	if err := s.SetPassword(ctx, "alice", "new-pw"); err != nil {
		t.Fatal(err)
	}
	if u, _ := db.UserByName(ctx, "alice"); bcrypt.CompareHashAndPassword(u.PasswordHash, []byte("new-pw")) != nil {
		t.Error("the new password does not check")
	}
	wantCode(t, "a short new password", s.SetPassword(ctx, "alice", "x"), bridge.EINVALID)

	// Removals before additions: --remove 1 --add 1 keeps the membership.
	done, err := s.ChangeLocations(ctx, "alice", []int64{1, 2}, []int64{1})
	if err != nil || len(done) != 3 || done[0].Added || done[0].Location != 1 || !done[1].Added || !done[2].Added {
		t.Errorf("ChangeLocations = %+v, %v", done, err)
	}
	if u, _ := db.UserByName(ctx, "alice"); len(u.Locations) != 2 {
		t.Errorf("alice's locations = %v", u.Locations)
	}
	_, err = s.ChangeLocations(ctx, "alice", []int64{7}, nil)
	wantCode(t, "adding an unknown location", err, bridge.ENOTFOUND)
	_, err = s.ChangeLocations(ctx, "nobody", nil, []int64{1})
	wantCode(t, "changing nobody", err, bridge.ENOTFOUND)

	n, err := s.DeleteUser(ctx, "alice")
	if err != nil || n != 0 {
		t.Errorf("DeleteUser = %d, %v", n, err)
	}
	_, err = s.DeleteUser(ctx, "alice")
	wantCode(t, "deleting alice again", err, bridge.ENOTFOUND)
}

// TestOwners: a user added with owner is one, stored so; SetOwner gives
// and takes the role; a user added without it is none; a refused add
// makes no owner; an unknown user is ENOTFOUND.
func TestOwners(t *testing.T) {
	ctx := context.Background()
	s, db := newService(t)
	isOwner := func(name string) bool {
		t.Helper()
		u, err := db.UserByName(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return u.Owner
	}
	ann, err := s.AddUser(ctx, "ann", "pw-ann", []int64{1}, true)
	if err != nil || !ann.Owner {
		t.Fatalf("AddUser with owner = %+v, %v", ann, err)
	}
	if !isOwner("ann") {
		t.Error("ann added as an owner is not one in the store")
	}
	bob, err := s.AddUser(ctx, "bob", "pw-bob", []int64{2}, false)
	if err != nil || bob.Owner || isOwner("bob") {
		t.Errorf("bob added without owner = %+v, %v", bob, err)
	}
	_, err = s.AddUser(ctx, "ann", "pw-ann", []int64{1}, true)
	wantCode(t, "a second ann as an owner", err, bridge.ECONFLICT)
	_, err = s.AddUser(ctx, "carol", "pw", []int64{1}, true)
	wantCode(t, "an owner with a short password", err, bridge.EINVALID)

	if err := s.SetOwner(ctx, "bob", true); err != nil || !isOwner("bob") {
		t.Errorf("SetOwner(bob, true) = %v; owner %v", err, isOwner("bob"))
	}
	if err := s.SetOwner(ctx, "ann", false); err != nil || isOwner("ann") {
		t.Errorf("SetOwner(ann, false) = %v; owner %v", err, isOwner("ann"))
	}
	if err := s.SetOwner(ctx, "ann", false); err != nil {
		t.Errorf("SetOwner(ann, false) again, no change: %v", err)
	}
	wantCode(t, "SetOwner of nobody", s.SetOwner(ctx, "nobody", true), bridge.ENOTFOUND)
	if !isOwner("bob") {
		t.Error("taking ann's role took bob's")
	}
}

func TestApps(t *testing.T) {
	ctx := context.Background()
	s, db := newService(t)
	if _, err := s.AddUser(ctx, "dev", "pw-dev", []int64{1}, false); err != nil {
		t.Fatal(err)
	}
	spec := admin.AppSpec{Name: "Svc", RedirectURIs: []string{"https://svc.example/cb"}, Owner: "dev"}
	for _, bad := range []struct {
		what string
		edit func(*admin.AppSpec)
		code string
	}{
		{"a blank name", func(a *admin.AppSpec) { a.Name = " " }, bridge.EINVALID},
		{"no redirect URI", func(a *admin.AppSpec) { a.RedirectURIs = nil }, bridge.EINVALID},
		{"a relative redirect URI", func(a *admin.AppSpec) { a.RedirectURIs = []string{"/cb"} }, bridge.EINVALID},
		{"half a second's lifetime", func(a *admin.AppSpec) { a.AccessTokenLifetime = 500 * time.Millisecond }, bridge.EINVALID},
		{"an unknown owner", func(a *admin.AppSpec) { a.Owner = "zed" }, bridge.ENOTFOUND},
	} {
		sp := spec
		bad.edit(&sp)
		_, _, err := s.CreateApp(ctx, sp)
		wantCode(t, bad.what, err, bad.code)
	}
	app, secret, err := s.CreateApp(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := db.App(ctx, app.ClientID)
	if err != nil || !bytes.Equal(stored.SecretHash, oauth.Hash(secret)) || bytes.Contains(stored.SecretHash, []byte(secret)) {
		t.Fatalf("the stored app does not hold the secret's hash: %+v %v", stored, err)
	}
	again, err := s.RotateAppSecret(ctx, app.ClientID)
	if err != nil || again == secret {
		t.Fatalf("RotateAppSecret = %q, %v", again, err)
	}
	if stored, _ := db.App(ctx, app.ClientID); !bytes.Equal(stored.SecretHash, oauth.Hash(again)) {
		t.Error("the rotated secret is not stored")
	}
	_, err = s.RotateAppSecret(ctx, "nope")
	wantCode(t, "rotating a missing app's secret", err, bridge.ENOTFOUND)
	wantCode(t, "a lifetime of 1.5 s", s.SetAppAccessTokenLifetime(ctx, app.ClientID, 1500*time.Millisecond), bridge.EINVALID)
	if err := s.SetAppAccessTokenLifetime(ctx, app.ClientID, time.Hour); err != nil {
		t.Error(err)
	}
	if n, err := s.DeleteApp(ctx, app.ClientID); err != nil || n != 0 {
		t.Errorf("DeleteApp = %d, %v", n, err)
	}
}

func TestHubs(t *testing.T) {
	ctx := context.Background()
	s, db := newService(t)
	for _, bad := range []string{"not-a-url", "ftp://hub.example", "https://hub.example/path", "https://u@hub.example", "https://hub.example?x=1"} {
		_, _, err := s.AddHub(ctx, "barn", bad)
		wantCode(t, "base URL "+bad, err, bridge.EINVALID)
	}
	_, _, err := s.AddHub(ctx, strings.Repeat("b", 65), "https://hub.example")
	wantCode(t, "a long name", err, bridge.EINVALID)
	h, secret, err := s.AddHub(ctx, "barn", "https://hub.example:8443/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h.ID, "hub-") || h.BaseURL != "https://hub.example:8443" {
		t.Errorf("hub = %+v", h)
	}
	stored, err := db.Hub(ctx, h.ID)
	if err != nil || !bytes.Equal(stored.SecretHash, oauth.Hash(secret)) {
		t.Fatalf("stored hub %+v, %v", stored, err)
	}
	again, err := s.RotateHubSecret(ctx, h.ID)
	if err != nil || again == secret {
		t.Fatalf("RotateHubSecret = %q, %v", again, err)
	}
	_, err = s.RotateHubSecret(ctx, "hub-nope")
	wantCode(t, "rotating a missing hub's secret", err, bridge.ENOTFOUND)
}

// TestAudit: the records come from the audit log, newest first; on a
// platform with a hub they say which hubs keep the others, and asking for
// an installation a hub serves names that hub instead of answering none.
func TestAudit(t *testing.T) {
	ctx := context.Background()
	s, db := newService(t)
	s.AuditLog = hubstore.New(db.DB()) // a single box's log
	alice, err := s.AddUser(ctx, "alice", "pw-alice", []int64{1}, false)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Minute)
	recs := []bridge.AuditRecord{
		{At: at, InstallationID: "inst-1", ClientID: "app", UserID: alice.ID, SwitchID: "lamp", Command: bridge.CommandOn, Outcome: bridge.OutcomeOK, RequestID: "r1"},
		{At: at.Add(time.Second), InstallationID: "inst-1", ClientID: "app", UserID: alice.ID, SwitchID: "lamp", Command: bridge.CommandOff, Outcome: bridge.FailTimeout, RequestID: "r2"},
	}
	if err := db.DB().FoldJournalAudited(ctx, nil, recs, store.JournalMark{}); err != nil {
		t.Fatal(err)
	}
	rep, err := s.Audit(ctx, bridge.AuditFilter{})
	if err != nil || len(rep.Records) != 2 || rep.Records[0].RequestID != "r2" || len(rep.Elsewhere) != 0 {
		t.Fatalf("Audit = %+v, %v; want both records, newest first, and no hub", rep, err)
	}
	_, err = s.Audit(ctx, bridge.AuditFilter{Limit: -1})
	wantCode(t, "a negative limit", err, bridge.EINVALID)

	h, _, err := s.AddHub(ctx, "barn", "http://barn.example")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetInventory(ctx, h.ID, "test", []bridge.RemoteLocation{{ID: 20, Name: "Barn", Switches: []bridge.RemoteSwitch{{ID: "fan", Name: "Fan"}}}},
		func(int64) bool { return false }); err != nil {
		t.Fatal(err)
	}
	app, _, err := s.CreateApp(ctx, admin.AppSpec{Name: "App", RedirectURIs: []string{"https://app.example/cb"}, Owner: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	in := &bridge.Installation{ClientID: app.ClientID, UserID: alice.ID, LocationID: 20, SwitchIDs: []string{"fan"}}
	if err := db.Install(ctx, in); err != nil {
		t.Fatal(err)
	}
	rep, err = s.Audit(ctx, bridge.AuditFilter{InstallationID: "inst-1"})
	if err != nil || len(rep.Records) != 2 || len(rep.Elsewhere) != 1 || rep.Elsewhere[0].Name != "barn" {
		t.Errorf("Audit on a platform with a hub = %+v, %v; want the records and the hub", rep, err)
	}
	_, err = s.Audit(ctx, bridge.AuditFilter{InstallationID: in.ID})
	if bridge.ErrorCode(err) != bridge.EINVALID || !strings.Contains(err.Error(), "hub barn (http://barn.example)") {
		t.Errorf("Audit of the hub's installation: %v, want it to name the hub", err)
	}
}

// TestParseLifetime: a lifetime as an owner types it, the rule
// CheckLifetime's; blank or "default" is the platform's.
func TestParseLifetime(t *testing.T) {
	for in, want := range map[string]time.Duration{"": 0, " ": 0, "default": 0, "90s": 90 * time.Second, " 1h ": time.Hour, "2160h": 2160 * time.Hour} {
		if d, err := admin.ParseLifetime(in); err != nil || d != want {
			t.Errorf("ParseLifetime(%q) = %v, %v; want %v", in, d, err, want)
		}
	}
	for _, bad := range []string{"0", "0s", "1.5s", "500ms", "-1h", "an hour", "1"} {
		_, err := admin.ParseLifetime(bad)
		wantCode(t, "lifetime "+bad, err, bridge.EINVALID)
		if err != nil && !strings.Contains(err.Error(), "examples: 90s") {
			t.Errorf("ParseLifetime(%q): %v, want the examples", bad, err)
		}
	}
}

// TestHubStates: a hub never heard from, one whose link is up and
// whose replica is behind, one that called long ago and had a second
// process refused a day and more ago.
func TestHubStates(t *testing.T) {
	ctx := context.Background()
	s, db := newService(t)
	now := time.Now()
	never, _, err := s.AddHub(ctx, "never", "https://never.example")
	if err != nil {
		t.Fatal(err)
	}
	up, _, err := s.AddHub(ctx, "up", "https://up.example")
	if err != nil {
		t.Fatal(err)
	}
	down, _, err := s.AddHub(ctx, "down", "https://down.example")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.SetInventory(ctx, up.ID, "1.2.3", []bridge.RemoteLocation{{ID: 7, Name: "Barn"}}, nil); err != nil {
		t.Fatal(err)
	}
	seq, err := db.ChangeSeq(ctx)
	if err != nil || seq == 0 {
		t.Fatalf("ChangeSeq = %d, %v: want the new location's change", seq, err)
	}
	if err := db.TouchHub(ctx, up.ID, 0, now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := db.TouchHub(ctx, down.ID, seq, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := db.SetHubConflict(ctx, up.ID, "a second process", now.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := db.SetHubConflict(ctx, down.ID, "a second process", now.Add(-25*time.Hour)); err != nil {
		t.Fatal(err)
	}
	states, err := s.HubStates(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]admin.HubState{}
	for _, st := range states {
		got[st.ID] = st
	}
	if st := got[never.ID]; st.Link != "never" || st.Lag != seq || st.ConflictRecent {
		t.Errorf("the hub never heard from: %s, lag %d, conflict %v; want never, lag %d", st.Link, st.Lag, st.ConflictRecent, seq)
	}
	if st := got[up.ID]; st.Link != "up" || st.Lag != seq || !st.ConflictRecent || st.Version != "1.2.3" || len(st.Locations) != 1 {
		t.Errorf("the hub that called a second ago: %+v; want up, lag %d, a recent conflict, version 1.2.3, location 7", st, seq)
	}
	if st := got[down.ID]; st.Link != "down" || st.Lag != 0 || st.ConflictRecent {
		t.Errorf("the hub that called an hour ago: %s, lag %d, conflict %v; want down, lag 0, no recent conflict", st.Link, st.Lag, st.ConflictRecent)
	}
}
