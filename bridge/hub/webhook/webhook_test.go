package webhook

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// TestSignSpecVector: the example of the Standard Webhooks
// specification's reference libraries' tests.
func TestSignSpecVector(t *testing.T) {
	got, err := Sign("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`))
	if err != nil || got != "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=" {
		t.Errorf("Sign = %q, %v", got, err)
	}
	if a, b := NewSecret(), NewSecret(); !strings.HasPrefix(a, "whsec_") || a == b {
		t.Error("NewSecret")
	}
}

func TestCheckURL(t *testing.T) {
	public, err := ParseAllow(nil)
	if err != nil {
		t.Fatal(err)
	}
	allow, err := ParseAllow([]string{"192.168.1.0/24", "nodered.lan", "10.0.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	both, err := ParseAllow([]string{"PUBLIC", "192.168.1.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url string
		a   Allow
		ok  bool
	}{
		{"https://svc.example/hook?x=1", public, true}, // a name: its addresses are checked when connecting
		{"http://93.184.215.14:8080/hook", public, true},
		{"http://[2606:4700::1111]/hook", public, true},
		{"http://127.0.0.1:1880/hook", public, false},
		{"http://192.168.1.20:1880/hook", public, false},
		{"http://[::ffff:192.168.1.20]/", public, false},
		{"http://0.0.0.0:8080/", public, false},
		{"ftp://svc.example/", public, false},
		{"http:///nohost", public, false},
		{"http://user:pw@svc.example/", public, false},
		{"http://svc.example/#frag", public, false},
		{"//svc.example/", public, false},
		{"http://192.168.1.20:1880/hook", allow, true},
		{"http://[::ffff:192.168.1.20]:1880/hook", allow, true},
		{"http://NodeRed.lan:1880/hook", allow, true},
		{"http://nodered.lan.:1880/hook", allow, true},
		{"http://10.0.0.7/", allow, true},
		{"http://10.0.0.8/", allow, false},
		{"http://93.184.215.14/", allow, false}, // a set list without public: not the Internet
		{"http://[::1]/", allow, false},
		{"http://other.lan/", allow, true}, // may resolve into 192.168.1.0/24: checked when connecting
		{"http://93.184.215.14/", both, true},
		{"http://192.168.1.9/", both, true},
		{"http://192.168.2.9/", both, false},
		{"http://other.lan/" + strings.Repeat("a", MaxURL), public, false},
	} {
		_, err := c.a.CheckURL(c.url)
		if (err == nil) != c.ok {
			t.Errorf("CheckURL(%q) = %v, want ok %v", c.url, err, c.ok)
		}
		if err != nil && bridge.ErrorCode(err) != bridge.EINVALID {
			t.Errorf("CheckURL(%q): code %s", c.url, bridge.ErrorCode(err))
		}
		if err != nil && strings.Contains(c.url, "1.") && strings.Contains(err.Error(), "1.") {
			t.Errorf("CheckURL(%q) = %v: names the address", c.url, err)
		}
	}
	names, _ := ParseAllow([]string{"nodered.lan"})
	if _, err := names.CheckURL("http://other.lan/"); err == nil {
		t.Error("a name not listed passed an allow list of names only")
	}
	for _, bad := range []string{"", "a b", "http://x", "1.2.3.4/33", "*.lan", "nodered.lan:1880", "u@h"} {
		if _, err := ParseAllow([]string{bad}); err == nil {
			t.Errorf("ParseAllow(%q) passed", bad)
		}
	}
	if !allow.addr(netip.MustParseAddr("::ffff:192.168.1.9")) {
		t.Error("an IPv4-mapped address is not matched")
	}
	mapped, _ := ParseAllow([]string{"::ffff:192.168.1.0/120"})
	if !mapped.addr(netip.MustParseAddr("192.168.1.9")) {
		t.Error("an IPv4-mapped prefix does not match its IPv4 addresses")
	}
}

// TestRefusedClasses: every special-purpose class is refused under
// public, in every form that reaches it (IPv4-mapped, NAT64, 6to4,
// Teredo, IPv4-compatible), and public unicast addresses are not.
func TestRefusedClasses(t *testing.T) {
	for _, c := range []struct{ addr, class string }{
		{"127.0.0.1", "loopback"}, {"127.255.0.9", "loopback"}, {"::1", "loopback"},
		{"0.0.0.0", "unspecified"}, {"::", "unspecified"}, {"::ffff:0.0.0.0", "unspecified"},
		{"0.1.2.3", "this network"},
		{"169.254.169.254", "link-local"}, {"169.254.0.1", "link-local"}, {"fe80::1", "link-local"}, {"febf::1", "link-local"},
		{"10.1.2.3", "private"}, {"172.16.0.1", "private"}, {"172.31.255.254", "private"}, {"192.168.1.1", "private"},
		{"fc00::1", "unique local"}, {"fd12:3456::1", "unique local"},
		{"100.64.0.1", "CGNAT"}, {"100.127.255.254", "CGNAT"},
		{"224.0.0.1", "multicast"}, {"239.255.255.250", "multicast"}, {"ff02::1", "multicast"}, {"ff0e::1", "multicast"},
		{"255.255.255.255", "broadcast"}, {"240.0.0.1", "reserved"},
		{"192.0.2.1", "documentation"}, {"198.51.100.1", "documentation"}, {"203.0.113.1", "documentation"},
		{"2001:db8::1", "documentation"}, {"3fff::1", "documentation"},
		{"198.18.0.1", "benchmarking"}, {"198.19.255.1", "benchmarking"}, {"2001:2::1", "IETF"},
		{"192.0.0.8", "IETF"}, {"192.88.99.1", "6to4"}, {"fec0::1", "site-local"}, {"100::1", "discard"},
		// IPv4-mapped forms are their IPv4 address.
		{"::ffff:127.0.0.1", "loopback"}, {"::ffff:10.0.0.1", "private"}, {"::ffff:169.254.169.254", "link-local"},
		// NAT64's well-known prefix: the IPv4 address it embeds.
		{"64:ff9b::7f00:1", "NAT64 of loopback"}, {"64:ff9b::a9fe:a9fe", "NAT64 of link-local"}, {"64:ff9b::c0a8:101", "NAT64 of private"},
		// Forms that tunnel to an IPv4 address: refused whole.
		{"64:ff9b:1::5db8:d70e", "local-use NAT64"}, {"2002:7f00:1::1", "6to4"}, {"2002:5db8:d70e::1", "6to4"},
		{"2001:0:5db8:d70e::1", "Teredo"}, {"::127.0.0.1", "reserved"}, {"::93.184.215.14", "reserved"},
		{"4000::1", "reserved"}, {"5f00::1", "reserved"},
	} {
		if got := Refused(netip.MustParseAddr(c.addr)); !strings.Contains(got, c.class) {
			t.Errorf("Refused(%s) = %q, want %q", c.addr, got, c.class)
		}
	}
	for _, ok := range []string{"93.184.215.14", "1.1.1.1", "8.8.8.8", "100.63.255.255", "100.128.0.1", "172.32.0.1", "198.20.0.1",
		"223.255.255.254", "::ffff:93.184.215.14", "2606:4700::1111", "2a00:1450:4001::1", "64:ff9b::5db8:d70e"} {
		if got := Refused(netip.MustParseAddr(ok)); got != "" {
			t.Errorf("Refused(%s) = %q, want public", ok, got)
		}
	}
}

// TestControlRefusesBeforeConnecting: the dialer's control, which runs
// for every connection after the name is resolved and before connect(),
// refuses each class under the default, the hub's own listeners and
// unspecified addresses whatever the config allows (by address or by
// name), and lets allowed addresses through.
func TestControlRefusesBeforeConnecting(t *testing.T) {
	hub := netip.MustParseAddrPort("127.0.0.1:8080")
	self := func(ap netip.AddrPort) bool { return ap == hub }
	public := NewClient(Allow{public: true}, self)
	everything, _ := ParseAllow([]string{"0.0.0.0/0", "::/0"})
	all := NewClient(everything, self)
	byName := context.WithValue(context.Background(), hostAllowed{}, true)
	for _, c := range []struct {
		c       *Client
		ctx     context.Context
		address string
		ok      bool
	}{
		{public, context.Background(), "93.184.215.14:443", true},
		{public, context.Background(), "[2606:4700::1111]:443", true},
		{public, context.Background(), "127.0.0.1:1880", false},
		{public, context.Background(), "[::1]:1880", false},
		{public, context.Background(), "169.254.169.254:80", false},
		{public, context.Background(), "[fe80::1%eth0]:80", false},
		{public, context.Background(), "192.168.1.1:80", false},
		{public, context.Background(), "100.64.0.1:80", false},
		{public, context.Background(), "[fd00::1]:80", false},
		{public, context.Background(), "[::ffff:10.0.0.1]:80", false},
		{public, context.Background(), "[64:ff9b::a9fe:a9fe]:80", false},
		{public, context.Background(), "[2002:c0a8:101::1]:80", false},
		{public, context.Background(), "255.255.255.255:80", false},
		{public, context.Background(), "not an address", false},
		{all, context.Background(), "192.168.1.1:80", true},
		{all, context.Background(), "127.0.0.1:1880", true},
		{all, context.Background(), "127.0.0.1:8080", false}, // the hub
		{all, context.Background(), "0.0.0.0:1880", false},
		{all, context.Background(), "[::]:1880", false},
		{all, context.Background(), "[::ffff:0.0.0.0]:1880", false},
		{public, byName, "192.168.1.1:80", true}, // a host the owner listed by name
		{public, byName, "127.0.0.1:8080", false},
		{public, byName, "[::ffff:127.0.0.1]:8080", false},
		{public, byName, "0.0.0.0:80", false},
	} {
		err := c.c.control(c.ctx, "tcp", c.address, nil)
		if (err == nil) != c.ok {
			t.Errorf("control(%s) = %v, want ok %v", c.address, err, c.ok)
		}
	}
	// A URL whose host is the hub's address is refused before anything is
	// dialled, with nothing but "not allowed".
	for _, u := range []string{"http://127.0.0.1:8080/hook", "http://[::ffff:127.0.0.1]:8080/", "http://0.0.0.0:9/", "http://[::]:9/"} {
		if _, err := all.CheckURL(u); err != errNotAllowed {
			t.Errorf("CheckURL(%s) = %v, want %v", u, err, errNotAllowed)
		}
	}
	if _, err := all.CheckURL("http://127.0.0.1:8081/"); err != nil {
		t.Errorf("another port of loopback, allowed: %v", err)
	}
}

func TestRetryAfterAndBackoff(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"": 0, "x": 0, "-5": 0, "120": 2 * time.Minute, "99999999": MaxFailing,
		now.Add(time.Minute).Format(http.TimeFormat): time.Minute, now.Add(-time.Minute).Format(http.TimeFormat): 0,
	} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
	s := &Service{}
	for attempts, max := range map[int]time.Duration{0: 5 * time.Second, 1: 10 * time.Second, 3: 40 * time.Second, 20: time.Hour, 1000: time.Hour} {
		for range 20 {
			if d := s.backoff(attempts); d < max/2 || d > max {
				t.Errorf("backoff(%d) = %s, want within [%s, %s]", attempts, d, max/2, max)
			}
		}
	}
}

// TestSlotsAreShared: an installation alone may use every slot; another
// installation's first delivery starts while they are all held; and once
// the first installation's deliveries end, each holds its share.
func TestSlotsAreShared(t *testing.T) {
	due := func(inst string, hooks ...string) []bridge.WebhookDelivery {
		var out []bridge.WebhookDelivery
		for _, h := range hooks {
			out = append(out, bridge.WebhookDelivery{WebhookID: inst + h, InstallationID: inst})
		}
		return out
	}
	ids := func(ds []bridge.WebhookDelivery) string {
		var s []string
		for _, d := range ds {
			s = append(s, d.WebhookID)
		}
		return strings.Join(s, " ")
	}
	sl := newSlots(DefaultConcurrency)
	a := due("a", "1", "2", "3", "4")
	if got := ids(sl.start(a)); got != "a1 a2 a3 a4" {
		t.Fatalf("alone: started %q, want all four", got)
	}
	// All four hang; b and c still start one each, and no more.
	waiting := append(append(append([]bridge.WebhookDelivery{}, a...), due("b", "1", "2", "3", "4")...), due("c", "1", "2")...)
	if got := ids(sl.start(waiting)); got != "b1 c1" {
		t.Fatalf("with a's four running: started %q, want b1 c1", got)
	}
	if got := ids(sl.start(waiting)); got != "" {
		t.Fatalf("again: started %q, want none", got)
	}
	// Two of a's end: the three installations share the four slots.
	sl.end(a[0])
	sl.end(a[1])
	if got := ids(sl.start(waiting)); got != "" {
		t.Fatalf("after two of a's ended: started %q, want none (six running, above the four)", got)
	}
	sl.end(a[2])
	sl.end(a[3])
	// a's first goes at once; then one more of the longest waiting among
	// those running fewest, within the share of ceil(4/3) = 2 each.
	got := ids(sl.start(waiting))
	if got != "a1 a2" {
		t.Fatalf("after a's ended: started %q, want a1 a2", got)
	}
	if sl.total != 4 || sl.running["a"] != 2 || sl.running["b"] != 1 || sl.running["c"] != 1 {
		t.Errorf("running %v, total %d", sl.running, sl.total)
	}
}

// TestOwnPublicURLRefused: a webhook to the hub's own public_url (its host
// and port, however written) is refused before anything is dialled, even
// when webhooks.allow lists that name: behind a router's port forward the
// name reaches the hub at an address the address check cannot know.
func TestOwnPublicURLRefused(t *testing.T) {
	allow, err := ParseAllow([]string{"public", "hub.example"})
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(allow, nil, "https://Hub.Example")
	for raw, ok := range map[string]bool{
		"https://hub.example/hook":        false,
		"https://HUB.example.:443/x":      false,
		"https://hub.example:443/":        false,
		"http://hub.example:443/":         false, // the same port, another scheme: still the hub
		"http://hub.example/hook":         true,  // port 80: not the hub's listener
		"https://hub.example:8443/hook":   true,
		"https://other.example/hook":      true,
		"https://sub.hub.example/webhook": true,
	} {
		_, err := c.CheckURL(raw)
		if (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", raw, err, ok)
		}
		if err != nil && err.Error() != errNotAllowed.Error() {
			t.Errorf("%s: the client is told %q, want only %q", raw, err, errNotAllowed)
		}
	}
}
