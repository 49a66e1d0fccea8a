package oauth

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
)

// TestConsoleSignInCode: a code signs its owner in to the hub it names,
// within its lifetime; another hub, a changed byte, an expired code, a
// user who is no longer an owner or changed their password since, and a
// deleted user are refused.
func TestConsoleSignInCode(t *testing.T) {
	s, _, st := newRecordingServer(t)
	ctx := context.Background()
	u, err := st.UserByName(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetOwner(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	u.Owner = true
	now := time.Now()
	s.now = func() time.Time { return now }
	typed := now.Add(-2 * time.Minute)
	code, err := s.ConsoleSignInCode(ctx, "hub-a", &console.Visitor{User: u, PasswordAt: typed})
	if err != nil {
		t.Fatal(err)
	}
	got, at, err := s.RedeemConsoleSignIn(ctx, "hub-a", code)
	if err != nil || got.Name != "alice" || !at.Equal(typed.Truncate(time.Millisecond)) {
		t.Fatalf("redeem: %v, %v, %v; want alice and when she typed her password", got, at, err)
	}
	refused := func(what, hub, code string) {
		t.Helper()
		if _, _, err := s.RedeemConsoleSignIn(ctx, hub, code); bridge.ErrorCode(err) != bridge.EFORBIDDEN {
			t.Errorf("%s: %v, want EFORBIDDEN", what, err)
		}
	}
	refused("another hub", "hub-b", code)
	enc, sig, _ := strings.Cut(code, ".")
	refused("a changed signature", "hub-a", enc+"."+strings.Repeat("A", len(sig)))
	refused("no signature", "hub-a", enc)
	refused("not a code", "hub-a", "x.y")

	now = now.Add(SignInCodeLifetime)
	refused("expired", "hub-a", code)
	now = now.Add(-SignInCodeLifetime)

	if err := st.SetOwner(ctx, "alice", false); err != nil {
		t.Fatal(err)
	}
	refused("no longer an owner", "hub-a", code)
	if err := st.SetOwner(ctx, "alice", true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RedeemConsoleSignIn(ctx, "hub-a", code); err != nil {
		t.Fatalf("an owner again: %v", err)
	}
	if err := st.SetPassword(ctx, "alice", []byte("another hash")); err != nil {
		t.Fatal(err)
	}
	refused("password changed since", "hub-a", code)

	bob, err := st.CreateUser(ctx, "bob", []byte("hash"), []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	bob.Owner = true
	if err := st.SetOwner(ctx, "bob", true); err != nil {
		t.Fatal(err)
	}
	code, err = s.ConsoleSignInCode(ctx, "hub-a", &console.Visitor{User: bob, PasswordAt: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	refused("user deleted", "hub-a", code)
}
