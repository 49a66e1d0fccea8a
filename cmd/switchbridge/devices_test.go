package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/mqtt"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// adoptConfig is a hub's config as an owner writes it: comments
// everywhere, a blank line, quoting and a block-style switch, which adopt
// must keep byte for byte.
const adoptConfig = `# The hall hub.
server:
  listen: %s   # the API
  metrics_listen: "off"
data_dir: %s

mqtt:
  broker: embedded
  listen: %s
  users:
    # one login per plug
    hall: {password: "s1", switches: [hall]}
    onboard: setup-pw   # any plug, while setting up
locations:
  - id: 1
    name: Home
    switches:
      # the hall light
      - {id: hall, name: Hall, driver: mqtt, profile: tasmota, topic: tas_hall}
      - id: lamp
        name: 'Lamp'
        driver: virtual   # on the desk

    # more switches below, one day
  - id: 2
    name: Shed
    switches: []
`

// writeAdoptConfig writes adoptConfig and returns its path and text.
func writeAdoptConfig(t *testing.T, dir string) (string, string, string) {
	t.Helper()
	mqttAddr := freePort(t)
	path := filepath.Join(dir, "config.yaml")
	text := fmt.Sprintf(adoptConfig, freePort(t), filepath.Join(dir, "data"), mqttAddr)
	if err := os.WriteFile(path, []byte(text), 0o640); err != nil {
		t.Fatal(err)
	}
	return path, text, mqttAddr
}

// seedDiscovered writes the discovered devices as the running hub does.
func seedDiscovered(t *testing.T, dataDir string, devs ...bridge.DiscoveredDevice) {
	t.Helper()
	db, err := store.Open(context.Background(), dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := hubstore.New(db).ReplaceDiscoveredDevices(context.Background(), devs); err != nil {
		t.Fatal(err)
	}
}

var online = true

var (
	kitchenDevice = bridge.DiscoveredDevice{ID: "tasmota-A4CF12000001", Firmware: "tasmota", Model: "Sonoff Basic", Name: "Kitchen",
		Version: "14.4.1", CommandTopic: "cmnd/tas_kitchen/POWER", StateTopic: "stat/tas_kitchen/POWER", AvailabilityTopic: "tele/tas_kitchen/LWT",
		Online: &online, Entry: "{id: kitchen, name: Kitchen, driver: mqtt, profile: tasmota, topic: tas_kitchen}", LastSeen: time.Now()}
	// hallDevice is the plug switch hall uses already.
	hallDevice = bridge.DiscoveredDevice{ID: "tasmota-A4CF12000002", Firmware: "tasmota", Name: "Hall plug",
		Entry: "{id: hall-plug, name: Hall plug, driver: mqtt, profile: tasmota, topic: tas_hall}", LastSeen: time.Now()}
	// brokenDevice's entry builds no plug: the config would not pass.
	brokenDevice = bridge.DiscoveredDevice{ID: "tasmota-A4CF12000003", Firmware: "tasmota",
		Entry: "{id: broken, name: Broken, driver: mqtt, profile: tasmota}", LastSeen: time.Now()}
)

func TestDevicesList(t *testing.T) {
	dir := t.TempDir()
	cfg, _, _ := writeAdoptConfig(t, dir)
	seedDiscovered(t, filepath.Join(dir, "data"), kitchenDevice, hallDevice)

	r := runCLI(t, "", "devices", "--json", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("devices --json: %+v", r)
	}
	var got []deviceJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got) != 2 {
		t.Fatalf("devices --json = %s (%v)", r.stdout, err)
	}
	if k := got[0]; k.ID != kitchenDevice.ID || k.Firmware != "tasmota" || k.Model != "Sonoff Basic" || k.Name != "Kitchen" ||
		k.Topics.Command != "cmnd/tas_kitchen/POWER" || k.Online == nil || !*k.Online || k.Entry != kitchenDevice.Entry || k.UsedBy != "" {
		t.Errorf("kitchen = %+v", k)
	}
	// In use by hall, whose entry in the config file has another id and
	// name but the same topic.
	if h := got[1]; h.ID != hallDevice.ID || h.UsedBy != "hall" || h.Online != nil {
		t.Errorf("hall plug = %+v, want used by hall, online unknown", h)
	}

	r = runCLI(t, "", "devices", "--config", cfg)
	for _, want := range []string{
		"tasmota-A4CF12000001  tasmota Sonoff Basic 14.4.1  online",
		"  entry         " + kitchenDevice.Entry,
		"  adopt with    switchbridge devices adopt tasmota-A4CF12000001 --location N",
		"  in use by switch hall",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("devices does not say %q:\n%s", want, r.stdout)
		}
	}
}

// TestDevicesAdopt adopts a device into a commented config: every
// refusal leaves the file as it was, and the adoption inserts the entry
// and the login and changes no other byte.
func TestDevicesAdopt(t *testing.T) {
	dir := t.TempDir()
	cfg, original, _ := writeAdoptConfig(t, dir)
	seedDiscovered(t, filepath.Join(dir, "data"), kitchenDevice, hallDevice, brokenDevice)

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown device", []string{"tasmota-FFFFFFFFFFFF", "--location", "1"}, `no discovered device has the id "tasmota-FFFFFFFFFFFF": switchbridge devices lists them`},
		{"device in use", []string{hallDevice.ID, "--location", "1"}, `device tasmota-A4CF12000002 is already switch "hall" of ` + cfg},
		{"no such location", []string{kitchenDevice.ID, "--location", "9"}, "location 9 is not in " + cfg + " (its locations: 1 (Home), 2 (Shed))"},
		{"switch id taken", []string{kitchenDevice.ID, "--location", "1", "--id", "lamp"}, `switch id "lamp" is taken (location 1): give the new switch another id`},
		{"config would not pass", []string{brokenDevice.ID, "--location", "1"}, "the config would not pass check-config with the device adopted, so it was left as it was"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := runCLI(t, "", append([]string{"devices", "adopt", "--config", cfg}, tt.args...)...)
			if r.code != 1 || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("adopt %v = %d %q, want 1 and %q", tt.args, r.code, r.stderr, tt.want)
			}
			if body, _ := os.ReadFile(cfg); string(body) != original {
				t.Errorf("the refused adoption changed the config:\n%s", body)
			}
			if _, err := os.Stat(cfg + ".bak"); !os.IsNotExist(err) {
				t.Errorf("a refused adoption wrote a backup (%v)", err)
			}
		})
	}
	if r := runCLI(t, "", "devices", "adopt", brokenDevice.ID, "--location", "1", "--config", cfg); !strings.Contains(r.stderr, `switch "broken"`) {
		t.Errorf("the refusal of a config that would not pass does not say why: %q", r.stderr)
	}

	r := runCLI(t, "", "devices", "adopt", kitchenDevice.ID, "--location", "1", "--name", "Kitchen light", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("adopt: %+v", r)
	}
	m := regexp.MustCompile(`broker login kitchen created for it, password ([A-Za-z0-9]{22}) \(shown only now`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("adopt does not print the new login's password: %s", r.stdout)
	}
	for _, want := range []string{
		"switch kitchen added to location 1 (Home) in " + cfg + " (the previous file is " + cfg + ".bak)",
		"next: sudo systemctl reload switchbridge",
		"switchbridge devices setup kitchen",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("adopt does not say %q:\n%s", want, r.stdout)
		}
	}
	// The golden file: the original with two lines inserted, one after the
	// last switch of location 1 (a block mapping ending in a comment), one
	// after the last login.
	want := strings.Replace(original, "        driver: virtual   # on the desk\n",
		"        driver: virtual   # on the desk\n      - {id: kitchen, name: Kitchen light, driver: mqtt, profile: tasmota, topic: tas_kitchen}\n", 1)
	want = strings.Replace(want, "    onboard: setup-pw   # any plug, while setting up\n",
		"    onboard: setup-pw   # any plug, while setting up\n    kitchen: {password: "+m[1]+", switches: [kitchen]}\n", 1)
	got, _ := os.ReadFile(cfg)
	if string(got) != want {
		t.Errorf("adopted config:\n%s\nwant:\n%s", got, want)
	}
	if bak, _ := os.ReadFile(cfg + ".bak"); string(bak) != original {
		t.Errorf("backup differs from the original:\n%s", bak)
	}
	for _, f := range []string{cfg, cfg + ".bak"} {
		if fi, err := os.Stat(f); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("%s: mode %v (%v), want the config's 0640", f, fi.Mode(), err)
		}
	}
	if r := runCLI(t, "", "check-config", "--config", cfg); r.code != 0 {
		t.Errorf("check-config after adopt: %+v", r)
	}
	// Now in use.
	r = runCLI(t, "", "devices", "adopt", kitchenDevice.ID, "--location", "2", "--config", cfg)
	if r.code != 1 || !strings.Contains(r.stderr, `already switch "kitchen"`) {
		t.Errorf("second adoption: %+v", r)
	}

	// Into a location whose switches are [], with an id of the owner's.
	seedDiscovered(t, filepath.Join(dir, "data"), kitchenDevice, bridge.DiscoveredDevice{ID: "esphome-shed-relay", Firmware: "esphome",
		Entry: "{id: shed-relay, name: Relay, driver: mqtt, profile: esphome, prefix: shed, object_id: relay}"})
	before, _ := os.ReadFile(cfg)
	r = runCLI(t, "", "devices", "adopt", "esphome-shed-relay", "--location", "2", "--id", "pump", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("adopt into []: %+v", r)
	}
	m = regexp.MustCompile(`broker login pump created for it, password (\S+) `).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("adopt: %s", r.stdout)
	}
	want = strings.Replace(string(before), "    switches: []\n",
		"    switches:\n      - {id: pump, name: Relay, driver: mqtt, profile: esphome, prefix: shed, object_id: relay}\n", 1)
	want = strings.Replace(want, "switches: [kitchen]}\n", "switches: [kitchen]}\n    pump: {password: "+m[1]+", switches: [pump]}\n", 1)
	if got, _ := os.ReadFile(cfg); string(got) != want {
		t.Errorf("adopted into []:\n%s\nwant:\n%s", got, want)
	}
	if bak, _ := os.ReadFile(cfg + ".bak"); string(bak) != string(before) {
		t.Errorf("the backup is not the file before this adoption")
	}
}

// TestDevicesAdoptZigbeeSharesTheBridgeLogin: a second device behind the
// same Zigbee2MQTT bridge is served by the bridge's login.
func TestDevicesAdoptZigbeeSharesTheBridgeLogin(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	text := fmt.Sprintf(`server:
  listen: %s
  metrics_listen: "off"
data_dir: %s
mqtt:
  broker: embedded
  listen: %s
  users:
    zigbee: {password: z1, switches: [desk]}
locations:
  - id: 1
    name: Home
    switches:
      - {id: desk, name: Desk, driver: mqtt, profile: zigbee2mqtt, friendly_name: desk}
`, freePort(t), filepath.Join(dir, "data"), freePort(t))
	os.WriteFile(cfg, []byte(text), 0o600)
	seedDiscovered(t, filepath.Join(dir, "data"), bridge.DiscoveredDevice{ID: "zigbee-0x00124b0001", Firmware: "zigbee2mqtt",
		Entry: "{id: hall, name: Hall, driver: mqtt, profile: zigbee2mqtt, base_topic: zigbee2mqtt, friendly_name: hall}"})
	r := runCLI(t, "", "devices", "adopt", "zigbee-0x00124b0001", "--location", "1", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "broker login zigbee now serves it too") || strings.Contains(r.stdout, "password") {
		t.Fatalf("adopt: %+v", r)
	}
	want := strings.Replace(text, "switches: [desk]}", "switches: [desk, hall]}", 1)
	want = strings.Replace(want, "friendly_name: desk}\n", "friendly_name: desk}\n      - {id: hall, name: Hall, driver: mqtt, profile: zigbee2mqtt, base_topic: zigbee2mqtt, friendly_name: hall}\n", 1)
	if got, _ := os.ReadFile(cfg); string(got) != want {
		t.Errorf("config:\n%s\nwant:\n%s", got, want)
	}
}

func TestDevicesSetup(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "config.yaml")
	mqttPort := strings.Split(freePort(t), ":")[1]
	os.WriteFile(cfg, []byte(fmt.Sprintf(`server:
  listen: %s
  public_url: http://192.0.2.10:8080
  metrics_listen: "off"
data_dir: %s
mqtt:
  broker: embedded
  listen: 0.0.0.0:%s
  users:
    tas: {password: pw-tas, switches: [tas]}
    sh1: {password: pw-sh1, switches: [sh1]}
    sh2: {password: pw-sh2, switches: [sh2]}
    zigbee: {password: pw-z, switches: [desk]}
    esp: {password: pw-esp, switches: [pump]}
locations:
  - id: 1
    name: Home
    switches:
      - {id: tas, name: T, driver: mqtt, profile: tasmota, topic: tas_kitchen}
      - {id: sh1, name: S1, driver: mqtt, profile: shelly-gen1, device_id: shelly1-A1B2C3}
      - {id: sh2, name: S2, driver: mqtt, profile: shelly-rpc, prefix: shellyplus1-a8032ab12345}
      - {id: desk, name: D, driver: mqtt, profile: zigbee2mqtt, friendly_name: desk}
      - {id: pump, name: P, driver: mqtt, profile: esphome, prefix: shed, object_id: relay}
      - {id: lamp, name: L, driver: virtual}
`, freePort(t), filepath.Join(dir, "data"), mqttPort)), 0o600)

	for _, tt := range []struct {
		id   string
		show bool
		want []string
	}{
		{"tas", false, []string{"Tools > Console", "  Backlog MqttHost 192.0.2.10; MqttPort " + mqttPort + "; MqttUser tas; MqttPassword <the password of mqtt.users.tas, or run with --show-password>; Topic tas_kitchen\n"}},
		{"tas", true, []string{"  Backlog MqttHost 192.0.2.10; MqttPort " + mqttPort + "; MqttUser tas; MqttPassword pw-tas; Topic tas_kitchen\n"}},
		{"sh1", true, []string{"Advanced - Developer Settings", "  Server:   192.0.2.10:" + mqttPort + "\n", "  Username: sh1\n", "  Password: pw-sh1\n",
			"curl 'http://DEVICE/settings?mqtt_enable=true&mqtt_server=192.0.2.10:" + mqttPort + "&mqtt_user=sh1&mqtt_pass=pw-sh1'"}},
		{"sh2", true, []string{"Settings > MQTT", "  MQTT prefix:         shellyplus1-a8032ab12345\n",
			`"method":"MQTT.SetConfig","params":{"config":{"enable":true,"server":"192.0.2.10:` + mqttPort + `","user":"sh2","pass":"pw-sh2","topic_prefix":"shellyplus1-a8032ab12345","rpc_ntf":true}}`}},
		{"desk", true, []string{"configuration.yaml", "  mqtt:\n    base_topic: zigbee2mqtt\n    server: mqtt://192.0.2.10:" + mqttPort + "\n    user: zigbee\n    password: pw-z\n"}},
		{"pump", false, []string{"  mqtt:\n    broker: 192.0.2.10\n    port: " + mqttPort + "\n    username: esp\n    password: <the password of mqtt.users.esp, or run with --show-password>\n    topic_prefix: shed\n    discovery: true\n"}},
	} {
		args := []string{"devices", "setup", tt.id, "--config", cfg}
		if tt.show {
			args = append(args, "--show-password")
		}
		r := runCLI(t, "", args...)
		if r.code != 0 {
			t.Errorf("setup %s: %+v", tt.id, r)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(r.stdout, w) {
				t.Errorf("setup %s (show %v) does not say %q:\n%s", tt.id, tt.show, w, r.stdout)
			}
		}
		if !tt.show && strings.Contains(r.stdout, "pw-") {
			t.Errorf("setup %s printed a password without --show-password:\n%s", tt.id, r.stdout)
		}
	}
	if r := runCLI(t, "", "devices", "setup", "lamp", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, "switch lamp has driver virtual") {
		t.Errorf("setup of a virtual switch: %+v", r)
	}
	if r := runCLI(t, "", "devices", "setup", "nope", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, `no switch "nope"`) {
		t.Errorf("setup of an unknown switch: %+v", r)
	}

	// An external broker: its address, and the login is the owner's.
	ext := filepath.Join(dir, "ext.yaml")
	os.WriteFile(ext, []byte(fmt.Sprintf(`server: {listen: %s, metrics_listen: "off"}
data_dir: %s
mqtt: {broker: "tcp://192.0.2.5:1884"}
locations:
  - {id: 1, name: Home, switches: [{id: tas, name: T, driver: mqtt, profile: tasmota, topic: tas_kitchen}]}
`, freePort(t), filepath.Join(dir, "data2"))), 0o600)
	r := runCLI(t, "", "devices", "setup", "tas", "--config", ext)
	if r.code != 0 || !strings.Contains(r.stdout, "Backlog MqttHost 192.0.2.5; MqttPort 1884; MqttUser <the device's login on your broker>; MqttPassword <its password>; Topic tas_kitchen") ||
		!strings.Contains(r.stdout, "the broker is your own (tcp://192.0.2.5:1884)") {
		t.Errorf("setup on an external broker: %+v", r)
	}
}

// TestDevicesAdoptThenReload is the owner's whole path with the real
// daemon: a Tasmota announces itself on the embedded broker, devices lists
// it, adopt adds it, a reload serves it, the plug logs in with its new
// login, and an app switches it.
func TestDevicesAdoptThenReload(t *testing.T) {
	dir := t.TempDir()
	cfg, _, mqttAddr := writeAdoptConfig(t, dir)
	app := addDeveloperApp(t, cfg, "1")
	p := startServe(t, cfg, serveOptions{moved: func(key, _, to string) {
		if key == "mqtt.listen" {
			mqttAddr = to
		}
	}})
	opts := mqtttest.TasmotaOptions{Topic: "tas_kitchen", Discovery: true}
	plug := mqtttest.NewTasmota(t, "tcp://onboard:setup-pw@"+mqttAddr, opts)
	id := "tasmota-" + mqtttest.TasmotaMAC(opts)

	// The hub writes what it discovered at most once a second.
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := runCLI(t, "", "devices", "--json", "--config", cfg)
		if strings.Contains(r.stdout, `"id": "`+id+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the announced plug is not listed: %+v\n%s", r, p.stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	r := runCLI(t, "", "devices", "adopt", id, "--location", "1", "--id", "kitchen", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("adopt: %+v", r)
	}
	m := regexp.MustCompile(`broker login (\S+) created for it, password (\S+) `).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("adopt: %s", r.stdout)
	}
	r0 := r.stdout
	r = runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "kitchen", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install: %+v", r)
	}

	// It connected for its announcement under the shared login onboard,
	// which its client id was bound to: adopt hands the id to its own.
	if !strings.Contains(r0, "client id DVES_tas_kitchen, which the device announced itself with, now belongs to login "+m[1]) ||
		strings.Contains(r0, "release-client-id") {
		t.Errorf("adopt does not say the client id moved to the new login (or still asks to free it):\n%s", r0)
	}
	reloaded := time.Now()
	p.cmd.Process.Signal(syscall.SIGHUP)
	// The owner sets the plug as devices setup says: its own login.
	plug.Crash()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", p.stderr)
		}
	})
	plug = mqtttest.NewTasmota(t, "tcp://"+m[1]+":"+m[2]+"@"+mqttAddr, opts)
	var answered time.Duration
	for deadline := time.Now().Add(15 * time.Second); ; {
		code, body := call(t, http.MethodGet, inst.Endpoint+"/switches/kitchen", inst.Token)
		if code == http.StatusOK && strings.Contains(body, `"value":"off"`) {
			answered = time.Since(reloaded)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kitchen not served after the reload: %d %s\n%s", code, body, p.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("the adopted plug answered through the API %v after the reload", answered.Round(time.Millisecond))
	if code, body := call(t, http.MethodPut, inst.Endpoint+"/switches/kitchen/on", inst.Token); code != http.StatusNoContent {
		t.Fatalf("PUT on: %d %s\n%s", code, body, p.stderr)
	}
	if !plug.On() {
		t.Error("the API said on, the plug is off")
	}
}

// TestDevicesListenAdoptThenReload: the onboarding login is refused until
// devices listen opens it; a Tasmota then logs in with it and announces
// itself, and is listed with its client id and login; adopted, the hub
// reloaded and the plug set to its new login, it connects with the same
// client id (no release-client-id) and switches through the API;
// listen --off closes onboarding.
func TestDevicesListenAdoptThenReload(t *testing.T) {
	dir := t.TempDir()
	cfg, _, mqttAddr := writeAdoptConfig(t, dir)
	app := addDeveloperApp(t, cfg, "1")
	p := startServe(t, cfg, serveOptions{moved: func(key, _, to string) {
		if key == "mqtt.listen" {
			mqttAddr = to
		}
	}})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("daemon log:\n%s", p.stderr)
		}
	})
	if onboardingAccepted(mqttAddr, "") {
		t.Error("the onboarding login was accepted before devices listen")
	}
	r := runCLI(t, "", "devices", "listen", "--for", "10m", "--config", cfg)
	if r.code != 0 {
		t.Fatalf("devices listen: %+v", r)
	}
	m := regexp.MustCompile(`(?m)^  password  (\S+) `).FindStringSubmatch(r.stdout)
	if m == nil || !strings.Contains(r.stdout, "login     "+mqtt.OnboardingLogin) || !strings.Contains(r.stdout, "Backlog MqttHost") {
		t.Fatalf("devices listen says:\n%s", r.stdout)
	}
	opts := mqtttest.TasmotaOptions{Topic: "tas_new", Discovery: true}
	plug := mqtttest.NewTasmota(t, "tcp://"+mqtt.OnboardingLogin+":"+m[1]+"@"+mqttAddr, opts)
	id := "tasmota-" + mqtttest.TasmotaMAC(opts)

	var dev struct{ ID, ClientID, Login string }
	for deadline := time.Now().Add(15 * time.Second); dev.ID != id; time.Sleep(100 * time.Millisecond) {
		r := runCLI(t, "", "devices", "--json", "--config", cfg)
		var devs []struct {
			ID       string `json:"id"`
			ClientID string `json:"client_id"`
			Login    string `json:"login"`
		}
		json.Unmarshal([]byte(r.stdout), &devs)
		for _, d := range devs {
			if d.ID == id {
				dev.ID, dev.ClientID, dev.Login = d.ID, d.ClientID, d.Login
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plug onboarding is not listed: %+v", r)
		}
	}
	if dev.ClientID != "DVES_tas_new" || dev.Login != mqtt.OnboardingLogin {
		t.Errorf("listed as announced by client %q, login %q; want DVES_tas_new, %s", dev.ClientID, dev.Login, mqtt.OnboardingLogin)
	}
	r = runCLI(t, "", "devices", "adopt", id, "--location", "1", "--id", "porch", "--config", cfg)
	login := regexp.MustCompile(`broker login (\S+) created for it, password (\S+) `).FindStringSubmatch(r.stdout)
	if r.code != 0 || login == nil || !strings.Contains(r.stdout, "client id DVES_tas_new") || strings.Contains(r.stdout, "release-client-id") {
		t.Fatalf("adopt: %+v", r)
	}
	r = runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "porch", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil {
		t.Fatalf("install: %+v", r)
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	plug.Crash()
	plug = mqtttest.NewTasmota(t, "tcp://"+login[1]+":"+login[2]+"@"+mqttAddr, opts)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		code, body := call(t, http.MethodGet, inst.Endpoint+"/switches/porch", inst.Token)
		if code == http.StatusOK && strings.Contains(body, `"value":"off"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("porch not served after the reload: %d %s", code, body)
		}
	}
	if code, body := call(t, http.MethodPut, inst.Endpoint+"/switches/porch/on", inst.Token); code != http.StatusNoContent {
		t.Fatalf("PUT on: %d %s", code, body)
	}
	if !plug.On() {
		t.Error("the API said on, the plug is off")
	}

	if r := runCLI(t, "", "devices", "listen", "--off", "--config", cfg); r.code != 0 || !strings.Contains(r.stdout, "onboarding closed") {
		t.Errorf("devices listen --off: %+v", r)
	}
	if r := runCLI(t, "", "devices", "listen", "--for", "25h", "--config", cfg); r.code == 0 {
		t.Errorf("devices listen --for 25h: %+v", r)
	}
	if onboardingAccepted(mqttAddr, m[1]) {
		t.Error("the onboarding login was accepted after listen --off")
	}
}

// onboardingAccepted reports whether the broker at addr accepts the
// onboarding login with password pw.
func onboardingAccepted(addr, pw string) bool {
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("onboarding-probe").SetUsername(mqtt.OnboardingLogin).SetPassword(pw).
		SetConnectTimeout(2 * time.Second).SetAutoReconnect(false)
	c := paho.NewClient(o)
	if tok := c.Connect(); tok.WaitTimeout(3*time.Second) && tok.Error() == nil {
		c.Disconnect(0)
		return true
	}
	return false
}

// TestDevicesListenExternalBroker: on the owner's own broker the hub only
// listens: devices listen says so and opens nothing.
func TestDevicesListenExternalBroker(t *testing.T) {
	dir := t.TempDir()
	_, text, mqttAddr := writeAdoptConfig(t, dir)
	embedded := "broker: embedded\n  listen: " + mqttAddr + "\n"
	if !strings.Contains(text, embedded) {
		t.Fatalf("the config has no %q", embedded)
	}
	text = strings.Replace(text, embedded, "broker: tcp://192.0.2.1:1883\n  username: hub\n  password: secret\n", 1)
	text = regexp.MustCompile(`(?s)  users:.*?\nlocations:`).ReplaceAllString(text, "locations:")
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(text), 0o640); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "", "devices", "listen", "--for", "10m", "--config", cfg)
	if r.code != 0 || !strings.Contains(r.stdout, "the hub only listens there") || strings.Contains(r.stdout, "password") || strings.Contains(r.stdout, "secret") {
		t.Fatalf("devices listen with an external broker: %+v", r)
	}
	db, err := store.Open(context.Background(), filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if w, err := hubstore.New(db).MQTTOnboarding(context.Background()); err != nil || w != nil {
		t.Errorf("onboarding window stored with an external broker: %+v, %v", w, err)
	}
}
