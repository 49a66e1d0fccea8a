package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// meteringConfig writes the config of a hub with a virtual switch (lamp,
// which never reports a reading) and a metering Tasmota plug (pow, topic
// pow1) on broker, its metrics on a port of their own, readings alone
// making an event at most every everyS.
func meteringConfig(t *testing.T, dir, broker, every string) string {
	t.Helper()
	path := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`server:
  listen: %s
  metrics_listen: %s
  power_events_every: %s
  rate_limit: {requests: 1000000, per: 24h} # the tests poll
data_dir: %s
webhooks:
  allow: [127.0.0.1] # the tests' receivers
mqtt:
  broker: %s
  client_id: energy-test
locations:
  - id: 1
    name: Home
    switches:
      - {id: lamp, name: Lamp, driver: virtual}
      - {id: pow, name: Pow, driver: mqtt, profile: tasmota, topic: pow1}
`, freePort(t), freePort(t), every, filepath.Join(dir, "data"), broker)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// installBoth installs lamp and pow for alice's app and returns the
// installation's endpoint and token.
func installBoth(t *testing.T, cfg string) (endpoint, token string) {
	t.Helper()
	app := addDeveloperApp(t, cfg, "1")
	r := runCLI(t, "", "install", "--client-id", app.ID, "--user", "alice", "--location", "1", "--switch", "lamp", "--switch", "pow", "--json", "--config", cfg)
	var inst struct{ Token, Endpoint string }
	if err := json.Unmarshal([]byte(r.stdout), &inst); err != nil || inst.Token == "" {
		t.Fatalf("install: %+v", r)
	}
	return inst.Endpoint, inst.Token
}

// switchFields is GET <endpoint>/switches/<id> as raw JSON fields, so
// that an absent field, null and a number can be told apart.
func switchFields(t *testing.T, endpoint, token, id string) map[string]json.RawMessage {
	t.Helper()
	code, body := call(t, http.MethodGet, endpoint+"/switches/"+id, token)
	if code != http.StatusOK {
		t.Fatalf("GET /switches/%s = %d %s", id, code, body)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("GET /switches/%s: %v: %s", id, err, body)
	}
	return m
}

// number is a JSON field as a number; ok is false when it is absent,
// null or not a number.
func number(m map[string]json.RawMessage, k string) (float64, bool) {
	raw, has := m[k]
	if !has || string(raw) == "null" {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil
}

// waitEnergy polls pow's energy until cond holds, and returns it.
func waitEnergy(t *testing.T, endpoint, token, what string, cond func(float64) bool) float64 {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		m := switchFields(t, endpoint, token, "pow")
		if v, ok := number(m, "energy"); ok && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: pow is %v after 20 s", what, rawString(m))
		}
	}
}

func rawString(m map[string]json.RawMessage) string {
	b, _ := json.Marshal(m)
	return string(b)
}

// scrapeEnergy is switchbridge_switch_energy_kwh_total{switch="pow"} from
// the daemon's /metrics; ok is false when the series is absent.
func scrapeEnergy(t *testing.T, p *daemonProcess) (float64, bool) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + p.metrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "switchbridge_switch_energy_kwh_total{") && strings.Contains(line, `switch="pow"`) {
			f := strings.Fields(line)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			if err != nil {
				t.Fatalf("metrics: %q", line)
			}
			return v, true
		}
	}
	return 0, false
}

// maxReserve is the most a kill -9 may add to an energy total: the
// largest reserve of a ceiling, bridge.MaxPlugPower for 10 minutes.
var maxReserve = bridge.MaxPlugPower / 1000.0 * (10 * time.Minute).Hours()

// TestEnergyNeverGoesBackAcrossKill9: a metering plug reports, its
// counter resets (the plug rebooted), the hub is killed with SIGKILL
// between readings and started again on the same data directory, three
// times (once right after the reset, once after readings the hub had not
// yet written, once while the plug reboots and its counter passes the one
// the hub recorded): the energy total, in the API and in
// switchbridge_switch_energy_kwh_total, never goes back, goes on by what
// the plug's counter grew, and a restart adds at most one reserve of the
// ceiling the hub wrote (it starts the total at that ceiling).
func TestEnergyNeverGoesBackAcrossKill9(t *testing.T) {
	broker := mqtttest.StartMosquitto(t)
	plug := mqtttest.NewTasmota(t, broker.URL, mqtttest.TasmotaOptions{Topic: "pow1"})
	dir := t.TempDir()
	cfg := meteringConfig(t, dir, broker.URL, "10s")
	endpoint, token := installBoth(t, cfg)
	p := startDaemon(t, cfg)

	// The largest total seen so far, by the API or the metrics; each look
	// must not be below it.
	var highest float64
	check := func(p *daemonProcess, api float64, what string) {
		t.Helper()
		m, ok := scrapeEnergy(t, p)
		if !ok {
			t.Fatalf("%s: no switchbridge_switch_energy_kwh_total for pow", what)
		}
		for _, v := range []float64{api, m} {
			if v < highest-1e-9 {
				t.Fatalf("%s: energy went back: %.4f after %.4f (API %.4f, metrics %.4f)", what, v, highest, api, m)
			}
			highest = max(highest, v)
		}
	}
	near := func(want float64) func(float64) bool {
		return func(v float64) bool { return v > want-1e-6 && v < want+1e-6 }
	}
	// afterKill waits for the first total after a restart, which is at
	// least the highest shown before the kill and adds at most grew (what
	// the plug's counter grew since) and one reserve.
	afterKill := func(p *daemonProcess, grew float64, what string) float64 {
		t.Helper()
		before := highest
		v := waitEnergy(t, endpoint, token, what, func(float64) bool { return true })
		check(p, v, what)
		if v > before+grew+maxReserve+1e-9 {
			t.Fatalf("%s: %.4f after %.4f adds more than the plug drew (%.4f) and one reserve (%.4f)", what, v, before, grew, maxReserve)
		}
		return v
	}
	kill := func() {
		t.Helper()
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
	}

	plug.Sensor(100, 230, 0.43, 5.000)
	check(p, waitEnergy(t, endpoint, token, "first reading", near(5.0)), "first reading")
	plug.Sensor(100, 230, 0.43, 5.004)
	check(p, waitEnergy(t, endpoint, token, "second reading", near(5.004)), "second reading")

	// The plug reboots and its counter starts again (EnergyTotal 0 does
	// the same): 0.002 since.
	plug.Sensor(100, 230, 0.43, 0.002)
	check(p, waitEnergy(t, endpoint, token, "after the reset", near(5.006)), "after the reset")

	// Killed between readings, at once after the reset.
	kill()
	p = startDaemon(t, cfg)
	plug.Sensor(100, 230, 0.43, 0.005)
	v := afterKill(p, 0.003, "after kill -9 and restart")

	// Readings the hub may keep in memory only, then SIGKILL again.
	plug.Sensor(100, 230, 0.43, 0.010)
	check(p, waitEnergy(t, endpoint, token, "before the second kill", near(v+0.005)), "before the second kill")
	kill()
	p = startDaemon(t, cfg)
	// Before the plug reports again, the series (if shown) is not below.
	if m, ok := scrapeEnergy(t, p); ok && m < highest-1e-9 {
		t.Fatalf("after the second restart, before a reading: metrics %.4f after %.4f", m, highest)
	}
	plug.Sensor(100, 230, 0.43, 0.012)
	v = afterKill(p, 0.002, "after the second kill -9")

	// The plug reboots while the hub runs (the reset is written at once),
	// reports twice more (kept in memory: the next write is minutes
	// away), and the hub is killed. While the hub is down the plug reboots
	// again, and its counter, started from 0, has passed the one recorded
	// at the reset by the time the hub hears it: the restart reads that as
	// growth since the record, below what was shown before the kill. The
	// ceiling written with the record keeps the total from going back.
	plug.Sensor(100, 230, 0.43, 0.001)
	check(p, waitEnergy(t, endpoint, token, "a reset before the third kill", near(v+0.001)), "a reset before the third kill")
	plug.Sensor(100, 230, 0.43, 0.003)
	plug.Sensor(100, 230, 0.43, 0.004)
	check(p, waitEnergy(t, endpoint, token, "before the third kill", near(v+0.004)), "before the third kill")
	kill()
	plug.Crash()
	plug.Start()
	plug.Sensor(100, 230, 0.43, 0.001) // heard by no hub
	p = startDaemon(t, cfg)
	plug.Sensor(100, 230, 0.43, 0.002)
	afterKill(p, 0.002, "after a reboot while the hub was down")
	t.Logf("the highest total shown: %.4f kWh", highest)
}

// sseEvents reads the event stream of an installation into a channel of
// its data lines, until the test ends.
func sseEvents(t *testing.T, endpoint, token string) <-chan map[string]json.RawMessage {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, endpoint+"/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		t.Fatalf("GET /events = %d %s", resp.StatusCode, b)
	}
	ch := make(chan map[string]json.RawMessage, 256)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			data, ok := strings.CutPrefix(sc.Text(), "data:")
			if !ok {
				continue
			}
			var m map[string]json.RawMessage
			if json.Unmarshal([]byte(strings.TrimSpace(data)), &m) != nil {
				continue // a snapshot or another kind of message
			}
			ch <- m
		}
	}()
	t.Cleanup(func() { resp.Body.Close(); wg.Wait() })
	return ch
}

// nextEvent waits for an event of switch id for which cond holds.
func nextEvent(t *testing.T, ch <-chan map[string]json.RawMessage, id, what string, cond func(map[string]json.RawMessage) bool) map[string]json.RawMessage {
	t.Helper()
	timeout := time.After(20 * time.Second)
	var seen []string
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("%s: the stream ended; seen %q", what, seen)
			}
			if string(m["id"]) != strconv.Quote(id) {
				continue
			}
			seen = append(seen, rawString(m))
			if cond(m) {
				return m
			}
		case <-timeout:
			t.Fatalf("%s: no such event of %s within 20 s; seen %q", what, id, seen)
		}
	}
}

// hookEvent waits for a webhook delivery holding an event of switch id for
// which cond holds.
func hookEvent(t *testing.T, hook *hookReceiver, id, what string, cond func(map[string]json.RawMessage) bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := hook.deliveries()
		for _, body := range got {
			for _, m := range webhookEvents(body) {
				if string(m["id"]) == strconv.Quote(id) && cond(m) {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no webhook delivery with such an event of %s within 20 s; delivered %q", what, id, got)
		}
	}
}

// webhookEvents is the event of a webhook body ({type, timestamp, data}).
func webhookEvents(body string) []map[string]json.RawMessage {
	var d struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	if json.Unmarshal([]byte(body), &d) != nil || d.Data == nil {
		return nil
	}
	return []map[string]json.RawMessage{d.Data}
}

// TestReadingFieldsInAPIStreamAndWebhooks: power and energy are absent for
// a switch that never reports readings (a virtual one, as a GPIO relay),
// numbers once the plug reports them, and null once the reading is stale
// (the plug gone: its last will makes it unavailable), alike in
// GET /switches, GET /switches/:id, the event stream and webhooks.
func TestReadingFieldsInAPIStreamAndWebhooks(t *testing.T) {
	broker := mqtttest.StartMosquitto(t)
	plug := mqtttest.NewTasmota(t, broker.URL, mqtttest.TasmotaOptions{Topic: "pow1"})
	dir := t.TempDir()
	cfg := meteringConfig(t, dir, broker.URL, "1s")
	endpoint, token := installBoth(t, cfg)
	startDaemon(t, cfg)
	hook := startHookReceiver(t)
	hook.register(t, endpoint, token)
	events := sseEvents(t, endpoint, token)

	isNum := func(k string, want float64) func(map[string]json.RawMessage) bool {
		return func(m map[string]json.RawMessage) bool {
			v, ok := number(m, k)
			return ok && v > want-1e-6 && v < want+1e-6
		}
	}
	isNull := func(m map[string]json.RawMessage) bool {
		return string(m["power"]) == "null" && string(m["energy"]) == "null"
	}
	absent := func(what string, m map[string]json.RawMessage) {
		t.Helper()
		if _, has := m["power"]; has {
			t.Errorf("%s: lamp has power: %s", what, rawString(m))
		}
		if _, has := m["energy"]; has {
			t.Errorf("%s: lamp has energy: %s", what, rawString(m))
		}
	}
	list := func() map[string]map[string]json.RawMessage {
		code, body := call(t, http.MethodGet, endpoint+"/switches", token)
		if code != http.StatusOK {
			t.Fatalf("GET /switches = %d %s", code, body)
		}
		var raw json.RawMessage = []byte(body)
		var wrapped struct {
			Switches []map[string]json.RawMessage `json:"switches"`
		}
		var all []map[string]json.RawMessage
		if json.Unmarshal(raw, &all) != nil {
			if err := json.Unmarshal(raw, &wrapped); err != nil {
				t.Fatalf("GET /switches: %v: %s", err, body)
			}
			all = wrapped.Switches
		}
		out := map[string]map[string]json.RawMessage{}
		for _, m := range all {
			var id string
			json.Unmarshal(m["id"], &id)
			out[id] = m
		}
		return out
	}

	// Before any reading: neither switch has the fields.
	absent("before any reading", switchFields(t, endpoint, token, "lamp"))
	if m := switchFields(t, endpoint, token, "pow"); m["power"] != nil || m["energy"] != nil {
		t.Errorf("pow before any reading: %s", rawString(m))
	}

	// A reading: numbers everywhere pow is shown; lamp still without. The
	// plug's very first energy total is shown once the hub has written
	// its first record (until then a kill -9 could take it back), a
	// moment later: in reads at once, in the stream and by webhook with
	// the plug's next reading, sent here every 300 ms as a TelePeriod
	// would.
	plug.Sensor(42.5, 230, 0.18, 1.25)
	waitEnergy(t, endpoint, token, "the first reading", func(v float64) bool { return v > 1.25-1e-6 && v < 1.25+1e-6 })
	stop, sent := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sent)
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				plug.Sensor(42.5, 230, 0.18, 1.25)
			}
		}
	}()
	stopSending := sync.OnceFunc(func() { close(stop); <-sent })
	t.Cleanup(stopSending)
	nextEvent(t, events, "pow", "a reading in the stream", func(m map[string]json.RawMessage) bool {
		return isNum("power", 42.5)(m) && isNum("energy", 1.25)(m)
	})
	hookEvent(t, hook, "pow", "a reading by webhook", func(m map[string]json.RawMessage) bool {
		return isNum("power", 42.5)(m) && isNum("energy", 1.25)(m)
	})
	if m := switchFields(t, endpoint, token, "pow"); !isNum("power", 42.5)(m) || !isNum("energy", 1.25)(m) {
		t.Errorf("GET /switches/pow after a reading: %s", rawString(m))
	}
	all := list()
	if m := all["pow"]; !isNum("power", 42.5)(m) || !isNum("energy", 1.25)(m) {
		t.Errorf("GET /switches, pow after a reading: %s", rawString(m))
	}
	absent("GET /switches after a reading", all["lamp"])
	absent("GET /switches/lamp after a reading", switchFields(t, endpoint, token, "lamp"))
	stopSending()

	// A command to the lamp: its event, in the stream and by webhook, has
	// no reading fields.
	if code, body := call(t, http.MethodPut, endpoint+"/switches/lamp/on", token); code != http.StatusNoContent {
		t.Fatalf("PUT lamp on = %d %s", code, body)
	}
	absent("the lamp's event in the stream", nextEvent(t, events, "lamp", "the lamp's event", func(m map[string]json.RawMessage) bool {
		return string(m["value"]) == `"on"`
	}))
	hookEvent(t, hook, "lamp", "the lamp's event by webhook", func(m map[string]json.RawMessage) bool {
		if string(m["value"]) != `"on"` {
			return false
		}
		absent("the lamp's event by webhook", m)
		return true
	})

	// The plug goes (its last will: unavailable): the reading is stale,
	// null everywhere.
	plug.Crash()
	nextEvent(t, events, "pow", "the stale reading in the stream", isNull)
	hookEvent(t, hook, "pow", "the stale reading by webhook", isNull)
	if m := switchFields(t, endpoint, token, "pow"); !isNull(m) {
		t.Errorf("GET /switches/pow once stale: %s", rawString(m))
	}
	if m := list()["pow"]; !isNull(m) {
		t.Errorf("GET /switches, pow once stale: %s", rawString(m))
	}
	absent("GET /switches/lamp once pow is stale", switchFields(t, endpoint, token, "lamp"))
}
