package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
)

// auditConfig has a switch for each way a command ends: one that
// confirms, one whose device fails, one too slow for command_timeout, one
// lacking off, one capped at one change an hour, and one the tests grant
// see-only.
const auditConfig = `
locations:
  - id: 1
    name: Home
    switches:
      - {id: kitchen, name: Kitchen light, driver: virtual, initial: off}
      - {id: hall, name: Hall lamp, driver: virtual, initial: on}
      - {id: doorbell, name: Doorbell chime, driver: virtual, commands: [on]}
      - {id: broken, name: Broken plug, driver: virtual, fail: true}
      - {id: slow, name: Slow plug, driver: virtual, delay: 10s}
      - {id: pump, name: Water pump, driver: virtual, max_changes: {burst: 1, per: 1h}}
  - id: 2
    name: Garage
    switches:
      - {id: garage-light, name: Garage light, driver: virtual}
`

// sent is one request an app made, with the X-Request-Id it was answered
// with and, per switch, the outcome its audit record must have (none:
// the request must leave no record).
type sent struct {
	what   string
	status int
	rid    string
	want   map[string]string
}

// send makes one request with an x/oauth2 client and returns what it was
// answered, failing unless the status is want.
func send(t *testing.T, client *http.Client, method, url string, status int, outcomes map[string]string) sent {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	what := method + " " + url[strings.Index(url, "/switches"):]
	if resp.StatusCode != status {
		t.Fatalf("%s = %d, want %d", what, resp.StatusCode, status)
	}
	rid := resp.Header.Get("X-Request-Id")
	if rid == "" {
		t.Fatalf("%s: no X-Request-Id", what)
	}
	return sent{what: what, status: status, rid: rid, want: outcomes}
}

// auditOf waits until the hub's audit log holds n records and returns
// them, newest first: a command's records reach the database with the
// next batch the value writer stores.
func auditOf(t *testing.T, h *daemontest.Harness, f bridge.AuditFilter, n int) []bridge.AuditRecord {
	t.Helper()
	svc := &admin.Service{Store: h.Accounts, Locations: h.Switchboard, AuditLog: h.HubStore}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rep, err := svc.Audit(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		if len(rep.Records) >= n || time.Now().After(deadline) {
			if len(rep.Records) != n {
				t.Fatalf("the audit log holds %d records after 10 s, want %d: %+v", len(rep.Records), n, rep.Records)
			}
			return rep.Records
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAuditTracesEveryCommand: every command an app sends is in the hub's
// audit log, one record per switch, under the X-Request-Id its answer
// carried, with who sent it and how it ended: ok, a device's failure or
// timeout (with the time it waited), a see-only switch (403), a command
// the driver lacks (501), a change cap (429), and a group command refused
// for one of its switches. What is refused before any command is not
// recorded: a bad token (401), the installation's own rate limit (429), a
// command that is not on or off (400), a switch not granted (404). The
// connected apps page shows the user the last actions of their own apps.
func TestAuditTracesEveryCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a command timeout and the value writer's batches (seconds)")
	}
	h := daemontest.StartWith(t, daemontest.Options{Config: auditConfig,
		Server: "  command_timeout: 300ms\n  rate_limit: {requests: 20, per: 1h}\n"})
	alice := h.AddUser(t, "alice", "alice-pw", 1, 2)
	h.AddUser(t, "bob", "bob-pw", 2)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen", daemontest.SeeOnly("hall"), "doorbell", "broken", "slow", "pump")
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, h.Client)
	client := g.Config.Client(ctx, g.Token)
	put := func(path string, status int, outcomes map[string]string) sent {
		t.Helper()
		return send(t, client, http.MethodPut, g.URI+path, status, outcomes)
	}

	reqs := []sent{
		// A group command with a see-only switch: nothing is sent to any.
		put("/switches/off", http.StatusForbidden, map[string]string{
			"kitchen": "not_sent", "hall": "see_only", "doorbell": "not_sent", "broken": "not_sent", "slow": "not_sent", "pump": "not_sent"}),
		put("/switches/kitchen/on", http.StatusNoContent, map[string]string{"kitchen": "ok"}),
		put("/switches/broken/on", http.StatusBadGateway, map[string]string{"broken": "failed"}),
		put("/switches/slow/on", http.StatusBadGateway, map[string]string{"slow": "timeout"}),
		put("/switches/hall/off", http.StatusForbidden, map[string]string{"hall": "see_only"}),
		put("/switches/doorbell/off", http.StatusNotImplemented, map[string]string{"doorbell": "unsupported"}),
		put("/switches/pump/on", http.StatusNoContent, map[string]string{"pump": "ok"}),
		put("/switches/pump/off", http.StatusTooManyRequests, map[string]string{"pump": "rate_limited"}),
		// Refused before any command: no record.
		put("/switches/kitchen/toggle", http.StatusBadRequest, nil),
		put("/switches/garage-light/on", http.StatusNotFound, nil),
		send(t, http.DefaultClient, http.MethodPut, g.URI+"/switches/kitchen/on", http.StatusUnauthorized, nil),
	}
	// The installation's rate limit: used up with reads, then a command.
	for i := 0; ; i++ {
		p := h.Call(t, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
		if p.StatusCode == http.StatusTooManyRequests {
			break
		}
		if i == 20 {
			t.Fatal("the installation's rate limit never answered 429")
		}
	}
	reqs = append(reqs, put("/switches/kitchen/off", http.StatusTooManyRequests, nil))

	want := 0
	for _, r := range reqs {
		want += len(r.want)
	}
	recs := auditOf(t, h, bridge.AuditFilter{}, want)
	byRequest := map[string][]bridge.AuditRecord{}
	for _, r := range recs {
		byRequest[r.RequestID] = append(byRequest[r.RequestID], r)
	}
	for _, s := range reqs {
		got := map[string]string{}
		for _, r := range byRequest[s.rid] {
			got[r.SwitchID] = r.Outcome
			if r.InstallationID != g.InstallationID() || r.ClientID != app.ClientID || r.UserID != alice.ID {
				t.Errorf("%s: record %+v, want installation %s, app %s, user %d", s.what, r, g.InstallationID(), app.ClientID, alice.ID)
			}
			if cmd := s.what[strings.LastIndex(s.what, "/")+1:]; string(r.Command) != cmd {
				t.Errorf("%s: record of command %q", s.what, r.Command)
			}
			if r.Outcome == "timeout" && r.Latency < 300*time.Millisecond {
				t.Errorf("%s: the timed-out switch took %s, want the whole command_timeout", s.what, r.Latency)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(s.want) {
			t.Errorf("%s (X-Request-Id %s): audit records %v, want %v", s.what, s.rid, got, s.want)
		}
	}

	// Filters: one switch, one installation.
	if got := auditOf(t, h, bridge.AuditFilter{SwitchID: "pump"}, 3); got[0].Outcome != "rate_limited" {
		t.Errorf("the pump's newest record %+v, want the refusal past its cap", got[0])
	}
	bobs := h.Authorize(t, app, "bob", "bob-pw", 2, "garage-light")
	if p := h.Command(t, bobs, "on"); p.StatusCode != http.StatusNoContent {
		t.Fatalf("bob's command = %d %s", p.StatusCode, p.Body)
	}
	auditOf(t, h, bridge.AuditFilter{InstallationID: bobs.InstallationID()}, 1)
	auditOf(t, h, bridge.AuditFilter{InstallationID: g.InstallationID()}, want)

	// The connected apps page: each of alice's apps with its last five
	// actions, by switch name; bob's never.
	page := h.NewBrowser().ConnectedApps(t, "alice", "alice-pw")
	section := regexp.MustCompile(`(?s)<section class="app" id="app-` + g.InstallationID() + `">.*?</section>`).FindString(page.Body)
	actions := regexp.MustCompile(`(?s)<dd class="actions">.*?</dd>`).FindString(section)
	items := regexp.MustCompile(`<li>.*?</li>`).FindAllString(actions, -1)
	if len(items) != 5 {
		t.Fatalf("the page shows %d actions of alice's app, want its last 5:\n%s", len(items), section)
	}
	for _, want := range []string{
		`<span class="action-switch">Water pump</span> <span class="command">off</span>: <span class="outcome failed">refused: switched too often</span>`,
		`<span class="action-switch">Water pump</span> <span class="command">on</span>: <span class="outcome">done</span>`,
		`<span class="action-switch">Doorbell chime</span> <span class="command">off</span>: <span class="outcome failed">refused: the switch cannot do this</span>`,
		`<span class="action-switch">Hall lamp</span> <span class="command">off</span>: <span class="outcome failed">refused: it may only see this switch</span>`,
		`<span class="action-switch">Slow plug</span> <span class="command">on</span>: <span class="outcome failed">no answer from the device</span>`,
	} {
		if !slices.ContainsFunc(items, func(li string) bool { return strings.Contains(li, want) }) {
			t.Errorf("the page's actions lack %s:\n%s", want, actions)
		}
	}
	if strings.Contains(page.Body, "Garage light</span>") {
		t.Errorf("alice's page shows bob's action:\n%s", page.Body)
	}
	bobsPage := h.NewBrowser().ConnectedApps(t, "bob", "bob-pw")
	if !strings.Contains(bobsPage.Body, `<span class="action-switch">Garage light</span> <span class="command">on</span>: <span class="outcome">done</span>`) ||
		strings.Contains(bobsPage.Body, "Water pump") {
		t.Errorf("bob's page does not show his one action alone:\n%s", bobsPage.Body)
	}
}
