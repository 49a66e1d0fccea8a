package daemon_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
)

// capturingTB is the test's testing.TB, except that what it is asked to
// clean up is kept (to be run by the test) and its errors are recorded,
// not reported.
type capturingTB struct {
	*testing.T
	cleanups []func()
	errors   []string
}

func (c *capturingTB) Cleanup(f func()) { c.cleanups = append(c.cleanups, f) }
func (c *capturingTB) Errorf(format string, a ...any) {
	c.errors = append(c.errors, fmt.Sprintf(format, a...))
}

// end runs the cleanups, the newest first, as a test's end does.
func (c *capturingTB) end() {
	for i := len(c.cleanups) - 1; i >= 0; i-- {
		c.cleanups[i]()
	}
}

// TestSecretScanCatchesAPlantedLeak proves the scan every hub of these
// tests gets can fail: the secrets of a whole authorization are noted as
// they pass between the test's clients and the hub (the password and CSRF
// tokens sent, the client secret of the token request, the code of the
// redirect, the tokens of the answer), none is in the hub's log, and
// then, one planted where the hub logs it (an access token sent as an
// installation id, which the request log names), the scan that runs when
// the test ends reports it with its line.
func TestSecretScanCatchesAPlantedLeak(t *testing.T) {
	tb := &capturingTB{T: t}
	h := daemontest.Start(tb, hubConfig)
	alice := h.AddUser(tb, "alice", "alice-pw", 1)
	app := h.AddApp(tb, alice, true, redirect)
	g := h.Authorize(tb, app, "alice", "alice-pw", 1, "kitchen")
	p := h.NewBrowser().Get(tb, "/oauth/authorize?response_type=code&client_id="+app.ClientID+"&scope=app&redirect_uri="+redirect)
	for name, secret := range map[string]string{
		"the password": "alice-pw", "the client secret": app.Secret, "the access token": g.Token.AccessToken,
		"the refresh token": g.Token.RefreshToken, "a login form's CSRF token": p.CSRF(tb),
	} {
		if leaks := logtest.Leaks("x " + secret + " x"); len(leaks) != 1 {
			t.Errorf("%s was not noted as a secret", name)
		}
	}
	if got := h.Command(tb, g, "on"); got.StatusCode != http.StatusNoContent {
		t.Fatalf("command: %d %s", got.StatusCode, got.Body)
	}

	// The planted leak: the hub logs the installation id of every API
	// request, and this one is a token.
	h.Call(tb, http.MethodGet, strings.TrimSuffix(g.URI, g.InstallationID())+g.Token.RefreshToken+"/switches", g.Token.AccessToken)
	tb.end()
	if len(tb.errors) != 1 || !strings.Contains(tb.errors[0], "the hub (its log or metrics) logged a secret") ||
		!strings.Contains(tb.errors[0], `msg="api request"`) || !strings.Contains(tb.errors[0], logtest.Redact(g.Token.RefreshToken)) {
		t.Errorf("the scan at the test's end reported %q; want the planted refresh token, once", tb.errors)
	}
}
