package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// TestLinkedHubEnforcesSeeOnly: a platform and a hub, each a process of its
// own. install --see-only grants a switch of the hub's to be seen but not
// switched; the hub, from its replica, lists it and refuses a command to it
// with 403 naming it, and a group command with it switches nothing.
// installation see-only at the platform reaches the hub both ways.
func TestLinkedHubEnforcesSeeOnly(t *testing.T) {
	m := startPlatform(t)
	b := m.addHub("barn", `  - id: 20
    name: Barn
    switches:
      - {id: barn-light, name: Barn light, driver: virtual, initial: off}
      - {id: barn-fan, name: Barn fan, driver: virtual, initial: off}`, "")
	b.start(t)
	waitFor(t, 15*time.Second, "the hub reports its inventory", func() bool { return m.hubList()["barn"].Link == "up" })
	cliOK(t, "pw-alice\n", "user", "add", "alice", "--location", "20", "--config", m.platform.cfg)
	app := createApp(t, m.platform.cfg, "Watcher")

	// A see-only switch must be one of those installed.
	if r := runCLI(t, "", "install", "--client-id", app.ClientID, "--user", "alice", "--location", "20", "--switch", "barn-light",
		"--see-only", "barn-fan", "--config", m.platform.cfg); r.code == 0 || !strings.Contains(r.stderr, `"barn-fan" is see-only but not selected`) {
		t.Errorf("install --see-only of a switch not selected: %+v", r)
	}
	r := runCLI(t, "", "install", "--client-id", app.ClientID, "--user", "alice", "--location", "20", "--switch", "barn-light", "--switch", "barn-fan",
		"--see-only", "barn-fan", "--json", "--config", m.platform.cfg)
	var g struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &g); r.code != 0 || err != nil || !strings.HasPrefix(g.Endpoint, b.url) {
		t.Fatalf("install into the hub: %+v", r)
	}
	id := g.Endpoint[strings.LastIndex(g.Endpoint, "/")+1:]
	if line := installationLine(t, m.platform.cfg, id); !strings.Contains(line, "barn-light,barn-fan(see-only)") {
		t.Errorf("installation list:\n%s", line)
	}
	if c, body := call(t, "GET", g.Endpoint+"/switches", g.Token); c != http.StatusOK || !strings.Contains(body, `"id":"barn-fan"`) {
		t.Fatalf("GET /switches at the hub: %d %s", c, body)
	}
	if c, body := call(t, "GET", g.Endpoint+"/switches/barn-fan", g.Token); c != http.StatusOK {
		t.Errorf("GET /switches/barn-fan at the hub: %d %s", c, body)
	}
	refused := func(what, path string) {
		t.Helper()
		c, body := call(t, "PUT", g.Endpoint+path, g.Token)
		if c != http.StatusForbidden || !strings.Contains(body, `"id":"barn-fan"`) || !strings.Contains(body, `"reason":"see_only"`) || strings.Contains(body, `"id":"barn-light"`) {
			t.Errorf("%s at the hub: %d %s, want 403 naming barn-fan alone", what, c, body)
		}
	}
	refused("PUT /switches/barn-fan/on", "/switches/barn-fan/on")
	refused("PUT /switches/on", "/switches/on")
	if c, body := call(t, "GET", g.Endpoint+"/switches", g.Token); c != http.StatusOK || strings.Contains(body, `"value":"on"`) {
		t.Errorf("after the refused commands: %d %s, want every switch still off", c, body)
	}

	// Switchable again at the platform: the hub follows.
	cliOK(t, "", "installation", "see-only", id, "off", "--switch", "barn-fan", "--config", m.platform.cfg)
	waitFor(t, 15*time.Second, "the hub lets the app switch barn-fan", func() bool {
		return status(t, "PUT", g.Endpoint+"/switches/barn-fan/on", g.Token) == http.StatusNoContent
	})
	if line := installationLine(t, m.platform.cfg, id); strings.Contains(line, "see-only") {
		t.Errorf("installation list after see-only off:\n%s", line)
	}
	// And see-only again: the hub refuses once its replica has it.
	cliOK(t, "", "installation", "see-only", id, "on", "--switch", "barn-fan", "--config", m.platform.cfg)
	// (on while it waits: the fan is on, so a command let through early
	// changes nothing.)
	waitFor(t, 15*time.Second, "the hub refuses barn-fan again", func() bool {
		return status(t, "PUT", g.Endpoint+"/switches/barn-fan/on", g.Token) == http.StatusForbidden
	})
	refused("PUT /switches/barn-fan/off", "/switches/barn-fan/off")
	if c, body := call(t, "GET", g.Endpoint+"/switches/barn-fan", g.Token); c != http.StatusOK || !strings.Contains(body, `"value":"on"`) {
		t.Errorf("barn-fan after the refused off: %d %s, want still on", c, body)
	}
	if r := runCLI(t, "", "installation", "see-only", id, "on", "--switch", "barn-door", "--config", m.platform.cfg); r.code == 0 || !strings.Contains(r.stderr, "barn-door") {
		t.Errorf("see-only for a switch the installation lacks: %+v", r)
	}

	// The hub keeps the audit log of what it refused and ran, in its own
	// store; the platform points there.
	var recs []auditJSON
	waitFor(t, 15*time.Second, "the hub's audit log holds the refusals", func() bool {
		r := runCLI(t, "", "audit", "--installation", id, "--switch", "barn-fan", "--json", "--config", b.cfg)
		recs = nil
		return r.code == 0 && json.Unmarshal([]byte(r.stdout), &recs) == nil && len(recs) > 0 && recs[0].Outcome == "see_only" && recs[0].Command == "off"
	})
	if recs[0].InstallationID != id || recs[0].ClientID != app.ClientID || recs[0].RequestID == "" {
		t.Errorf("the hub's newest record of barn-fan: %+v", recs[0])
	}
	if r := runCLI(t, "", "audit", "--installation", id, "--config", m.platform.cfg); r.code != 1 || !strings.Contains(r.stderr, "is in a location of hub barn ("+b.url+"), which keeps its audit log") {
		t.Errorf("audit of the hub's installation at the platform: %+v", r)
	}
	apps := daemontest.Remote(m.platform.url).NewBrowser().ConnectedApps(t, "alice", "pw-alice")
	if !strings.Contains(apps.Body, `<dd class="actions"><span class="note">kept by the hub barn, which runs this location's switches</span>`) {
		t.Errorf("the platform's connected apps page does not say the hub keeps the actions:\n%s", apps.Body)
	}
}

// installationLine is installation's line in installation list.
func installationLine(t *testing.T, cfg, installation string) string {
	t.Helper()
	for _, line := range strings.Split(cliOK(t, "", "installation", "list", "--config", cfg), "\n") {
		if strings.HasPrefix(line, installation+" ") {
			return line
		}
	}
	t.Fatalf("installation list lacks %s", installation)
	return ""
}
