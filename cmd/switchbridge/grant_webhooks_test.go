package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// createApp runs app create --json for alice on the platform at cfg.
func createApp(t *testing.T, cfg, name string) daemontest.App {
	t.Helper()
	out := cliOK(t, "", "app", "create", "--name", name, "--redirect-uri", "https://client.example/cb", "--owner", "alice", "--publish", "--json", "--config", cfg)
	var created struct {
		ID     string `json:"client_id"`
		Secret string `json:"client_secret"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("app create: %s", out)
	}
	return daemontest.App{ClientID: created.ID, Secret: created.Secret, RedirectURIs: []string{"https://client.example/cb"}}
}

// webhooksColumn is the WEBHOOKS column of installation's line in
// installation list.
func webhooksColumn(t *testing.T, cfg, installation string) string {
	t.Helper()
	for _, line := range strings.Split(cliOK(t, "", "installation", "list", "--config", cfg), "\n") {
		if strings.HasPrefix(line, installation+" ") {
			return line
		}
	}
	t.Fatalf("installation list lacks %s", installation)
	return ""
}

// TestInstallationListShowsSuspendedWebhooks: the owner's installation list
// says an installation's webhooks are suspended once its app revoked its
// refresh token (the whole grant), and active again after a new
// authorization.
func TestInstallationListShowsSuspendedWebhooks(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := writeConfig(t, dir)
	cliOK(t, "pw-alice\n", "user", "add", "alice", "--location", "1", "--config", cfg)
	app := createApp(t, cfg, "Helper")
	p := startDaemon(t, cfg)
	h := daemontest.Remote("http://" + p.addr).Checked(t)
	g := h.Authorize(t, app, "alice", "pw-alice", 1, "lamp")
	hook := startHookReceiver(t)
	hook.register(t, g.URI, g.Token.AccessToken)
	if line := webhooksColumn(t, cfg, g.InstallationID()); !strings.HasSuffix(line, "1 active") {
		t.Errorf("installation list before the revocation:\n%s", line)
	}

	form := url.Values{"token": {g.Token.RefreshToken}, "client_id": {app.ClientID}, "client_secret": {app.Secret}}
	resp, err := http.PostForm(h.URL+"/oauth/revoke", form)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke = %d", resp.StatusCode)
	}
	if line := webhooksColumn(t, cfg, g.InstallationID()); !strings.Contains(line, "1 suspended (no live token") {
		t.Errorf("installation list after the revocation:\n%s", line)
	}
	h.Authorize(t, app, "alice", "pw-alice", 1, "lamp")
	if line := webhooksColumn(t, cfg, g.InstallationID()); !strings.HasSuffix(line, "1 active") {
		t.Errorf("installation list after a new authorization:\n%s", line)
	}
}

// TestLinkedHubSuspendsWebhooksOnRefreshReuse: a platform and a hub, each
// a process of its own. Reuse detection at the platform revokes the grant;
// the hub learns it through its replica and delivers nothing more to the
// grant's webhook, while another app's webhook over the same switch gets
// each change; a new authorization at the platform resumes it.
func TestLinkedHubSuspendsWebhooksOnRefreshReuse(t *testing.T) {
	m := startPlatform(t)
	b := m.addHub("barn", `  - id: 20
    name: Barn
    switches:
      - {id: barn-light, name: Barn light, driver: virtual}`, "webhooks:\n  allow: [127.0.0.1] # the test's receivers\n")
	b.start(t)
	waitFor(t, 15*time.Second, "the hub reports its inventory", func() bool { return m.hubList()["barn"].Link == "up" })
	cliOK(t, "pw-alice\n", "user", "add", "alice", "--location", "20", "--config", m.platform.cfg)
	thief, other := createApp(t, m.platform.cfg, "Feed"), createApp(t, m.platform.cfg, "Witness")
	ph := (&daemontest.Harness{URL: m.platform.url, Client: &http.Client{Timeout: 30 * time.Second}}).Checked(t)
	victim := ph.Authorize(t, thief, "alice", "pw-alice", 20, "barn-light")
	witness := ph.Authorize(t, other, "alice", "pw-alice", 20, "barn-light")
	if !strings.HasPrefix(victim.URI, b.url) || !strings.HasPrefix(witness.URI, b.url) {
		t.Fatalf("discovery sent the clients to %s and %s, want hub barn at %s", victim.URI, witness.URI, b.url)
	}
	vr, wr := startHookReceiver(t), startHookReceiver(t)
	vr.register(t, victim.URI, victim.Token.AccessToken)
	wr.register(t, witness.URI, witness.Token.AccessToken)

	// The hub's database, read beside it, for what waits in the outbox.
	hubDB, err := store.Open(context.Background(), filepath.Join(m.dir, "barn-data"))
	if err != nil {
		t.Fatal(err)
	}
	defer hubDB.Close()
	on := false
	toggle := func() {
		t.Helper()
		cmd := "on"
		if on {
			cmd = "off"
		}
		on = !on
		n := len(wr.deliveries())
		if c, body := call(t, http.MethodPut, witness.URI+"/switches/barn-light/"+cmd, witness.Token.AccessToken); c != http.StatusNoContent {
			t.Fatalf("PUT %s at the hub = %d %s", cmd, c, body)
		}
		waitFor(t, 15*time.Second, "the witness's delivery", func() bool { return len(wr.deliveries()) > n })
		// Queued for both webhooks in one write: with the victim's outbox
		// empty its delivery was sent or dropped.
		waitFor(t, 15*time.Second, "the victim's outbox empty", func() bool {
			ws, err := hubstore.New(hubDB).Webhooks(context.Background(), victim.InstallationID())
			return err == nil && len(ws) == 1 && ws[0].Pending == 0
		})
	}
	toggle()
	waitFor(t, 15*time.Second, "the victim's delivery while its grant is held", func() bool { return len(vr.deliveries()) == 1 })

	// Reuse detection at the platform.
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, ph.Client)
	if _, err := victim.Config.TokenSource(ctx, &oauth2.Token{RefreshToken: victim.Token.RefreshToken}).Token(); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if _, err := victim.Config.TokenSource(ctx, &oauth2.Token{RefreshToken: victim.Token.RefreshToken}).Token(); err == nil {
		t.Fatal("the spent refresh token was accepted again")
	}
	// The hub has it once it refuses the grant's access token.
	waitFor(t, 15*time.Second, "the hub refuses the revoked token", func() bool {
		return status(t, http.MethodGet, victim.URI+"/switches", victim.Token.AccessToken) == http.StatusUnauthorized
	})
	if live, err := hubstore.New(hubDB).Replica().GrantLive(context.Background(), victim.InstallationID(), time.Now().Add(2*time.Hour)); err != nil || live {
		t.Errorf("the hub's replica holds the grant live two hours on: %v %v", live, err)
	}
	toggle()
	toggle()
	if n := len(vr.deliveries()); n != 1 {
		t.Errorf("the victim's receiver got %d deliveries after reuse detection, want none: %q", n-1, vr.deliveries()[n-1])
	}

	// Authorized again at the platform: the hub delivers from then on.
	again := ph.Authorize(t, thief, "alice", "pw-alice", 20, "barn-light")
	if again.InstallationID() != victim.InstallationID() {
		t.Fatalf("authorized again into %s, want %s", again.InstallationID(), victim.InstallationID())
	}
	// The hub knows the new token once it answers to it.
	waitFor(t, 15*time.Second, "the hub accepts the new token", func() bool {
		return status(t, http.MethodGet, again.URI+"/switches", again.Token.AccessToken) == http.StatusOK
	})
	toggle()
	waitFor(t, 15*time.Second, "the victim's delivery after the new authorization", func() bool { return len(vr.deliveries()) == 2 })
	if d := vr.deliveries()[1]; !strings.Contains(d, `"value":"`+map[bool]string{true: "on", false: "off"}[on]+`"`) {
		t.Errorf("the delivery after resumption is %s, want the latest change only", d)
	}
}
