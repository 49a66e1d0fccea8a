package mqtt

import (
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
)

// buildErr builds cfg's drivers and returns the problems.
func buildErr(t *testing.T, cfg string) string {
	t.Helper()
	c, err := config.Load("hub.yaml", config.Text(cfg))
	if err != nil {
		t.Fatalf("config does not parse: %v", err)
	}
	_, err = drivers.Build(c, drivers.Registry{Registration()}, drivers.Env{})
	if err == nil {
		return ""
	}
	if !config.IsProblems(err) {
		t.Fatalf("error is not a config problem list: %v", err)
	}
	return err.Error()
}

func TestConfigProblems(t *testing.T) {
	const ok = "broker: tcp://127.0.0.1:18830"
	tests := []struct {
		name     string
		mqtt     string // "" for no mqtt: section at all
		switches []string
		want     []string // substrings of the problems, each with its line
	}{
		{"no section", "", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"need a top-level mqtt: section"}},
		{"no broker", "client_id: x", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"hub.yaml:3: mqtt.broker is required"}},
		{"unknown key", ok + "\nbrokr: x", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`hub.yaml:4: unknown key "brokr" in mqtt`}},
		{"bad scheme", "broker: http://h:1883", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"hub.yaml:3: mqtt.broker \"http://h:1883\": the scheme must be tcp, ssl, ws or wss"}},
		{"credentials in url", "broker: tcp://u:p@h:1883", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"not in the URL"}},
		{"credentials in url of another scheme", "broker: mqtt://u:hunter2-mqtt@h:1883", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`hub.yaml:3: mqtt.broker "mqtt://…@h:1883": the scheme must be tcp, ssl, ws or wss`, "not in the URL"}},
		{"credentials in a url that does not parse", "broker: \"tcp://u:hunter2-%zz@h:1883\"", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`hub.yaml:3: mqtt.broker "tcp://…@h:1883" is not a URL`}},
		{"tls without ssl", ok + "\ntls: {ca: ca.pem}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"hub.yaml:4: mqtt.tls is only used with ssl://"}},
		{"cert without key", "broker: ssl://h:8883\ntls: {cert: c.pem}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"cert and key go together"}},
		{"embedded on the LAN without users", "broker: embedded\nlisten: 0.0.0.0:1883", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"hub.yaml:4: mqtt.listen \"0.0.0.0:1883\" is reachable from other machines"}},
		{"embedded port out of range", "broker: embedded\nlisten: 127.0.0.1:18830000", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"hub.yaml:4: mqtt.listen \"127.0.0.1:18830000\" port 18830000 is out of range (0 to 65535)"}},
		{"embedded with username", "broker: embedded\nusername: x", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"list plug logins under users"}},
		{"users without embedded", ok + "\nusers: {a: b}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"are for broker: embedded"}},
		{"login with an unknown key", "broker: embedded\nusers:\n  a: {password: x, switchs: [a]}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`hub.yaml:5: unknown key "switchs"`}},
		{"login of no switch", "broker: embedded\nusers:\n  a: {password: x, switches: [a, nope]}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`hub.yaml:5: mqtt.users.a: "nope" is not an mqtt switch`}},
		{"switch no login serves", "broker: embedded\nusers:\n  a: {password: x, switches: [a]}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o", "id: b, name: B, profile: esphome, prefix: q, object_id: o"},
			[]string{`hub.yaml:11: switch "b": no login in mqtt.users lists it`}},
		{"the hub's login", "broker: embedded\nusers: {switchbridge-hub: x}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`is the hub's own login`}},
		{"the onboarding login", "broker: embedded\nusers: {switchbridge-onboarding: x}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`is the login new devices announce themselves with`}},
		{"packet size", "broker: embedded\nmax_packet_size: 10\nmax_clients: -1", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"hub.yaml:4: mqtt.max_packet_size must be between 1024", "hub.yaml:5: mqtt.max_clients must be between 1"}},
		{"broker bounds", "broker: embedded\nmax_subscriptions_per_client: -1\nmax_subscriptions_per_login: 0\nmax_retained_per_login: 1000000\nmax_retained_bytes_per_login: -5", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"hub.yaml:4: mqtt.max_subscriptions_per_client must be between 1 and", "hub.yaml:6: mqtt.max_retained_per_login must be between 1 and", "hub.yaml:7: mqtt.max_retained_bytes_per_login must be between 1 and"}},
		{"client ids", "broker: embedded\nclient_id: hub-1\nusers:\n  a: {password: x, client_ids: [\"plug-*\", \"\", \"a+b\"]}\n  b: {password: y, client_ids: [plug-7]}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`hub.yaml:6: mqtt.users.a: client id "" must be an id`, `hub.yaml:6: mqtt.users.a: client id "a+b" must be an id`,
				`hub.yaml:7: mqtt.users.b: client id "plug-7" is also claimed by login a ("plug-*")`}},
		{"the hub's client id claimed", "broker: embedded\nclient_id: hub-1\nusers:\n  a: {password: x, client_ids: [\"hub-*\"]}", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{`hub.yaml:6: mqtt.users.a: client id "hub-*" is the hub's own`}},
		{"bounds without embedded", ok + "\nmax_subscriptions_per_login: 5", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"are for broker: embedded"}},
		{"broker settings without embedded", ok + "\nmqtt5: true", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"are for broker: embedded"}},
		{"state on a command topic", "broker: embedded", []string{"id: a, name: A, profile: tasmota, topic: t", "id: b, name: B, profile: generic, state_topic: cmnd/x/state"},
			[]string{`switch "b": it reports on cmnd/x/state, which the embedded broker keeps for commands`}},
		{"bad durations", ok + "\nconfirm_timeout: -1s\nkeepalive: 10ms", []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o"},
			[]string{"hub.yaml:4: mqtt.confirm_timeout must be positive", "hub.yaml:5: mqtt.keepalive must be at least 1s"}},
		{"no profile", ok, []string{"id: a, name: A, topic: t"},
			[]string{`hub.yaml:8: switch "a": an mqtt switch needs a profile`}},
		{"unknown profile", ok, []string{"id: a, name: A, profile: sonoff"},
			[]string{`unknown profile "sonoff"`}},
		{"key of another profile", ok, []string{"id: a, name: A, profile: tasmota, topic: t, friendly_name: x"},
			[]string{`key "friendly_name" does not apply to profile tasmota`}},
		{"unknown option", ok, []string{"id: a, name: A, profile: tasmota, topik: t"},
			[]string{`hub.yaml:8: unknown key "topik" (known: full_topic, hostname, mac, prefixes, relay, state_text, topic)`}},
		{"unknown option and key of another profile", ok, []string{"id: a, name: A, profile: esphome, prefix: p, object_id: o,\n          topik: t, friendly_name: x"},
			[]string{`hub.yaml:9: unknown key "topik" (known: command_topic, energy_topic, energy_unit, object_id, power_topic, power_unit, prefix, state_topic)`,
				`hub.yaml:9: switch "a": key "friendly_name" does not apply to profile esphome (its keys: prefix, object_id, command_topic, state_topic, power_topic, power_unit, energy_topic, energy_unit)`}},
		{"profile not a string", ok, []string{"id: a, name: A, profile: [tasmota]"},
			[]string{"hub.yaml:8: cannot unmarshal !!seq into string"}},
		{"tasmota without topic", ok, []string{"id: a, name: A, profile: tasmota"},
			[]string{"topic is required for profile tasmota"}},
		{"tasmota wildcard", ok, []string{"id: a, name: A, profile: tasmota, topic: a/#"},
			[]string{"must be a single topic level"}},
		{"tasmota relay range", ok, []string{"id: a, name: A, profile: tasmota, topic: t, relay: 99"},
			[]string{"relay must be between 0 and 32"}},
		{"tasmota prefixes", ok, []string{"id: a, name: A, profile: tasmota, topic: t, prefixes: [a, b]"},
			[]string{"prefixes lists Prefix1, 2 and 3"}},
		{"tasmota same prefixes", ok, []string{"id: a, name: A, profile: tasmota, topic: t, prefixes: [x, x, tele]"},
			[]string{"command topic must differ"}},
		{"tasmota hostname token", ok, []string{`id: a, name: A, profile: tasmota, topic: t, full_topic: "%prefix%/%hostname%/"`},
			[]string{"hostname is required"}},
		{"shelly without id", ok, []string{"id: a, name: A, profile: shelly-gen1"},
			[]string{"device_id is required"}},
		{"shelly-rpc bad prefix", ok, []string{"id: a, name: A, profile: shelly-rpc, prefix: \"a%b\""},
			[]string{"Shelly allows at most 300 characters"}},
		{"z2m bridge name", ok, []string{"id: a, name: A, profile: zigbee2mqtt, friendly_name: bridge/state"},
			[]string{"is Zigbee2MQTT's own topic"}},
		{"generic without state topic", ok, []string{"id: a, name: A, profile: generic, command_topic: x"},
			[]string{"state_topic is empty"}},
		{"generic same payloads", ok, []string{"id: a, name: A, profile: generic, state_topic: s, payload_on: x, payload_off: X"},
			[]string{"payload_on and payload_off must differ"}},
		{"generic loops", ok, []string{"id: a, name: A, profile: generic, state_topic: s, command_topic: s"},
			[]string{"command topic must differ"}},
		{"generic payload without topic", ok, []string{"id: a, name: A, profile: generic, state_topic: s, payload_available: up"},
			[]string{"need availability_topic"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := "server: {metrics_listen: \"off\"}\n"
			if tt.mqtt != "" {
				cfg = hubConfig(tt.mqtt, tt.switches...)
			} else {
				cfg += "locations:\n  - id: 1\n    name: Home\n    switches:\n"
				for _, s := range tt.switches {
					cfg += "      - {driver: mqtt, " + s + "}\n"
				}
			}
			got := buildErr(t, cfg)
			if got == "" {
				t.Fatalf("no problem reported for\n%s", cfg)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("problems:\n%s\nwant one containing %q\nconfig:\n%s", got, w, cfg)
				}
			}
			if strings.Contains(got, "hunter2") {
				t.Errorf("the problems repeat a password of the config:\n%s", got)
			}
		})
	}
}

func TestConfigGood(t *testing.T) {
	cfg := hubConfig(`broker: ssl://broker.lan:8883
client_id: hub-1
username: hub
password: pw
tls: {ca: /etc/ssl/ca.pem, cert: c.pem, key: c.key}
keepalive: 1m
confirm_timeout: 3s`,
		`id: a, name: A, profile: tasmota, topic: t, relay: 2, full_topic: "%prefix%/%hostname%/%topic%/", hostname: plug, prefixes: [c, s, te], state_text: {off: AUS, on: AN}`,
		`id: b, name: B, profile: shelly-gen1, device_id: shellyplug-s-7AECF4, relay: 0`,
		`id: c, name: C, profile: shelly-rpc, prefix: shellyplus1-a8032ab12345, switch: 1`,
		`id: d, name: D, profile: zigbee2mqtt, base_topic: z2m, friendly_name: living/lamp, endpoint: l1`,
		`id: e, name: E, profile: esphome, prefix: node, object_id: relay`,
		`id: f, name: F, profile: generic, command_topic: f/set, state_topic: f/state, state_key: a.b, availability_topic: f/up, payload_available: "1", payload_not_available: "0"`,
		`id: g, name: G, profile: generic, state_topic: g/state`,
	)
	if got := buildErr(t, cfg); got != "" {
		t.Fatalf("problems in a good config:\n%s", got)
	}
	d, err := New(drivers.Env{Settings: mustNode(t, "broker: embedded")})
	if err != nil {
		t.Fatal(err)
	}
	s := d.(*driver).set
	if s.Listen != DefaultEmbeddedListen || s.ConfirmTimeout.Std() != DefaultConfirmTimeout || s.KeepAlive.Std() != DefaultKeepAlive {
		t.Errorf("defaults not applied: %+v", s)
	}
	if !strings.HasPrefix(s.ClientID, "switchbridge") {
		t.Errorf("default client id %q", s.ClientID)
	}
}

// TestProfileTopics pins each profile's topics and payloads to the
// firmware's, as each firmware documents them.
func TestProfileTopics(t *testing.T) {
	tests := []struct {
		opts      string
		cmdTopic  string
		on, off   string
		query     string // topic and payload, "" for none
		subscribe []string
	}{
		{"profile: tasmota, topic: plug", "cmnd/plug/POWER", "ON", "OFF", "cmnd/plug/POWER ",
			[]string{"stat/plug/RESULT", "stat/plug/POWER", "stat/plug/POWER1", "tele/plug/STATE", "tele/plug/SENSOR", "stat/plug/STATUS8", "stat/plug/STATUS10", "tele/plug/LWT"}},
		{`profile: tasmota, topic: plug, relay: 3, full_topic: "home/%topic%/%prefix%/", prefixes: [c, s, t]`, "home/plug/c/POWER3", "ON", "OFF", "home/plug/c/POWER3 ",
			[]string{"home/plug/s/RESULT", "home/plug/s/POWER3", "home/plug/t/STATE", "home/plug/t/SENSOR", "home/plug/s/STATUS8", "home/plug/s/STATUS10", "home/plug/t/LWT"}},
		{"profile: shelly-gen1, device_id: shelly1-328900, relay: 1", "shellies/shelly1-328900/relay/1/command", "on", "off",
			"shellies/shelly1-328900/command update", []string{"shellies/shelly1-328900/relay/1", "shellies/shelly1-328900/relay/1/power", "shellies/shelly1-328900/relay/1/energy", "shellies/shelly1-328900/online"}},
		{"profile: zigbee2mqtt, friendly_name: hall/lamp", "zigbee2mqtt/hall/lamp/set", `{"state":"ON"}`, `{"state":"OFF"}`,
			`zigbee2mqtt/hall/lamp/get {"state":""}`,
			[]string{"zigbee2mqtt/hall/lamp", "zigbee2mqtt/hall/lamp/availability", "zigbee2mqtt/bridge/state"}},
		{"profile: zigbee2mqtt, base_topic: z, friendly_name: d, endpoint: l2", "z/d/set", `{"state_l2":"ON"}`, `{"state_l2":"OFF"}`,
			`z/d/get {"state_l2":""}`, []string{"z/d", "z/d/availability", "z/bridge/state"}},
		{"profile: esphome, prefix: node, object_id: relay", "node/switch/relay/command", "ON", "OFF", "",
			[]string{"node/switch/relay/state", "node/status"}},
		{"profile: generic, command_topic: c, state_topic: s, payload_on: up, payload_off: down, availability_topic: a", "c", "up", "down", "",
			[]string{"s", "a"}},
		{"profile: shelly-rpc, prefix: shellyplus1-x, switch: 1", "", "", "", "",
			[]string{"shellyplus1-x/events/rpc", "shellyplus1-x/status/switch:1", "shellyplus1-x/online"}},
	}
	for _, tt := range tests {
		t.Run(tt.opts, func(t *testing.T) {
			p, err := buildPlug(drivers.Spec{ID: "x", Options: mustNode(t, "{"+tt.opts+"}")})
			if err != nil {
				t.Fatal(err)
			}
			var subs []string
			for topic := range p.routes {
				subs = append(subs, topic)
			}
			if !sameSet(subs, tt.subscribe) {
				t.Errorf("subscriptions %v, want %v", subs, tt.subscribe)
			}
			if tt.cmdTopic == "" {
				return
			}
			for v, want := range map[bridge.Value]string{bridge.On: tt.on, bridge.Off: tt.off} {
				m := p.command(v)
				if m.topic != tt.cmdTopic || string(m.payload) != want {
					t.Errorf("command %s = %s %s, want %s %s", v, m.topic, m.payload, tt.cmdTopic, want)
				}
			}
			q := ""
			if p.query != nil {
				q = p.query.topic + " " + string(p.query.payload)
			}
			if q != tt.query {
				t.Errorf("query %q, want %q", q, tt.query)
			}
		})
	}
}

// TestShellyRPCReplier pins the Shelly RPC frames (Gen2 firmware) its
// replier makes and reads.
func TestShellyRPCReplier(t *testing.T) {
	p, err := buildPlug(drivers.Spec{ID: "x", Options: mustNode(t, "{profile: shelly-rpc, prefix: shellyplus1-x, switch: 1}")})
	if err != nil {
		t.Fatal(err)
	}
	r := p.requests
	if r == nil || p.command != nil || p.query != nil || !p.askable() || !p.commandable() {
		t.Fatalf("a shelly-rpc plug is commanded and asked by requests only: %+v", p)
	}
	if got := r.replyTopic("hub-1"); got != "hub-1/rpc" {
		t.Errorf("reply topic %q, want hub-1/rpc", got)
	}
	for target, want := range map[bridge.Value]string{
		bridge.On:  `{"id":7,"method":"Switch.Set","params":{"id":1,"on":true},"src":"hub-1"}`,
		bridge.Off: `{"id":7,"method":"Switch.Set","params":{"id":1,"on":false},"src":"hub-1"}`,
		"":         `{"id":7,"method":"Switch.GetStatus","params":{"id":1},"src":"hub-1"}`,
	} {
		if m := r.request(7, "hub-1", target); m.topic != "shellyplus1-x/rpc" || string(m.payload) != want {
			t.Errorf("request %q = %s %s, want shellyplus1-x/rpc %s", target, m.topic, m.payload, want)
		}
	}
	for _, tt := range []struct {
		payload string
		id      uint64
		want    report
	}{
		{`{"id":7,"src":"shellyplus1-x","dst":"hub-1","result":{"was_on":false}}`, 7, report{}},
		{`{"id":8,"src":"shellyplus1-x","dst":"hub-1","result":{"id":1,"output":true}}`, 8, report{value: bridge.On}},
		{`{"id":9,"error":{"code":-105,"message":"Argument 'id', value 1 not found!"}}`, 9, report{failure: "Shelly RPC error -105: Argument 'id', value 1 not found!"}},
	} {
		id, rep, ok := r.reply([]byte(tt.payload))
		if !ok || id != tt.id || rep != tt.want {
			t.Errorf("reply %s = %d %+v %v, want %d %+v", tt.payload, id, rep, ok, tt.id, tt.want)
		}
	}
	if _, _, ok := r.reply([]byte(`{"method":"NotifyStatus"}`)); ok {
		t.Error("a notification read as a reply")
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	m := map[string]bool{}
	for _, x := range a {
		m[x] = true
	}
	for _, x := range b {
		if !m[x] {
			return false
		}
	}
	return true
}

func TestConfigBrokerLogins(t *testing.T) {
	build := func(users string) *drivers.Set {
		t.Helper()
		c, err := config.Load("hub.yaml", config.Text(hubConfig("broker: embedded\nusers:\n"+users,
			"id: a, name: A, profile: esphome, prefix: p, object_id: o", "id: b, name: B, profile: tasmota, topic: t")))
		if err != nil {
			t.Fatal(err)
		}
		set, err := drivers.Build(c, drivers.Registry{Registration()}, drivers.Env{})
		if err != nil {
			t.Fatalf("build: %v", err)
		}
		return set
	}
	// Both forms, side by side.
	ws := build("  a: {password: x, switches: [a]}\n  old: secret")
	if len(ws.Warnings()) != 1 || ws.Warnings()[0].Line != 6 || !strings.Contains(ws.Warnings()[0].Msg, "login(s) old list no switches") {
		t.Errorf("warnings = %+v, want one at line 6 naming old", ws.Warnings())
	}
	if ws := build("  a: {password: x, switches: [a]}\n  b: {password: y, switches: [b]}"); len(ws.Warnings()) != 0 {
		t.Errorf("warnings for logins that all list their switches: %+v", ws.Warnings())
	}
}
