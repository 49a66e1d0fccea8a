// Package webhook sends an installation's switch changes to the URLs its
// client registered, signed as the Standard Webhooks specification says,
// from a durable outbox in the store: registration with a confirmation
// the receiver must answer, coalescing per switch, retries with back-off
// for up to a day, and a receiver that is gone (410) or failing for a day
// disabled.
package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
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

// Allow is where webhooks may point (config webhooks.allow): host names as
// written in URLs, and IP prefixes the address a URL's host resolves to
// must be in. The zero Allow allows every host.
type Allow struct {
	hosts    []string
	prefixes []netip.Prefix
}

// ParseAllow reads webhooks.allow.
func ParseAllow(entries []string) (Allow, error) {
	var a Allow
	for _, e := range entries {
		if p, err := netip.ParsePrefix(e); err == nil {
			a.prefixes = append(a.prefixes, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(e); err == nil {
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		if e == "" || strings.ContainsAny(e, " /:@") {
			return Allow{}, fmt.Errorf("webhooks.allow %q is not a host name, an IP address or a CIDR prefix", e)
		}
		a.hosts = append(a.hosts, strings.ToLower(e))
	}
	return a, nil
}

func (a Allow) any() bool { return len(a.hosts) == 0 && len(a.prefixes) == 0 }

func (a Allow) host(h string) bool {
	for _, x := range a.hosts {
		if strings.EqualFold(x, h) {
			return true
		}
	}
	return false
}

func (a Allow) addr(ip netip.Addr) bool {
	for _, p := range a.prefixes {
		if p.Contains(ip.Unmap()) {
			return true
		}
	}
	return false
}

// CheckURL checks a webhook URL before anything is sent to it: absolute
// http or https, a host, no user information, no fragment, not too long,
// and a host the config allows by name (its address is checked when
// connecting).
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
	if h := u.Hostname(); !a.any() && !a.host(h) {
		// An address must be in a prefix; a name not listed may still
		// resolve into one, which is checked when connecting.
		ip, err := netip.ParseAddr(h)
		if (err == nil && !a.addr(ip)) || (err != nil && len(a.prefixes) == 0) {
			return nil, bridge.Errorf(bridge.EINVALID, "the hub's webhooks.allow does not allow %s", h)
		}
	}
	return u, nil
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
}

// NewClient builds the client. self, when set, tells the hub's own
// listening addresses, which a webhook may not reach (a loop).
func NewClient(allow Allow, self func(netip.AddrPort) bool) *Client {
	c := &Client{allow: allow, self: self}
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

// control refuses connections to addresses the config does not allow and
// to the hub itself, after the name was resolved, so a name that resolves
// somewhere else at delivery time is caught too.
func (c *Client) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return err
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	if c.self != nil && c.self(ap) {
		return errors.New("the webhook points at this hub")
	}
	if c.allow.any() || ctx.Value(hostAllowed{}) != nil || c.allow.addr(ap.Addr()) {
		return nil
	}
	return fmt.Errorf("the hub's webhooks.allow does not allow %s", ap.Addr())
}

// Answer is what a receiver answered.
type Answer struct {
	Status     int
	Body       []byte // at most MaxAnswer bytes
	RetryAfter time.Duration
}

// post sends one signed message.
func (c *Client) post(ctx context.Context, w *bridge.Webhook, msgID string, body []byte, now time.Time) (*Answer, error) {
	u, err := c.allow.CheckURL(w.URL)
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
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil {
		return nil, err
	}
	return &Answer{Status: resp.StatusCode, Body: b, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), now)}, nil
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

// confirm asks the receiver whether it wants the webhook: it must answer
// 2xx with the challenge, as {"challenge": "..."} or the bare string.
func (c *Client) confirm(ctx context.Context, w *bridge.Webhook, now time.Time) error {
	challenge := rand.Text()
	body, _ := json.Marshal(message{Type: "webhook.confirm", Timestamp: now.UTC(), Data: map[string]string{"challenge": challenge}})
	a, err := c.post(ctx, w, NewMsgID(), body, now)
	var be *bridge.Error
	if errors.As(err, &be) {
		return err
	}
	if err != nil {
		return bridge.Errorf(bridge.EINVALID, "the webhook URL did not confirm: %s", oneLine(err))
	}
	if a.Status < 200 || a.Status > 299 {
		return bridge.Errorf(bridge.EINVALID, "the webhook URL did not confirm: it answered %d", a.Status)
	}
	var echo struct {
		Challenge string `json:"challenge"`
	}
	if strings.TrimSpace(string(a.Body)) == challenge || (json.Unmarshal(a.Body, &echo) == nil && echo.Challenge == challenge) {
		return nil
	}
	return bridge.Errorf(bridge.EINVALID, "the webhook URL did not confirm: its answer does not echo the challenge")
}

// oneLine is an error's text on one line, for a message or a log value.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }
