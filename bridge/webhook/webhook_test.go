package webhook

import (
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
	allow, err := ParseAllow([]string{"192.168.1.0/24", "nodered.lan", "10.0.0.7"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		url string
		a   Allow
		ok  bool
	}{
		{"http://127.0.0.1:1880/hook", Allow{}, true},
		{"https://svc.example/hook?x=1", Allow{}, true},
		{"ftp://svc.example/", Allow{}, false},
		{"http:///nohost", Allow{}, false},
		{"http://user:pw@svc.example/", Allow{}, false},
		{"http://svc.example/#frag", Allow{}, false},
		{"//svc.example/", Allow{}, false},
		{"http://192.168.1.20:1880/hook", allow, true},
		{"http://NodeRed.lan:1880/hook", allow, true},
		{"http://10.0.0.7/", allow, true},
		{"http://10.0.0.8/", allow, false},
		{"http://[::1]/", allow, false},
		{"http://other.lan/", allow, true}, // checked by its address when connecting
		{"http://other.lan/" + strings.Repeat("a", MaxURL), Allow{}, false},
	} {
		_, err := c.a.CheckURL(c.url)
		if (err == nil) != c.ok {
			t.Errorf("CheckURL(%q) = %v, want ok %v", c.url, err, c.ok)
		}
		if err != nil && bridge.ErrorCode(err) != bridge.EINVALID {
			t.Errorf("CheckURL(%q): code %s", c.url, bridge.ErrorCode(err))
		}
	}
	names, _ := ParseAllow([]string{"nodered.lan"})
	if _, err := names.CheckURL("http://other.lan/"); err == nil {
		t.Error("a name not listed passed an allow list of names only")
	}
	for _, bad := range []string{"", "a b", "http://x", "1.2.3.4/33"} {
		if _, err := ParseAllow([]string{bad}); err == nil {
			t.Errorf("ParseAllow(%q) passed", bad)
		}
	}
	if !allow.addr(netip.MustParseAddr("::ffff:192.168.1.9").Unmap()) {
		t.Error("an IPv4-mapped address is not matched")
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
