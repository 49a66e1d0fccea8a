package oauth

// Device cookies: the OWASP pattern ("Slow Down Online Guessing Attacks
// with Device Cookies") that lets the user name's allowance across
// addresses be strict without locking the real user out. A successful
// login leaves a cookie in the browser naming the user; a later login as
// that user from that browser is throttled only by the cookie's own
// allowance (throttle.go), not by what other addresses did.
//
// The cookie is signed with an HMAC keyed by the user's password hash, so
// it needs no storage and survives restarts; only the hub (which holds the
// hash) can make one, a cookie for alice says nothing about bob, and a
// password change (user passwd) or deleting the user (ids are never given
// twice) invalidates every cookie the user had.

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

const (
	deviceCookie = "switchbridge_device"
	// deviceLifetime is how long a browser stays known without a login;
	// each login renews it.
	deviceLifetime = 180 * 24 * time.Hour
	// maxDeviceUsers bounds the users one browser remembers (a family
	// computer), and so the cookie's size: the oldest login goes first.
	maxDeviceUsers = 4
	// maxDeviceCookie is the longest cookie value read: maxDeviceUsers
	// entries of about 100 bytes, with room to spare.
	maxDeviceCookie = 1024
)

// deviceEntry is one user's entry in a device cookie:
// "<user id>.<expiry, Unix seconds>.<id>.<HMAC>", entries separated by "~".
type deviceEntry struct {
	userID  int64
	expires int64
	id      string
	mac     string
}

func (e deviceEntry) payload() string {
	return strconv.FormatInt(e.userID, 10) + "." + strconv.FormatInt(e.expires, 10) + "." + e.id
}

func (e deviceEntry) String() string { return e.payload() + "." + e.mac }

func deviceMAC(u *bridge.User, payload string) string {
	m := hmac.New(sha256.New, u.PasswordHash)
	m.Write([]byte("device cookie\x00"))
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// parseDeviceCookie returns the well-formed entries of a device cookie,
// at most maxDeviceUsers; their signatures are checked on use.
func parseDeviceCookie(v string) []deviceEntry {
	if len(v) > maxDeviceCookie {
		return nil
	}
	var out []deviceEntry
	for _, s := range strings.Split(v, "~") {
		p := strings.Split(s, ".")
		if len(p) != 4 {
			continue
		}
		uid, err1 := strconv.ParseInt(p[0], 10, 64)
		exp, err2 := strconv.ParseInt(p[1], 10, 64)
		if err1 != nil || err2 != nil || !base64URL(p[2]) || !base64URL(p[3]) {
			continue // not made by the hub, and not to be sent back
		}
		out = append(out, deviceEntry{uid, exp, p[2], p[3]})
		if len(out) == maxDeviceUsers {
			break
		}
	}
	return out
}

// base64URL reports whether s is a short unpadded base64url string, as the
// hub's ids and signatures are: anything else in a cookie is dropped, not
// echoed back into the next Set-Cookie.
func base64URL(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// device returns the id of the request's device cookie for the user, ""
// when the browser has no valid one for them.
func (s *Server) device(r *http.Request, u *bridge.User) string {
	if u == nil {
		return ""
	}
	now := s.now().Unix()
	for _, e := range parseDeviceCookie(cookie(r, deviceCookie, s.secure())) {
		if e.userID == u.ID && e.expires > now && hmac.Equal([]byte(deviceMAC(u, e.payload())), []byte(e.mac)) {
			return e.id
		}
	}
	return ""
}

// rememberDevice gives the browser a fresh device cookie entry for the
// user who just logged in, keeping the entries of other users (up to
// maxDeviceUsers in all) and dropping the user's old one.
func (s *Server) rememberDevice(w http.ResponseWriter, r *http.Request, u *bridge.User) {
	var id [16]byte
	rand.Read(id[:])
	e := deviceEntry{userID: u.ID, expires: s.now().Add(deviceLifetime).Unix(), id: base64.RawURLEncoding.EncodeToString(id[:])}
	e.mac = deviceMAC(u, e.payload())
	entries := []string{e.String()}
	now := s.now().Unix()
	for _, old := range parseDeviceCookie(cookie(r, deviceCookie, s.secure())) {
		if old.userID != u.ID && old.expires > now && len(entries) < maxDeviceUsers {
			entries = append(entries, old.String())
		}
	}
	setCookie(w, deviceCookie, strings.Join(entries, "~"), deviceLifetime, s.secure())
}
