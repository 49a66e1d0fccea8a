package mqtt

import (
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
)

func TestParsers(t *testing.T) {
	texts := stateText{Off: "OFF", On: "ON"}
	one := []string{"POWER", "POWER1"}
	tests := []struct {
		name string
		got  report
		want report
	}{
		{"tasmota RESULT", parseTasmotaJSON([]byte(`{"POWER":"ON"}`), one, texts), report{value: bridge.On}},
		{"tasmota RESULT POWER1", parseTasmotaJSON([]byte(`{"POWER1":"OFF"}`), one, texts), report{value: bridge.Off}},
		{"tasmota other relay", parseTasmotaJSON([]byte(`{"POWER2":"ON"}`), one, texts), report{}},
		{"tasmota STATE", parseTasmotaJSON([]byte(`{"Time":"x","UptimeSec":5,"POWER":"ON","Wifi":{"RSSI":80}}`), one, texts), report{value: bridge.On}},
		{"tasmota error", parseTasmotaJSON([]byte(`{"Command":"Error"}`), one, texts), report{rejected: `Tasmota answered {"Command":"Error"} (check the relay index)`}},
		{"tasmota state text", parseTasmotaJSON([]byte(`{"POWER":"an"}`), one, stateText{Off: "AUS", On: "AN"}), report{value: bridge.On}},
		{"tasmota not JSON", parseTasmotaJSON([]byte(`ON`), one, texts), report{}},
		{"plain lower case", report{value: parseWord([]byte(" on\n"), "ON", "OFF")}, report{value: bridge.On}},
		{"plain unknown", report{value: parseWord([]byte("TOGGLE"), "ON", "OFF")}, report{}},
		{"shelly overpower", report{value: parseWord([]byte("overpower"), "on", "off", "overpower")}, report{value: bridge.Off}},
		{"LWT", report{avail: parseAvailability([]byte("Offline"), "Online", "Offline")}, report{avail: availOffline}},
		{"z2m state", report{value: parseJSONState([]byte(`{"linkquality":3,"state":"ON"}`), "state", "ON", "OFF")}, report{value: bridge.On}},
		{"z2m endpoint", report{value: parseJSONState([]byte(`{"state_l1":"ON","state_l2":"OFF"}`), "state_l2", "ON", "OFF")}, report{value: bridge.Off}},
		{"z2m without state", report{value: parseJSONState([]byte(`{"linkquality":3}`), "state", "ON", "OFF")}, report{}},
		{"json nested bool", report{value: parseJSONState([]byte(`{"relay":{"on":true}}`), "relay.on", "true", "false")}, report{value: bridge.On}},
		{"json number", report{value: parseJSONState([]byte(`{"s":0}`), "s", "1", "0")}, report{value: bridge.Off}},
		{"json path into a string", report{value: parseJSONState([]byte(`{"s":"x"}`), "s.t", "1", "0")}, report{}},
		{"z2m availability 2.x", report{avail: parseZ2MAvailability([]byte(`{"state":"offline"}`))}, report{avail: availOffline}},
		{"z2m availability 1.x", report{avail: parseZ2MAvailability([]byte(`online`))}, report{avail: availOnline}},
		{"z2m availability garbage", report{avail: parseZ2MAvailability([]byte(`{"state":1}`))}, report{}},
		{"shelly NotifyStatus", report{value: parseShellyNotify([]byte(`{"src":"s","dst":"s/events","method":"NotifyStatus","params":{"ts":1.5,"switch:0":{"id":0,"output":true,"source":"MQTT"}}}`), 0).value}, report{value: bridge.On}},
		{"shelly NotifyStatus partial", report{value: parseShellyNotify([]byte(`{"method":"NotifyStatus","params":{"ts":1.5,"switch:0":{"id":0,"apower":3.5}}}`), 0).value}, report{}},
		{"shelly NotifyStatus other switch", report{value: parseShellyNotify([]byte(`{"method":"NotifyStatus","params":{"switch:1":{"output":true}}}`), 0).value}, report{}},
		{"shelly NotifyEvent", report{value: parseShellyNotify([]byte(`{"method":"NotifyEvent","params":{"switch:0":{"output":true}}}`), 0).value}, report{}},
		{"shelly status", report{value: parseShellyOutput([]byte(`{"id":0,"source":"init","output":false,"apower":0}`))}, report{value: bridge.Off}},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, tt.got, tt.want)
		}
	}

	if r, ok := parseRPCReply([]byte(`{"id":7,"src":"shellyplus1-x","dst":"hub","result":{"was_on":false}}`)); !ok || r.ID != 7 || r.Error != nil {
		t.Errorf("rpc result: %+v %v", r, ok)
	}
	if r, ok := parseRPCReply([]byte(`{"id":8,"src":"x","dst":"hub","error":{"code":-105,"message":"Argument 'id', value 3 not found!"}}`)); !ok || r.Error == nil || r.Error.Code != -105 {
		t.Errorf("rpc error: %+v %v", r, ok)
	}
	for _, bad := range []string{`{"id":"abc","result":{}}`, `{"id":3}`, `{"method":"NotifyStatus"}`, `[]`, ``} {
		if _, ok := parseRPCReply([]byte(bad)); ok {
			t.Errorf("parseRPCReply(%q) accepted", bad)
		}
	}
	if v := parseWord([]byte(strings.Repeat("O", maxPayload+1)), "ON", "OFF"); v != "" {
		t.Error("an oversized payload was read")
	}
}

// FuzzParsers feeds arbitrary payloads to every parser of every registered
// profile (each one's plug made from its simulator's keys: every route, and
// a replier's reply), so a new profile's parsers are fuzzed as soon as it is
// registered: none may panic, each says on, off or nothing, and the same
// payload always says the same. The shared parsers are also called with
// settings the simulators' switches do not use (a state_key, other texts).
func FuzzParsers(f *testing.F) {
	for _, s := range []string{
		`ON`, `off`, ``, `?`, `{"POWER":"ON"}`, `{"POWER1":"OFF","POWER2":"ON"}`, `{"Command":"Error"}`,
		`{"state":"ON","linkquality":10}`, `{"state":"offline"}`, `online`,
		`{"id":1,"src":"s","dst":"hub","result":{"was_on":true}}`, `{"id":2,"error":{"code":404,"message":"x"}}`,
		`{"method":"NotifyStatus","params":{"ts":1,"switch:0":{"id":0,"output":true}}}`,
		`{"a":{"b":{"c":"1"}}}`, `{"POWER":`, `{"state":null}`, "\x00\xff", `[1,2]`, `{"id":0,"output":"yes"}`,
	} {
		f.Add([]byte(s))
	}
	type route struct {
		name  string // profile and topic
		parse parser
	}
	var routes []route
	var repliers []replier
	for _, prof := range profiles {
		p := profilePlug(f, prof.name)
		for _, topic := range slices.Sorted(maps.Keys(p.routes)) {
			routes = append(routes, route{prof.name + " " + topic, p.routes[topic]})
		}
		if p.requests != nil {
			repliers = append(repliers, p.requests)
		}
	}
	texts := stateText{Off: "OFF", On: "ON"}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4*maxPayload {
			t.Skip("larger than any message the parsers are given")
		}
		valid := func(what string, v bridge.Value) {
			if v != "" && v != bridge.On && v != bridge.Off {
				t.Fatalf("%s: value %q from %q", what, v, b)
			}
		}
		validReport := func(what string, r report) {
			valid(what, r.value)
			for _, a := range []availability{r.avail, r.bridge} {
				if a < availUnknown || a > availOffline {
					t.Fatalf("%s: availability %d from %q", what, a, b)
				}
			}
		}
		for _, r := range routes {
			got := r.parse(b)
			validReport(r.name, got)
			// A report's meter is a pointer: compare what it holds.
			if !reflect.DeepEqual(got, r.parse(b)) {
				t.Fatalf("%s: not deterministic on %q", r.name, b)
			}
		}
		for _, rp := range repliers {
			id, got, ok := rp.reply(b)
			if ok {
				validReport("reply", got)
			}
			if id2, again, ok2 := rp.reply(b); id2 != id || !reflect.DeepEqual(again, got) || ok2 != ok {
				t.Fatalf("reply: not deterministic on %q", b)
			}
		}

		r := parseTasmotaJSON(b, []string{"POWER", "POWER1"}, texts)
		valid("tasmota", r.value)
		if r.avail != availUnknown || r.bridge != availUnknown {
			t.Fatalf("Tasmota JSON gave availability from %q", b)
		}
		valid("state_key", parseJSONState(b, "a.b.c", "1", "0"))
		valid("shelly output", parseShellyOutput(b))
		if rep, ok := parseRPCReply(b); ok && rep.ID == 0 {
			t.Fatalf("accepted a reply without id: %q", b)
		}
		// A plain word that parses must be the word, whatever the case.
		if v := parseWord(b, "ON", "OFF"); v != "" && !strings.EqualFold(strings.TrimSpace(string(b)), string(v)) {
			t.Fatalf("%q read as %q", b, v)
		}
	})
}

// TestTasmotaUsualReplies: the replies Tasmota sends to every power
// command are read without decoding JSON into a map (no allocation), with
// the same result as the full parser; near misses and rejections still
// go through it.
func TestTasmotaUsualReplies(t *testing.T) {
	for _, opts := range []string{
		"{profile: tasmota, topic: p}",
		"{profile: tasmota, topic: p, relay: 2}",
		"{profile: tasmota, topic: p, state_text: {off: AUS, on: AN}}",
	} {
		p, err := buildPlug(drivers.Spec{ID: "x", Options: mustNode(t, opts)})
		if err != nil {
			t.Fatal(err)
		}
		result := p.routes["stat/p/RESULT"]
		if result == nil {
			t.Fatalf("%s: no RESULT route", opts)
		}
		keys, texts := []string{"POWER", "POWER1"}, stateText{Off: "OFF", On: "ON"}
		if strings.Contains(opts, "relay: 2") {
			keys = []string{"POWER2"}
		}
		if strings.Contains(opts, "AUS") {
			texts = stateText{Off: "AUS", On: "AN"}
		}
		for _, payload := range []string{
			`{"POWER":"ON"}`, `{"POWER":"OFF"}`, `{"POWER1":"ON"}`, `{"POWER1":"OFF"}`, `{"POWER2":"ON"}`, `{"POWER2":"OFF"}`,
			`{"POWER":"AN"}`, `{"POWER":"AUS"}`, `{"POWER":"on"}`, ` {"POWER":"ON"}`, `{"POWER":"ON","Command":"Error"}`,
			`{"Command":"Unknown"}`, `{"POWER2":"ON"`, `ON`, ``,
		} {
			if got, want := result([]byte(payload)), parseTasmotaJSON([]byte(payload), keys, texts); got != want {
				t.Errorf("%s: RESULT %s = %+v, want %+v as the full parser reads it", opts, payload, got, want)
			}
		}
		usual := `{"` + keys[0] + `":"` + texts.On + `"}`
		if r := result([]byte(usual)); r.value != bridge.On {
			t.Errorf("%s: %s = %+v", opts, usual, r)
		}
		usualBytes := []byte(usual)
		if n := testing.AllocsPerRun(100, func() { result(usualBytes) }); n != 0 {
			t.Errorf("%s: reading %s allocates %v times, want 0", opts, usual, n)
		}
		power := p.routes["stat/p/"+keys[0]]
		if r := power([]byte(usual)); r.value != bridge.On {
			t.Errorf("%s: SetOption4 reply %s = %+v", opts, usual, r)
		}
	}
}
