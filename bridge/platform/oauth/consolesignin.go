package oauth

// The console of a hub of this platform signs its owners in here: a hub
// keeps no users, so its console sends the browser to the platform's
// /console/signin, which (once an owner is logged in at the platform)
// sends it back to the hub's registered base URL with a code; the hub
// redeems the code over its link (linkserver), authenticated as itself,
// and learns who the owner is. A code is signed with the login pages'
// key (every platform process has it; none is stored), names one hub,
// one user and their password at signing, and lasts SignInCodeLifetime;
// the hub redeems each code once.

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
)

// SignInCodeLifetime is how long a hub's console has to redeem a sign-in
// code: a redirect and one call over the link.
const SignInCodeLifetime = time.Minute

// ConsoleSignInCode returns a code that signs v's user in to the console
// of hub hubID.
func (s *Server) ConsoleSignInCode(ctx context.Context, hubID string, v *console.Visitor) (string, error) {
	var nonce [12]byte
	rand.Read(nonce[:])
	payload := strings.Join([]string{
		hubID,
		strconv.FormatInt(v.User.ID, 10),
		hex.EncodeToString(passwordDigest(v.User.PasswordHash)),
		strconv.FormatInt(v.PasswordAt.UnixMilli(), 10),
		strconv.FormatInt(s.now().Add(SignInCodeLifetime).UnixMilli(), 10),
		base64.RawURLEncoding.EncodeToString(nonce[:]),
	}, "|")
	sig, err := s.sessions.key.mac(ctx, "console-signin", payload)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + sig, nil
}

// RedeemConsoleSignIn returns the owner a code signs in to hub hubID's
// console, and when they last typed their password. It is EFORBIDDEN
// for a code that is not this platform's, is another hub's, has expired,
// or whose user is gone, is no longer an owner or changed their
// password since.
func (s *Server) RedeemConsoleSignIn(ctx context.Context, hubID, code string) (*bridge.User, time.Time, error) {
	refused := bridge.Errorf(bridge.EFORBIDDEN, "not a valid console sign-in code for this hub")
	enc, sig, ok := strings.Cut(code, ".")
	if !ok || len(code) > 1024 {
		return nil, time.Time{}, refused
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, time.Time{}, refused
	}
	payload := string(raw)
	want, err := s.sessions.key.mac(ctx, "console-signin", payload)
	if err != nil {
		return nil, time.Time{}, err
	}
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return nil, time.Time{}, refused
	}
	f := strings.Split(payload, "|")
	if len(f) != 6 || f[0] != hubID {
		return nil, time.Time{}, refused
	}
	uid, err1 := strconv.ParseInt(f[1], 10, 64)
	pwAt, err2 := strconv.ParseInt(f[3], 10, 64)
	exp, err3 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || !s.now().Before(time.UnixMilli(exp)) {
		return nil, time.Time{}, refused
	}
	u, err := s.users.UserByID(ctx, uid)
	if bridge.ErrorCode(err) == bridge.ENOTFOUND {
		return nil, time.Time{}, refused
	}
	if err != nil {
		return nil, time.Time{}, err
	}
	if !u.Owner || hex.EncodeToString(passwordDigest(u.PasswordHash)) != f[2] {
		return nil, time.Time{}, refused
	}
	return u, time.UnixMilli(pwAt), nil
}
