package oauth

import (
	"net/url"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
)

var registered = map[string][]string{
	"app1":      {"https://client.example/cb", "com.example.app:/oauth"},
	"pkce-only": {"https://client.example/cb"},
}

func lookup(id string) (*bridge.App, error) {
	u, ok := registered[id]
	if !ok {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no app %q", id)
	}
	return &bridge.App{ClientID: id, RedirectURIs: u, RequirePKCE: id == "pkce-only"}, nil
}

func TestParseAuthorizeRequest(t *testing.T) {
	good := "response_type=code&client_id=app1&scope=app&redirect_uri=https%3A%2F%2Fclient.example%2Fcb"
	cases := []struct {
		query    string
		redirect bool   // error goes back to the client
		code     string // "" for success
	}{
		{good, false, ""},
		{good + "&state=abc", false, ""},
		{"response_type=code&client_id=app1&scope=app&redirect_uri=com.example.app%3A%2Foauth", false, ""},
		{"response_type=code&scope=app&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", false, "invalid_request"},
		{"response_type=code&client_id=nope&scope=app&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", false, "invalid_request"},
		{"response_type=code&client_id=app1&scope=app", false, "invalid_request"},
		{"response_type=code&client_id=app1&scope=app&redirect_uri=https%3A%2F%2Fclient.example%2Fcb%2F", false, "invalid_request"},
		{good + "&client_id=app1", false, "invalid_request"},
		{good + "&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", false, "invalid_request"},
		{good + "&state=a&state=b", true, "invalid_request"},
		{good + "&scope=app", true, "invalid_request"},
		{good + "&extra=1&extra=2", true, "invalid_request"},
		{"client_id=app1&scope=app&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", true, "invalid_request"},
		{"response_type=token&client_id=app1&scope=app&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", true, "unsupported_response_type"},
		{"response_type=code&client_id=app1&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", true, "invalid_request"},
		{"response_type=code&client_id=app1&scope=app+admin&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", true, "invalid_scope"},
		{"response_type=code&client_id=app1&scope=+app&redirect_uri=https%3A%2F%2Fclient.example%2Fcb", true, "invalid_scope"},
		{good + "&state=" + strings.Repeat("s", maxParamLen+1), true, "invalid_request"},
		// A PKCE-only app: refused without a challenge, back to the client.
		{strings.Replace(good, "app1", "pkce-only", 1), true, "invalid_request"},
		{strings.Replace(good, "app1", "pkce-only", 1) + "&code_challenge=" + strings.Repeat("a", 43) + "&code_challenge_method=S256", false, ""},
	}
	for _, c := range cases {
		q, err := url.ParseQuery(c.query)
		if err != nil {
			t.Fatal(err)
		}
		req, aerr := parseAuthorizeRequest(q, lookup)
		if c.code == "" {
			if aerr != nil || req == nil {
				t.Errorf("%s: %v", c.query, aerr)
			}
			continue
		}
		if aerr == nil {
			t.Errorf("%s: accepted, want %s", c.query, c.code)
			continue
		}
		if aerr.Code != c.code || aerr.Redirect != c.redirect {
			t.Errorf("%s: %s redirect=%v, want %s redirect=%v", c.query, aerr.Code, aerr.Redirect, c.code, c.redirect)
		}
	}
}

func TestRedirectWithKeepsTheRegisteredQuery(t *testing.T) {
	p := url.Values{"code": {"x y"}, "state": {"s&t"}}
	for in, want := range map[string]string{
		"https://c.example/cb":              "https://c.example/cb?code=x+y&state=s%26t",
		"https://c.example/cb?tenant=7":     "https://c.example/cb?tenant=7&code=x+y&state=s%26t",
		"https://c.example/cb?a=1;b=2":      "https://c.example/cb?a=1;b=2&code=x+y&state=s%26t",
		"https://c.example/cb?x=a%20b&flag": "https://c.example/cb?x=a%20b&flag&code=x+y&state=s%26t",
		"https://c.example/cb?":             "https://c.example/cb?code=x+y&state=s%26t",
		"com.example.app:/oauth":            "com.example.app:/oauth?code=x+y&state=s%26t",
	} {
		if got := redirectWith(in, p); got != want {
			t.Errorf("redirectWith(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestValidRedirectURI(t *testing.T) {
	for _, ok := range []string{"https://c.example/cb", "http://192.168.1.5:8000/cb", "com.example.app:/oauth"} {
		if err := ValidRedirectURI(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/cb", "c.example/cb", "https://c.example/cb#x", "https:///cb", "https://c.example/" + strings.Repeat("a", maxParamLen),
		"javascript:alert(1)", "data:text/html,hi", "file:///etc/passwd", "myapp:/cb", "https://c.example/cb?state=x", "https://c.example/cb?code=1",
		"https://c.example/cb?iss=https://evil.example", "https://user@c.example/cb", "https://c.example:pw@evil.example/cb", "https://@c.example/cb",
		"com.example.app://user@host/cb"} {
		if err := ValidRedirectURI(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseAuthorizeRequest checks the rules that must hold for any query:
// no panic; success only with one registered client, an exactly registered
// redirect URI, response_type=code and scope=app; and an error may only
// redirect to an exactly registered URI.
func FuzzParseAuthorizeRequest(f *testing.F) {
	for _, s := range []string{
		"response_type=code&client_id=app1&scope=app&redirect_uri=https%3A%2F%2Fclient.example%2Fcb&state=x",
		"response_type=code&client_id=app1&client_id=app1&scope=app",
		"redirect_uri=https%3A%2F%2Fclient.example%2Fcb%2F&client_id=app1",
		"client_id=app1&redirect_uri=com.example.app%3A%2Foauth&scope=app&response_type=token",
		"%zz", "a=1&a=2", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if len(raw) > 8192 {
			return
		}
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		req, aerr := parseAuthorizeRequest(q, lookup)
		if (req == nil) == (aerr == nil) {
			t.Fatalf("exactly one of request and error must be set: %v %v", req, aerr)
		}
		isRegistered := func(id, u string) bool {
			for _, r := range registered[id] {
				if r == u {
					return true
				}
			}
			return false
		}
		if aerr != nil {
			if aerr.Redirect && !isRegistered(aerr.req.ClientID, aerr.req.RedirectURI) {
				t.Fatalf("error would redirect to unregistered %q", aerr.req.RedirectURI)
			}
			return
		}
		if len(q["client_id"]) != 1 || len(q["redirect_uri"]) != 1 || q.Get("response_type") != "code" || q.Get("scope") != "app" {
			t.Fatalf("accepted %q", raw)
		}
		if !isRegistered(req.ClientID, req.RedirectURI) {
			t.Fatalf("accepted unregistered redirect %q", req.RedirectURI)
		}
		for k, vs := range q {
			if len(vs) != 1 {
				t.Fatalf("accepted duplicated %s", k)
			}
		}
	})
}
