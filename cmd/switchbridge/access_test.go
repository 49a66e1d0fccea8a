package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// The owner's commands run in this process against the database of a real
// daemon running in another (this test binary re-executed as serve), as an
// owner runs them on a hub. Each removal is checked against a token used
// just before it: the daemon must refuse it at its next request, with no
// restart, no signal and no cache window.

func wantToken(t *testing.T, h *daemontest.Harness, what string, g daemontest.Grant, works bool) {
	t.Helper()
	status := map[bool]int{true: http.StatusOK, false: http.StatusUnauthorized}[works]
	for _, uri := range []string{g.URI + "/switches", h.URL + "/api/apps/endpoints"} {
		if p := h.Call(t, http.MethodGet, uri, g.Token.AccessToken); p.StatusCode != status {
			t.Errorf("%s: GET %s answered %d %s, want %d", what, uri, p.StatusCode, p.Body, status)
		}
	}
	if works {
		return // a refresh would rotate the grant's tokens
	}
	// The refresh token of a grant taken back gets no new token either.
	stale := &oauth2.Token{AccessToken: g.Token.AccessToken, RefreshToken: g.Token.RefreshToken, Expiry: time.Now().Add(-time.Minute)}
	_, err := g.Config.TokenSource(context.Background(), stale).Token()
	var re *oauth2.RetrieveError
	if g.Token.RefreshToken == "" || !errors.As(err, &re) || (re.ErrorCode != "invalid_grant" && re.ErrorCode != "invalid_client") {
		t.Errorf("%s: refreshing answered %v, want invalid_grant (invalid_client once the app is gone)", what, err)
	}
}

// cliOK runs a command that must succeed and returns its stdout.
func cliOK(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	r := runCLI(t, stdin, args...)
	if r.code != 0 {
		t.Fatalf("%s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

func TestOwnerCommandsTakeAccessBackFromARunningHub(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir) // locations 1 (lamp, fan) and 2 (shed)
	cliOK(t, "pw-alice\n", "user", "add", "alice", "--location", "1", "--location", "2", "--config", cfg)
	cliOK(t, "pw-bob\n", "user", "add", "bob", "--location", "1", "--config", cfg)
	out := cliOK(t, "", "app", "create", "--name", "Helper", "--redirect-uri", "https://client.example/cb", "--owner", "alice", "--publish", "--json", "--config", cfg)
	var created struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatal(err)
	}
	app := daemontest.App{ClientID: created.ID, Secret: created.Secret, RedirectURIs: []string{"https://client.example/cb"}}

	p := startDaemon(t, cfg)
	h := daemontest.Remote("http://" + p.addr).Checked(t)
	aliceHome := h.Authorize(t, app, "alice", "pw-alice", 1, "lamp")
	aliceShed := h.Authorize(t, app, "alice", "pw-alice", 2, "shed")
	bob := h.Authorize(t, app, "bob", "pw-bob", 1, "fan")

	// installation list, whole and filtered.
	all := cliOK(t, "", "installation", "list", "--config", cfg)
	for _, g := range []daemontest.Grant{aliceHome, aliceShed, bob} {
		if !strings.Contains(all, g.InstallationID()) {
			t.Errorf("installation list lacks %s:\n%s", g.InstallationID(), all)
		}
	}
	if !strings.Contains(all, "LAST_USED") || !strings.Contains(all, "1 (Home)") || !strings.Contains(all, "Helper") {
		t.Errorf("installation list:\n%s", all)
	}
	if l := cliOK(t, "", "installation", "list", "--user", "bob", "--config", cfg); !strings.Contains(l, bob.InstallationID()) || strings.Contains(l, aliceHome.InstallationID()) {
		t.Errorf("installation list --user bob:\n%s", l)
	}
	if l := cliOK(t, "", "installation", "list", "--app", app.ClientID, "--user", "alice", "--config", cfg); strings.Count(l, "\n") != 3 || strings.Contains(l, bob.InstallationID()) {
		t.Errorf("installation list --app --user alice:\n%s", l)
	}
	for _, bad := range [][]string{{"--user", "nobody"}, {"--app", "no-such-app"}} {
		if r := runCLI(t, "", append([]string{"installation", "list", "--config", cfg}, bad...)...); r.code != 1 {
			t.Errorf("installation list %v: %+v", bad, r)
		}
	}

	// installation switches: the consent page's rules; bob's token, kept,
	// reaches the new grant at once.
	if out := cliOK(t, "", "installation", "switches", bob.InstallationID(), "--switch", "lamp", "--switch", "fan", "--see-only", "fan", "--config", cfg); !strings.Contains(out, "see-only: fan") {
		t.Errorf("installation switches said %q", out)
	}
	if p := h.Call(t, http.MethodGet, bob.URI+"/switches", bob.Token.AccessToken); p.StatusCode != http.StatusOK || !strings.Contains(string(p.Body), `"lamp"`) {
		t.Errorf("bob's switches after installation switches: %d %s", p.StatusCode, p.Body)
	}
	if p := h.Call(t, http.MethodPut, bob.URI+"/switches/on", bob.Token.AccessToken); p.StatusCode != http.StatusForbidden {
		t.Errorf("a command with the see-only fan: %d %s, want 403", p.StatusCode, p.Body)
	}
	if r := runCLI(t, "", "installation", "switches", bob.InstallationID(), "--switch", "shed", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, "shed") {
		t.Errorf("installation switches with a switch of another location: %+v", r)
	}
	wantToken(t, h, "bob's after installation switches", bob, true)

	// installation delete
	wantToken(t, h, "alice's home before installation delete", aliceHome, true)
	cliOK(t, "", "installation", "delete", aliceHome.InstallationID(), "--config", cfg)
	wantToken(t, h, "alice's home right after installation delete", aliceHome, false)
	wantToken(t, h, "alice's shed after deleting her home installation", aliceShed, true)
	if r := runCLI(t, "", "installation", "delete", aliceHome.InstallationID(), "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, "no installation") {
		t.Errorf("deleting it again: %+v", r)
	}

	// user locations --remove ends her installation there; --add lets her
	// install again.
	wantToken(t, h, "alice's shed before user locations --remove", aliceShed, true)
	if out := cliOK(t, "", "user", "locations", "alice", "--remove", "2", "--config", cfg); !strings.Contains(out, "1 installation there uninstalled") {
		t.Errorf("user locations --remove said %q", out)
	}
	wantToken(t, h, "alice's shed right after user locations --remove", aliceShed, false)
	if r := runCLI(t, "", "user", "locations", "alice", "--add", "7", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, "location 7 is neither in") {
		t.Errorf("adding an unknown location: %+v", r)
	}
	if out := cliOK(t, "", "user", "locations", "alice", "--add", "2", "--config", cfg); !strings.Contains(out, "belongs to: 1,2") {
		t.Errorf("user locations --add said %q", out)
	}
	aliceShed = h.Authorize(t, app, "alice", "pw-alice", 2, "shed")

	// app rotate-secret: the old secret can no longer redeem a code, the new
	// one can; tokens issued before keep working (the users' grants stand).
	out = cliOK(t, "", "app", "rotate-secret", app.ClientID, "--json", "--config", cfg)
	var rotated struct {
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal([]byte(out), &rotated); err != nil || len(rotated.Secret) < 40 || rotated.Secret == app.Secret {
		t.Fatalf("rotate-secret printed %q", out)
	}
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.Client)
	code := h.Code(t, app, "bob", "pw-bob", 1, "fan")
	if _, err := h.OAuthConfig(app).Exchange(ctx, code); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Errorf("exchange with the old secret right after rotate-secret: %v, want invalid_client", err)
	}
	app.Secret = rotated.Secret
	if _, err := h.OAuthConfig(app).Exchange(ctx, code); err != nil {
		t.Errorf("exchange with the new secret: %v", err)
	}
	wantToken(t, h, "bob's token after rotate-secret", bob, true)

	// user delete: refused for an app's owner; bob's tokens end.
	if r := runCLI(t, "", "user", "delete", "alice", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, app.ClientID) {
		t.Errorf("deleting the app's owner: %+v", r)
	}
	wantToken(t, h, "bob before user delete", bob, true)
	if out := cliOK(t, "", "user", "delete", "bob", "--config", cfg); !strings.Contains(out, "1 installation uninstalled") {
		t.Errorf("user delete said %q", out)
	}
	wantToken(t, h, "bob right after user delete", bob, false)
	if r := runCLI(t, "", "user", "list", "--config", cfg); strings.Contains(r.stdout, "bob") {
		t.Errorf("user list after deleting bob:\n%s", r.stdout)
	}

	// app delete: uninstalled everywhere.
	wantToken(t, h, "alice's shed before app delete", aliceShed, true)
	if out := cliOK(t, "", "app", "delete", app.ClientID, "--config", cfg); !strings.Contains(out, "1 installation uninstalled") {
		t.Errorf("app delete said %q", out)
	}
	wantToken(t, h, "alice's shed right after app delete", aliceShed, false)
	if l := cliOK(t, "", "installation", "list", "--config", cfg); strings.Count(l, "\n") != 1 {
		t.Errorf("installations left after app delete:\n%s", l)
	}
	if r := runCLI(t, "", "app", "rotate-secret", app.ClientID, "--config", cfg); r.code != 1 {
		t.Errorf("rotating the secret of a deleted app: %+v", r)
	}
	// Now alice owns nothing and can go.
	cliOK(t, "", "user", "delete", "alice", "--config", cfg)
}

func TestOwnerCommandsUsage(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"installation", "delete"}, 2, "installation delete takes one ID"},
		{[]string{"installation", "list", "extra"}, 2, "takes no arguments"},
		{[]string{"installation", "frob"}, 2, `unknown command "installation frob"`},
		{[]string{"app", "delete"}, 2, "takes one CLIENT_ID"},
		{[]string{"app", "rotate-secret", "a", "b"}, 2, "takes one CLIENT_ID"},
		{[]string{"app", "delete", "nope"}, 1, `no app with client id "nope"`},
		{[]string{"user", "delete", "nobody"}, 1, `no user "nobody"`},
		{[]string{"user", "locations", "nobody", "--add", "1"}, 1, `no user "nobody"`},
		{[]string{"user", "locations", "x", "--remove", "zero"}, 2, "not a location id"},
	} {
		r := runCLI(t, "", append(c.args, "--config", cfg)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", c.args, r.code, r.stderr, c.code, c.msg)
		}
	}
	if r := runCLI(t, "", "help"); !strings.Contains(r.stdout, "installation delete ID") || !strings.Contains(r.stdout, "app rotate-secret") {
		t.Errorf("usage lacks the owner's commands:\n%s", r.stdout)
	}
}
