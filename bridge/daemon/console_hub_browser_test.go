// Built without the race detector, as console_browser_test.go is.

//go:build !race

package daemon_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// The hub's pages of the owner's console (bridge/console: switches,
// devices) in a real Chromium against a real daemon, its plugs simulated
// on a real Mosquitto or on the daemon's embedded broker: each action's
// effect checked on the switchboard, the simulated plug, the audit log
// and the config file.

// consoleSwitchesConfig is a hub with a Tasmota plug on Mosquitto (BROKER
// is its URL), a relay to confirm, and a switch whose name is markup.
const consoleSwitchesConfig = `
server:
  listen: 127.0.0.1:0
  metrics_listen: "off"
data_dir: %q
mqtt:
  broker: BROKER
  client_id: console-hub
locations:
  - id: 1
    name: Home
    switches:
      - {id: kitchen, name: Kitchen light, driver: mqtt, profile: tasmota, topic: kitchen}
      - {id: pump, name: Water pump, driver: virtual, initial: off, confirm: true}
      - {id: evil, name: "<script>alert(1)</script>", driver: virtual, initial: off, confirm: true}
  - id: 2
    name: Garage
    switches:
      - {id: garage-light, name: Garage light, driver: virtual, initial: on}
`

// TestBrowserConsoleSwitches: the switches page follows a plug changed at
// the device without a reload; its buttons switch the plug, each command
// in the audit log as the console's; a switch marked confirm asks first;
// a switch named with markup shows it as text and runs nothing.
func TestBrowserConsoleSwitches(t *testing.T) {
	exe := findBrowser(t)
	b := mqtttest.StartMosquitto(t)
	plug := mqtttest.NewTasmota(t, b.URL, mqtttest.TasmotaOptions{Topic: "kitchen"})
	h := startConsoleHub(t, strings.Replace(consoleSwitchesConfig, "BROKER", b.URL, 1))
	browser := startBrowserFor(t, exe, consoleTestTimeout)
	ctx := context.Background()
	olivia, err := h.Accounts.UserByName(ctx, "olivia")
	if err != nil {
		t.Fatal(err)
	}

	p := newConsolePage(t, browser, h)
	dl := p.answerDialogs()
	p.openConsole("/console/switches", "olivia", ownerPassword)
	p.waitField("kitchen", "available", "yes")
	p.waitLive()
	p.checkPage("switches")

	// A change at the device, on the open page.
	{
		evaluate[int](p.page, `window.stillThisPage = 42, 0`)
		plug.Set(true) // its button
		p.waitField("kitchen", "value", "on")
		plug.Sensor(42.5, 230, 0.2, 1.5)
		p.waitField("kitchen", "power", "42.5 W")
		if got := evaluate[int](p.page, `window.stillThisPage ?? 0`); got != 42 {
			p.fatalf("the page was loaded again to show the change")
		}
	}

	// The buttons switch the plug, each command the console's in the audit log.
	{
		for _, cmd := range []string{"off", "on"} {
			notice, problem := p.submit("switch the kitchen "+cmd, `form[action="/console/switches/kitchen/`+cmd+`"] button`)
			if want := "Kitchen light is " + cmd + "."; notice != want || problem != "" {
				p.fatalf("switching the kitchen %s: notice %q, error %q; want %q", cmd, notice, problem, want)
			}
			if plug.On() != (cmd == "on") {
				t.Errorf("the page switched the kitchen %s; the plug is on: %v", cmd, plug.On())
			}
			if got := switchValue(t, h, "kitchen"); got != bridge.Value(cmd) {
				t.Errorf("the hub has the kitchen %q after %s", got, cmd)
			}
		}
		recs := auditRecords(t, h, "kitchen", 2)
		for _, r := range recs {
			if r.InstallationID != console.ConsoleInstallation || r.ClientID != console.ConsoleInstallation || r.UserID != olivia.ID ||
				r.Outcome != bridge.OutcomeOK || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(r.RequestID) {
				t.Errorf("audit record %+v, want the console's, by olivia (%d), ok, with a request id", r, olivia.ID)
			}
		}
		if recs[0].RequestID == recs[1].RequestID {
			t.Error("two console commands have the same request id")
		}
		if got := dl.confirmations(); len(got) != 0 {
			t.Errorf("the kitchen, not marked confirm, asked %q", got)
		}
	}

	// A switch marked confirm asks first.
	{
		notice, problem := p.submit("switch the pump on", `form[action="/console/switches/pump/on"] button`)
		if notice != "Water pump is on." || problem != "" {
			p.fatalf("switching the pump on: notice %q, error %q", notice, problem)
		}
		if got := dl.confirmations(); !slices.Equal(got, []string{"Switch Water pump on?"}) {
			t.Errorf("the pump (confirm: true) asked %q before switching", got)
		}
		if got := switchValue(t, h, "pump"); got != bridge.On {
			t.Errorf("the pump is %q after the owner said yes", got)
		}
	}

	// A name with markup in it is text.
	{
		const evil = "<script>alert(1)</script>"
		if n := p.count("main script"); n != 0 {
			p.fatalf("the switches page holds %d script elements with a switch named %s", n, evil)
		}
		if got := p.optText(`tr[data-switch="evil"] td`); !strings.HasPrefix(got, evil) {
			p.fatalf("the switch's name cell says %q, want the name as text", got)
		}
		notice, problem := p.submit("switch it on", `form[action="/console/switches/evil/on"] button`)
		if notice != evil+" is on." || problem != "" {
			p.fatalf("switching it on: notice %q, error %q", notice, problem)
		}
		if got := dl.confirmations(); len(got) != 2 || got[1] != "Switch "+evil+" on?" {
			t.Errorf("its confirmation asked %q, want the name as text", got)
		}
		if n := p.count("main script"); n != 0 {
			p.fatalf("the page with the notice naming it holds %d script elements", n)
		}
	}
}

// consoleLimitsConfig is a hub whose installations (and owners at the
// console) may send 3 commands an hour, with a relay capped to one
// change an hour.
const consoleLimitsConfig = `
server:
  listen: 127.0.0.1:0
  metrics_listen: "off"
  rate_limit: {requests: 3, per: 1h}
data_dir: %q
locations:
  - id: 1
    name: Home
    switches:
      - {id: capped, name: Capped relay, driver: virtual, initial: off, max_changes: {burst: 1, per: 1h}}
      - {id: free, name: Free lamp, driver: virtual, initial: off}
  - id: 2
    name: Garage
    switches: []
`

// TestBrowserConsoleLimits: a command at the console counts against the
// installation API's rate limit, under the owner's own key, and against
// the switch's max_changes; each refusal is shown and switches nothing.
func TestBrowserConsoleLimits(t *testing.T) {
	exe := findBrowser(t)
	h := startConsoleHub(t, consoleLimitsConfig)
	browser := startBrowserFor(t, exe, consoleTestTimeout)
	p := newConsolePage(t, browser, h)
	p.openConsole("/console/switches", "olivia", ownerPassword)

	steps := []struct {
		id, cmd string
		refusal string // "" when it goes through
		want    bridge.Value
	}{
		{"capped", "on", "", bridge.On},
		{"capped", "off", "capped", bridge.On}, // its max_changes
		{"free", "on", "", bridge.On},
		{"free", "off", "rate limit exceeded: at most 3 commands per", bridge.On}, // the fourth command of the hour
	}
	for _, s := range steps {
		notice, problem := p.submit("switch "+s.id+" "+s.cmd, `form[action="/console/switches/`+s.id+`/`+s.cmd+`"] button`)
		switch {
		case s.refusal == "" && (problem != "" || notice == ""):
			p.fatalf("switching %s %s: notice %q, error %q; want it done", s.id, s.cmd, notice, problem)
		case s.refusal != "" && (notice != "" || !strings.Contains(problem, s.refusal)):
			p.fatalf("switching %s %s: notice %q, error %q; want a refusal saying %q", s.id, s.cmd, notice, problem, s.refusal)
		}
		if got := switchValue(t, h, s.id); got != s.want {
			t.Errorf("after %s %s, %s is %q, want %q", s.id, s.cmd, s.id, got, s.want)
		}
	}
	// The cap's refusal is in the audit log, as the switchboard records
	// one; the rate limit's is not, as the API's is not.
	for id, want := range map[string][]string{"capped": {bridge.OutcomeOK, bridge.FailRateLimited}, "free": {bridge.OutcomeOK}} {
		var got []string
		recs := auditRecords(t, h, id, len(want))
		for _, r := range recs {
			got = append(got, r.Outcome)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("the audit log's outcomes for %s: %q, want %q", id, got, want)
		}
	}
}

// consoleAdoptConfig is a hub with the embedded broker (MQTT is its
// listen address; it runs for the hall's plug) and a shared login a plug
// may announce itself with.
const consoleAdoptConfig = `# The owner's hub: comments stay.
server:
  listen: 127.0.0.1:0
  metrics_listen: "off"
data_dir: %q
mqtt:
  broker: embedded
  listen: MQTT
  users:
    onboard: setup-pw   # any plug, while setting up
locations:
  - id: 1
    name: Home
    switches:
      - {id: hall, name: Hall, driver: mqtt, profile: tasmota, topic: tas_hall}
      - {id: lamp, name: Lamp, driver: virtual}
  - id: 2
    name: Shed
    switches: []
`

// TestBrowserConsoleAdopt: a Tasmota announces itself on the embedded
// broker and is listed on the devices page; Adopt adds it to the config
// file as switchbridge devices adopt does (its entry and a login of its
// own, the password shown once, the previous file kept), the daemon
// reloads itself, and once the plug logs in with its new login it
// switches from the switches page; the overview counts the broker's
// clients.
func TestBrowserConsoleAdopt(t *testing.T) {
	exe := findBrowser(t)
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	h, path := startConsoleHubFile(t, strings.Replace(consoleAdoptConfig, "MQTT", addr, 1))
	original, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := mqtttest.TasmotaOptions{Topic: "tas_kitchen", Discovery: true}
	plug := mqtttest.NewTasmota(t, "tcp://onboard:setup-pw@"+addr, opts)
	device := "tasmota-" + mqtttest.TasmotaMAC(opts)
	browser := startBrowserFor(t, exe, consoleTestTimeout)

	p := newConsolePage(t, browser, h)
	p.openConsole("/console/devices", "olivia", ownerPassword)
	form := fmt.Sprintf(`form[action="/console/devices/adopt"]:has(input[name=device][value=%q])`, device)
	// The hub writes what it discovered at most once a second.
	for deadline := time.Now().Add(15 * time.Second); p.count(form) == 0; {
		if time.Now().After(deadline) {
			p.fatalf("the announced plug %s is not listed", device)
		}
		time.Sleep(200 * time.Millisecond)
		p.openConsole("/console/devices", "olivia", ownerPassword)
	}
	p.checkPage("devices")

	p.do("fill in the adoption",
		chromedp.SendKeys(chromedp.CSS(form+` input[name=id]`), "kitchen"),
		chromedp.SendKeys(chromedp.CSS(form+` input[name=name]`), "Kitchen plug"))
	notice, problem := p.submit("adopt the plug", form+` button[type=submit]`)
	if !strings.Contains(notice, "Switch kitchen added to location 1 in "+path+" (the previous file is "+path+".bak); the hub reloaded and serves it.") ||
		!strings.Contains(notice, "logs in to the hub's broker as kitchen") || problem != "" {
		p.fatalf("adopting: notice %q, error %q", notice, problem)
	}
	password := p.optText("main .secret-value")
	logtest.NoteSecret(password) // never in the hub's log: checked when it stops
	if !regexp.MustCompile(`^[A-Za-z0-9]{22}$`).MatchString(password) {
		p.fatalf("the adoption's answer shows the password %q, want a new login's", password)
	}
	p.checkPage("devices-adopted")

	// The file as devices adopt leaves it: two lines more, the rest as
	// the owner wrote it; the previous file beside it.
	want := strings.Replace(string(original), "      - {id: lamp, name: Lamp, driver: virtual}\n",
		"      - {id: lamp, name: Lamp, driver: virtual}\n      - {id: kitchen, name: Kitchen plug, driver: mqtt, profile: tasmota, topic: tas_kitchen}\n", 1)
	want = strings.Replace(want, "    onboard: setup-pw   # any plug, while setting up\n",
		"    onboard: setup-pw   # any plug, while setting up\n    kitchen: {password: "+password+", switches: [kitchen]}\n", 1)
	if got, _ := os.ReadFile(path); string(got) != want {
		t.Errorf("the adopted config:\n%s\nwant:\n%s", got, want)
	}
	if bak, _ := os.ReadFile(path + ".bak"); string(bak) != string(original) {
		t.Errorf("the backup is not the file before the adoption:\n%s", bak)
	}
	if _, ok := h.Switchboard.Switch("kitchen"); !ok {
		t.Fatal("the daemon does not serve the adopted switch: it did not reload")
	}
	if got := p.optText(`main tbody td[data-label=Switch]`); got != "kitchen" {
		t.Errorf("the devices page shows the adopted plug's switch as %q, want kitchen", got)
	}

	// The owner sets the plug to its own login, and switches it.
	plug.Crash()
	plug = mqtttest.NewTasmota(t, "tcp://kitchen:"+password+"@"+addr, opts)
	p.openConsole("/console/switches", "olivia", ownerPassword)
	p.waitField("kitchen", "available", "yes")
	notice, problem = p.submit("switch the adopted plug on", `form[action="/console/switches/kitchen/on"] button`)
	if notice != "Kitchen plug is on." || problem != "" {
		p.fatalf("switching the adopted plug on: notice %q, error %q", notice, problem)
	}
	if !plug.On() {
		t.Error("the page said on, the plug is off")
	}

	p.openConsole("/console/", "olivia", ownerPassword)
	facts := p.text("main dl")
	for _, w := range []string{"MQTT broker\nconnected to tcp://" + addr, "Embedded broker\n1 clients connected"} {
		if !strings.Contains(facts, w) {
			t.Errorf("the overview does not say %q:\n%s", w, facts)
		}
	}
}

// startConsoleHubFile is startConsoleHub over a config file of its own
// (configText's %q is the data directory), which the console's adoption
// edits and the daemon reloads; it returns the file's path.
func startConsoleHubFile(t *testing.T, configText string) (*consoleHub, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(configText, filepath.Join(dir, "data"))), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return startConsoleHubWith(t, cfg), path
}

// auditRecords waits until the hub's audit log holds n records of switch
// id and returns them: a command's records reach the database with the
// next batch the value writer stores.
func auditRecords(t *testing.T, h *consoleHub, id string, n int) []bridge.AuditRecord {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, err := h.HubStore.Audit(context.Background(), bridge.AuditFilter{SwitchID: id})
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) >= n || time.Now().After(deadline) {
			if len(recs) != n {
				t.Fatalf("the audit log holds %d records of %s after 10 s, want %d: %+v", len(recs), id, n, recs)
			}
			return recs
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// switchValue is the hub's value of switch id.
func switchValue(t *testing.T, h *consoleHub, id string) bridge.Value {
	t.Helper()
	sts, err := h.Switchboard.States([]string{id})
	if err != nil {
		t.Fatal(err)
	}
	return sts[0].State.Value
}

// waitLive waits until the switches page's values follow the hub's
// feed: its event stream is open.
func (p *consolePage) waitLive() {
	p.t.Helper()
	p.waitFor("the page's values to go live", "#live-status", "Live: values update as they change.")
}

// waitField waits until the switches page shows want in field of switch
// id's row.
func (p *consolePage) waitField(id, field, want string) {
	p.t.Helper()
	p.waitFor(fmt.Sprintf("%s's %s to be %q", id, field, want), fmt.Sprintf(`tr[data-switch=%q] [data-field=%q]`, id, field), want)
}

// waitFor waits, at most 10 s, until the text of selector is want.
func (p *consolePage) waitFor(what, selector, want string) {
	p.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := p.optText(selector)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			p.fatalf("waiting for %s: it says %q", what, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
