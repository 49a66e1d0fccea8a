// Package webhook sends an installation's switch changes to the URLs its
// client registered, signed as the Standard Webhooks specification says,
// from a durable outbox in the store: registration with a confirmation
// the receiver must answer, coalescing per switch, retries with back-off
// for up to a day, and a receiver that is gone (410) or failing for a day
// disabled.
package webhook

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
)

// Bounds of webhooks and their deliveries.
const (
	// MaxPerInstallation caps an installation's webhooks.
	MaxPerInstallation = 4
	// Timeout bounds one request to a receiver, from dialing to the end of
	// its answer.
	Timeout = 10 * time.Second
	// MaxAnswer is how much of a receiver's answer is read.
	MaxAnswer = 64 << 10
	// MaxURL bounds a webhook's URL.
	MaxURL = 2048
	// SecretOverlap is how long a rotated secret still signs deliveries.
	SecretOverlap = 24 * time.Hour
	// secretBytes is the key's length: 32 bytes, above the 24 the
	// specification asks for.
	secretBytes  = 32
	secretPrefix = "whsec_"
)

// NewSecret returns a new signing secret: "whsec_" and 32 random bytes in
// base64.
func NewSecret() string {
	b := make([]byte, secretBytes)
	rand.Read(b)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// Sign returns the Standard Webhooks signature of a message, "v1," and the
// base64 HMAC-SHA256 of "id.timestamp.body" under the secret's key.
func Sign(secret, msgID string, timestamp int64, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, secretPrefix))
	if err != nil {
		return "", fmt.Errorf("webhook secret: %w", err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(msgID))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(timestamp, 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// signatures is the webhook-signature header: one signature per secret in
// force, space-separated, as the specification allows during a rotation.
func signatures(w *bridge.Webhook, msgID string, ts int64, body []byte, now time.Time) (string, error) {
	sig, err := Sign(w.Secret, msgID, ts, body)
	if err != nil {
		return "", err
	}
	if w.OldSecret != "" && now.Before(w.OldSecretUntil) {
		old, err := Sign(w.OldSecret, msgID, ts, body)
		if err != nil {
			return "", err
		}
		sig += " " + old
	}
	return sig, nil
}

// Allow is where webhooks may point (config webhooks.allow): public
// unicast addresses (the entry "public"), host names as written in URLs,
// and IP prefixes. Unset or empty is [public]. A set list means exactly
// its entries: [192.168.1.0/24] allows the LAN and nothing on the
// Internet, [public, 192.168.1.0/24] both. Whatever it says, the hub's
// own listeners and unspecified addresses are never reached.
type Allow struct {
	public   bool
	hosts    []string
	prefixes []netip.Prefix
}

// ParseAllow reads webhooks.allow.
func ParseAllow(entries []string) (Allow, error) {
	if len(entries) == 0 {
		return Allow{public: true}, nil
	}
	var a Allow
	for _, e := range entries {
		if err := config.CheckWebhookAllow(e); err != nil {
			return Allow{}, fmt.Errorf("webhooks.allow %q: %w", e, err)
		}
		if strings.EqualFold(e, config.AllowPublic) {
			a.public = true
			continue
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			// An IPv4-mapped prefix is its IPv4 prefix: the address dialled
			// is compared unmapped.
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			ip = ip.Unmap().WithZone("")
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		a.hosts = append(a.hosts, strings.ToLower(strings.TrimSuffix(e, ".")))
	}
	return a, nil
}

func (a Allow) host(h string) bool {
	h = strings.TrimSuffix(h, ".")
	for _, x := range a.hosts {
		if strings.EqualFold(x, h) {
			return true
		}
	}
	return false
}

// addr reports whether the config allows an address: in a listed prefix,
// or public unicast when public is listed.
func (a Allow) addr(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return a.public && Refused(ip) == ""
}

// errNotAllowed is the one thing a client is told of a URL the config
// does not allow, whatever the reason: naming the address class or the
// address would let an app map the owner's network through the hub.
var errNotAllowed = bridge.Errorf(bridge.EINVALID, "the webhook URL is not allowed")

// CheckURL checks a webhook URL before anything is sent to it: absolute
// http or https, a host, no user information, no fragment, not too long,
// and a host the config allows by name or by address (a name's addresses
// are checked when connecting, each time).
func (a Allow) CheckURL(raw string) (*url.URL, error) {
	if len(raw) > MaxURL {
		return nil, bridge.Errorf(bridge.EINVALID, "the webhook URL is longer than %d bytes", MaxURL)
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, bridge.Errorf(bridge.EINVALID, "the webhook URL is not a URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, bridge.Errorf(bridge.EINVALID, "the webhook URL must be http or https")
	case u.Hostname() == "":
		return nil, bridge.Errorf(bridge.EINVALID, "the webhook URL has no host")
	case u.User != nil:
		return nil, bridge.Errorf(bridge.EINVALID, "the webhook URL must not carry user information")
	case u.Fragment != "" || strings.Contains(raw, "#"):
		return nil, bridge.Errorf(bridge.EINVALID, "the webhook URL must not have a fragment")
	}
	h := u.Hostname()
	if a.host(h) {
		return u, nil
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if ip.Unmap().IsUnspecified() || !a.addr(ip) {
			return nil, errNotAllowed
		}
		return u, nil
	}
	// A name not listed may resolve to an allowed address, which is
	// checked when connecting; with neither public nor a prefix listed
	// none can.
	if !a.public && len(a.prefixes) == 0 {
		return nil, errNotAllowed
	}
	return u, nil
}

// special are the IANA special-purpose ranges a webhook may not reach
// unless the owner lists them: none is a public unicast address a
// receiver on the Internet could have, and several are the owner's own
// network, this machine, or a cloud's metadata service (169.254.169.254).
// IPv4-mapped addresses (::ffff:0:0/96) are compared as their IPv4
// address; NAT64's well-known prefix (64:ff9b::/96) as the IPv4 address
// it embeds (that is how an IPv6-only network with DNS64 reaches IPv4
// receivers). The other forms that carry or tunnel to an IPv4 address
// the hub cannot judge are refused whole: IPv4-compatible (::/96, in
// ::/8), local-use NAT64 (64:ff9b:1::/48), 6to4 (2002::/16) and Teredo
// (2001::/32, in 2001::/23).
var special = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "this network (0.0.0.0/8)"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "shared address space (CGNAT)"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation"},
	{netip.MustParsePrefix("192.88.99.0/24"), "6to4 relay anycast"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved (and broadcast)"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64"}, // before ::/8, which holds it
	{netip.MustParsePrefix("::/8"), "reserved (unspecified, IPv4-compatible)"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments (Teredo, benchmarking, ORCHID)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "6to4"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fc00::/7"), "unique local (private)"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("fec0::/10"), "site-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// nat64 is NAT64's well-known prefix: its addresses are judged by the IPv4
// address in their last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// Refused returns why an address is not a public unicast address, "" when
// it is one: the class of special-purpose range it is in, for the hub's
// log.
func Refused(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return "not an address"
	}
	if ip.IsUnspecified() {
		return "unspecified"
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		if why := Refused(v4); why != "" {
			return "NAT64 of " + why
		}
		return ""
	}
	for _, s := range special {
		if s.prefix.Contains(ip) {
			return s.class
		}
	}
	if ip.Is6() && !netip.MustParsePrefix("2000::/3").Contains(ip) {
		// Outside the global unicast space IANA hands out.
		return "reserved"
	}
	return ""
}

// hostAllowed marks a request whose host the config allows by name, so
// its address need not be in an allowed prefix.
type hostAllowed struct{}

// Client is what sends to receivers: no redirects followed, a timeout per
// request, only addresses the config allows, never the hub itself.
type Client struct {
	http  *http.Client
	allow Allow
	// self reports whether an address is one of the hub's own listeners.
	self func(netip.AddrPort) bool
	// logger hears what a client is not told: why an address was refused,
	// why a receiver could not be reached. Service.New sets it.
	logger *slog.Logger
	// own is the host and port of each URL the hub is reached by
	// (server.public_url), lower case: behind a router's port forward or
	// a proxy, such a name reaches the hub at an address that is not its
	// own, which the address check cannot see.
	own map[string]bool
}

// NewClient builds the client. self, when set, tells the hub's own
// listening addresses, which a webhook may never reach, whatever
// webhooks.allow says: a loop, and a way around the API's own checks to
// the metrics or the broker.
//
// own are the URLs the hub is reached by from outside (server.public_url):
// a webhook to their host and port is refused too, whatever address the
// name resolves to.
func NewClient(allow Allow, self func(netip.AddrPort) bool, own ...string) *Client {
	c := &Client{allow: allow, self: self, logger: slog.New(slog.DiscardHandler), own: map[string]bool{}}
	for _, raw := range own {
		if u, err := url.Parse(raw); err == nil && u.Hostname() != "" {
			c.own[hostPort(u)] = true
		}
	}
	d := &net.Dialer{Timeout: Timeout, ControlContext: c.control}
	tr := &http.Transport{
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   Timeout,
		ResponseHeaderTimeout: Timeout,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       time.Minute,
		// A receiver is reached directly: no proxy from the environment
		// would know the allow list.
		Proxy: nil,
	}
	c.http = &http.Client{
		Transport: tr,
		Timeout:   Timeout,
		// A redirect is a failure, never followed: it could lead anywhere
		// the allow list does not.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c
}

// refusal is the control's verdict on an address, for the hub's log; the
// client hears only errNotAllowed or a failed confirmation.
type refusal struct {
	addr netip.AddrPort
	why  string
}

func (r *refusal) Error() string {
	return "refused " + r.addr.String() + ": " + r.why
}

// control refuses connections to addresses the config does not allow and
// to the hub itself. It runs for every connection, after the name was
// resolved and before connect(), so a name that resolves somewhere else
// at delivery time (DNS rebinding) is caught too.
func (c *Client) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &refusal{why: "not an address: " + address}
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	return c.check(ap, ctx.Value(hostAllowed{}) != nil)
}

// check is the control's rule: never the hub itself nor an unspecified
// address (which connects to this machine); any other address for a host
// allowed by name; otherwise an address the config allows.
func (c *Client) check(ap netip.AddrPort, byName bool) error {
	switch {
	case c.self != nil && c.self(ap):
		return &refusal{ap, "one of this hub's own listeners"}
	case ap.Addr().IsUnspecified():
		return &refusal{ap, "unspecified (this machine)"}
	case byName || c.allow.addr(ap.Addr()):
		return nil
	}
	why := Refused(ap.Addr())
	if why == "" {
		why = "public, and webhooks.allow does not list public"
	}
	return &refusal{ap, why + "; not in webhooks.allow"}
}

// CheckURL is Allow.CheckURL and, for a URL whose host is an address, the
// control's check of that address, so that the hub's own listeners are
// refused before anything is dialled.
func (c *Client) CheckURL(raw string) (*url.URL, error) {
	u, err := c.allow.CheckURL(raw)
	if err == errNotAllowed {
		why := "a name webhooks.allow does not list"
		if ip, perr := url.Parse(raw); perr == nil {
			if ip, perr := netip.ParseAddr(ip.Hostname()); perr == nil {
				why = cmp.Or(Refused(ip), "public, and webhooks.allow does not list public") + "; not in webhooks.allow"
			}
		}
		c.logger.Info("webhooks: a URL refused", "host", hostOf(raw), "reason", why)
	}
	if err != nil {
		return nil, err
	}
	if c.own[hostPort(u)] {
		c.logger.Info("webhooks: a URL refused", "host", u.Host, "reason", "the hub's own server.public_url")
		return nil, errNotAllowed
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil {
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		n, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, bridge.Errorf(bridge.EINVALID, "the webhook URL's port is not a port")
		}
		if err := c.check(netip.AddrPortFrom(ip.Unmap().WithZone(""), uint16(n)), false); err != nil {
			c.logger.Info("webhooks: a URL refused", "host", u.Host, "reason", err.Error())
			return nil, errNotAllowed
		}
	}
	return u, nil
}

// Answer is what a receiver answered.
type Answer struct {
	Status     int
	Body       []byte // at most MaxAnswer bytes
	RetryAfter time.Duration
}

// What a client may be told of a delivery that got no answer (its last
// error): the network's detail (a refused connection, a reset, a TLS
// failure, the address) would tell an app what listens where on the
// owner's network, so it goes to the hub's log alone.
var (
	errNoAnswer = errors.New("no answer from the receiver")
	errRefused  = errors.New("the webhook URL's address is not allowed")
)

// post sends one signed message. Its errors are errNotAllowed, errRefused,
// errNoAnswer or the store's; the network's detail is logged.
func (c *Client) post(ctx context.Context, w *bridge.Webhook, msgID string, body []byte, now time.Time) (*Answer, error) {
	u, err := c.CheckURL(w.URL)
	if err != nil {
		return nil, err
	}
	if c.allow.host(u.Hostname()) {
		ctx = context.WithValue(ctx, hostAllowed{}, true)
	}
	ts := now.Unix()
	sig, err := signatures(w, msgID, ts, body, now)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "switchbridge-webhooks")
	req.Header.Set("webhook-id", msgID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	req.Header.Set("webhook-signature", sig)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.unreached(ctx, w, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil {
		return nil, c.unreached(ctx, w, u, err)
	}
	return &Answer{Status: resp.StatusCode, Body: b, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), now)}, nil
}

// unreached logs why a receiver was not reached, for the owner, and
// returns what the client may be told. The URL is left out of the log
// line but for its host: receivers often carry a secret in the path.
func (c *Client) unreached(ctx context.Context, w *bridge.Webhook, u *url.URL, err error) error {
	if ctx.Err() != nil {
		return ctx.Err() // shutting down, or the registration's client left
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	out, msg := errNoAnswer, "webhooks: no answer from a receiver"
	var r *refusal
	if errors.As(err, &r) {
		out, msg = errRefused, "webhooks: refused to connect to a webhook's address"
	}
	c.logger.Info(msg, "webhook", w.ID, "installation", w.InstallationID, "host", u.Host, "reason", oneLine(err))
	return out
}

// retryAfter reads a Retry-After header: seconds or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && n > 0 {
		return time.Duration(min(n, int64(MaxFailing/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), MaxFailing)
	}
	return 0
}

// message is a delivery's body.
type message struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// NewMsgID returns a message id: unique per message, the same for every
// attempt to deliver it.
func NewMsgID() string { return "msg_" + rand.Text() }

// errNotConfirmed is all a client is told of a URL that did not confirm,
// whatever the reason (the log has it): "connection refused", "EOF" and
// "answered 404" apart would let an app scan the owner's network through
// the hub.
var errNotConfirmed = bridge.Errorf(bridge.EINVALID, "the webhook URL did not confirm: the receiver must answer 2xx with the challenge within %s", Timeout)

// confirm asks the receiver whether it wants the webhook: it must answer
// 2xx with the challenge, as {"challenge": "..."} or the bare string. Its
// errors are errNotAllowed (decided on the URL alone), errNotConfirmed, or
// the context's.
func (c *Client) confirm(ctx context.Context, w *bridge.Webhook, now time.Time) error {
	challenge := rand.Text()
	body, _ := json.Marshal(message{Type: "webhook.confirm", Timestamp: now.UTC(), Data: map[string]string{"challenge": challenge}})
	a, err := c.post(ctx, w, NewMsgID(), body, now)
	switch {
	case errors.Is(err, errNotAllowed):
		return err
	case err != nil && ctx.Err() != nil:
		c.logger.Info("webhooks: a URL did not confirm", "installation", w.InstallationID, "host", hostOf(w.URL), "reason", "no answer in time")
		return errNotConfirmed
	case err != nil:
		return errNotConfirmed // post logged why
	case a.Status < 200 || a.Status > 299:
		c.logger.Info("webhooks: a URL did not confirm", "installation", w.InstallationID, "host", hostOf(w.URL), "reason", "answered "+strconv.Itoa(a.Status))
		return errNotConfirmed
	}
	var echo struct {
		Challenge string `json:"challenge"`
	}
	if strings.TrimSpace(string(a.Body)) == challenge || (json.Unmarshal(a.Body, &echo) == nil && echo.Challenge == challenge) {
		return nil
	}
	c.logger.Info("webhooks: a URL did not confirm", "installation", w.InstallationID, "host", hostOf(w.URL), "reason", "its answer does not echo the challenge")
	return errNotConfirmed
}

// hostOf is a URL's host (and port) for the log: a receiver's path or
// query may carry a secret of its own.
func hostOf(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Host
	}
	return ""
}

// oneLine is an error's text on one line, for a message or a log value.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// hostPort is a URL's host name, lower case and without a final dot, and
// its port, the scheme's when the URL gives none: "hub.example:443".
func hostPort(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), port)
}
