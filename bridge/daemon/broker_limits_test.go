package daemon_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// The embedded broker's bounds per client, per login and per address,
// against a running daemon, each as the attack that got through before
// they existed: what a compromised plug, a LAN neighbour or a password
// guesser would send.

// brokerHub runs a daemon with an embedded broker on a free port, its
// metrics on, with the mqtt keys extra (indented lines) and these logins:
// tas (the Tasmota plug tas1), esp (the ESPHome node) and old, a login of
// the older form.
func brokerHub(t *testing.T, extra string) (*daemontest.Harness, string) {
	t.Helper()
	return brokerHubOn(t, "", extra)
}

// brokerHubOn is brokerHub on the data directory dir (a fresh one when
// empty).
func brokerHubOn(t *testing.T, dir, extra string) (*daemontest.Harness, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, DataDir: dir, Config: fmt.Sprintf(`mqtt:
  broker: embedded
  listen: %s
%s  users:
    tas: {password: s3cret, switches: [tas], client_ids: [DVES_1A2B3C]}
    esp: {password: pw2, switches: [esp]}
    old: pw3
locations:
  - id: 1
    name: Home
    switches:
      - {id: tas, name: Tasmota plug, driver: mqtt, profile: tasmota, topic: tas1}
      - {id: esp, name: ESP plug, driver: mqtt, profile: esphome, prefix: node, object_id: relay}
`, addr, extra)})
	return h, addr
}

// connack reads a CONNACK and returns its code, 0xff when the connection
// closed (or stayed silent) without one.
func connack(c net.Conn) byte {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	first, body, err := mqtttest.ReadPacket(bufio.NewReader(c))
	if err != nil || first != 0x20 || len(body) < 2 {
		return 0xff
	}
	return body[1]
}

// mqttLogin connects from ip with an MQTT 3.1.1 CONNECT and returns the
// connection and the CONNACK's code.
func mqttLogin(t *testing.T, ip, addr, id, user, pass string) (net.Conn, byte) {
	t.Helper()
	c := mqtttest.DialFrom(t, ip, addr, mqtttest.Connect(4, id, user, pass))
	return c, connack(c)
}

// metric scrapes the hub's metrics and returns the value of the series
// named exactly (name and labels), -1 when there is none.
func metric(t *testing.T, h *daemontest.Harness, series string) float64 {
	t.Helper()
	return sample(scrapeAddr(t, h.MetricsAddr().String()), series)
}

func refusals(t *testing.T, h *daemontest.Harness, reason string) float64 {
	t.Helper()
	return metric(t, h, `switchbridge_mqtt_broker_refusals_total{reason="`+reason+`"}`)
}

// residentKB is a size field of /proc/self/status (the daemon runs in the
// test's process), 0 where there is none.
func residentKB(field string) int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb int
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb
		}
	}
	return 0
}

// The attack of the security issue: one plug login, 24 SUBSCRIBE packets
// of 2,500 filters each (60,000 filters; all were accepted, +90 MiB of
// heap), from as many clients as the login may connect (three for a login
// of one switch; a fourth is refused). Now the login holds at most its
// bound, the rest are refused with a failure code and counted, and the
// resident size stays within a few MB.
func TestDaemonBrokerSubscriptionFlood(t *testing.T) {
	h, addr := brokerHub(t, "")
	// The packets are made beforehand, so what is measured is the daemon.
	var pkts [3][8][]byte
	for client := range pkts {
		for p := range pkts[client] {
			fs := make([]string, 2500)
			for i := range fs {
				fs[i] = fmt.Sprintf("stat/tas1/%d/%d/%d", client, p, i)
			}
			pkts[client][p] = mqtttest.Subscribe(4, fs...)
		}
	}
	heapBefore, rssBefore := settled()

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		granted int
		refused int
	)
	for client := range pkts {
		c, code := mqttLogin(t, "127.0.0.2", addr, fmt.Sprint("flood-", client), "tas", "s3cret")
		if code != 0 {
			t.Fatalf("login: code %#x", code)
		}
		wg.Go(func() {
			r := bufio.NewReader(c)
			for p, pkt := range pkts[client] {
				c.SetDeadline(time.Now().Add(20 * time.Second))
				if _, err := c.Write(pkt); err != nil {
					t.Errorf("client %d, packet %d: %v", client, p, err)
					return
				}
				codes, err := mqtttest.ReadSuback(r, 4)
				if err != nil || len(codes) != 2500 {
					t.Errorf("client %d, packet %d: %d codes, %v", client, p, len(codes), err)
					return
				}
				mu.Lock()
				for _, code := range codes {
					if code < 0x80 {
						granted++
					} else {
						refused++
					}
				}
				mu.Unlock()
			}
		})
	}
	if _, code := mqttLogin(t, "127.0.0.2", addr, "flood-3", "tas", "s3cret"); code != 3 {
		t.Errorf("a fourth client of a login of one switch: code %#x, want 3 (server unavailable)", code)
	}
	wg.Wait()
	if granted > 1024 || granted+refused != 60000 {
		t.Errorf("%d of 60000 filters granted to one login (%d refused), want at most the default bound of 1024", granted, refused)
	}
	if v := refusals(t, h, "subscription_bound"); v != float64(refused) {
		t.Errorf("switchbridge_mqtt_broker_refusals_total{reason=\"subscription_bound\"} = %v, want %d", v, refused)
	}
	// What the daemon keeps: the heap in use and the resident size once
	// the garbage of the flood is collected and returned. (The peak
	// depends on when the collector ran; what grew linearly with the
	// filters, 90 MiB for these, was what the broker kept.)
	heapAfter, rssAfter := settled()
	t.Logf("%d filters granted, %d refused; heap in use %+.1f MB, resident size %+.1f MB", granted, refused,
		(float64(heapAfter)-float64(heapBefore))/(1<<20), (float64(rssAfter)-float64(rssBefore))/(1<<20))
	if heapAfter > heapBefore+4<<20 {
		t.Errorf("heap in use grew by %d MB under the subscription flood", (heapAfter-heapBefore)>>20)
	}
	if raceDetector {
		return // its shadow memory grows with every allocation, and stays
	}
	if e := os.Getenv("SWITCHBRIDGE_TEST_EMULATED"); e != "" {
		return // the resident size is the emulator's too, not the daemon's alone
	}
	if rssBefore > 0 && rssAfter > rssBefore+8<<20 {
		t.Errorf("resident size grew by %d MB (from %d MB) under the subscription flood", (rssAfter-rssBefore)>>20, rssBefore>>20)
	}
}

// settled collects the garbage, returns the freed memory to the system,
// and returns the heap in use and the resident size (0 where there is no
// /proc) in bytes: the daemon runs in the test's process.
func settled() (heap, rss uint64) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse, uint64(residentKB("VmRSS")) << 10
}

// A Zigbee2MQTT bridge of 200 devices behind one login works with the
// default bounds: its states reach the hub, it retains its availability,
// and a client of the login may subscribe per device.
func TestDaemonBrokerZigbeeBridgeOfTwoHundred(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	var sw, ids strings.Builder
	var devs []mqtttest.Z2MDevice
	for i := range 200 {
		fmt.Fprintf(&sw, "      - {id: z%d, name: Lamp %d, driver: mqtt, profile: zigbee2mqtt, friendly_name: lamp%d}\n", i, i, i)
		fmt.Fprintf(&ids, "z%d, ", i)
		devs = append(devs, mqtttest.Z2MDevice{Name: fmt.Sprint("lamp", i)})
	}
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, Config: fmt.Sprintf(`mqtt:
  broker: embedded
  listen: %s
  users:
    zigbee: {password: s3cret, switches: [%s]}
locations:
  - id: 1
    name: Home
    switches:
%s`, addr, strings.TrimSuffix(ids.String(), ", "), sw.String())})
	z := mqtttest.NewZ2M(t, "tcp://zigbee:s3cret@"+addr, "zigbee2mqtt", "2.x", devs...)

	// Its client per device, as some bridges subscribe.
	c, code := mqttLogin(t, "127.0.0.1", addr, "per-device", "zigbee", "s3cret")
	if code != 0 {
		t.Fatalf("login: code %#x", code)
	}
	fs := []string{"zigbee2mqtt/bridge/request/#"}
	for i := range 200 {
		fs = append(fs, fmt.Sprintf("zigbee2mqtt/lamp%d/set", i))
	}
	c.Write(mqtttest.Subscribe(4, fs...))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	codes, err := mqtttest.ReadSuback(bufio.NewReader(c), 4)
	if err != nil {
		t.Fatal(err)
	}
	for i, code := range codes {
		if code >= 0x80 {
			t.Fatalf("subscription %d (%s) of a 200-device bridge refused (%#x)", i, fs[i], code)
		}
	}

	u := h.AddUser(t, "alice", "pw", 1)
	app := h.AddApp(t, u, false, "https://svc.example/cb")
	g := h.Authorize(t, app, "alice", "pw", 1, "z0", "z199")
	// The hub commands only devices it has heard from.
	// (Its cache, not the API: polling that would spend the rate limit.)
	eventually(t, 30*time.Second, "the hub hears both devices", func() bool {
		states, err := h.Switchboard.States([]string{"z0", "z199"})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range states {
			if !st.State.Available {
				return false
			}
		}
		return true
	})
	if p := h.Command(t, g, "on"); p.StatusCode != 204 {
		t.Fatalf("PUT on for two of 200 Zigbee devices: %d %s", p.StatusCode, p.Body)
	}
	if !z.State("lamp0", "state") || !z.State("lamp199", "state") {
		t.Error("the devices did not switch on")
	}
	for _, reason := range []string{"subscription_bound", "retained_share", "client_id", "max_clients"} {
		if v := refusals(t, h, reason); v != 0 {
			t.Errorf("the bridge met a bound: %s %v", reason, v)
		}
	}
}

// 60 idle connections from one address (which filled the broker's single
// pool of places for connections logging in) no longer keep a plug from
// another address out, nor the hub's own client.
func TestDaemonBrokerIdleConnections(t *testing.T) {
	h, addr := brokerHub(t, "")
	for range 60 {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, Timeout: 3 * time.Second}
		if c, err := d.Dial("tcp", addr); err == nil {
			t.Cleanup(func() { c.Close() })
		}
	}
	if _, code := mqttLogin(t, "127.0.0.3", addr, "DVES_1A2B3C", "tas", "s3cret"); code != 0 {
		t.Fatalf("a plug from another address after 60 idle connections: code %#x", code)
	}
	if v := refusals(t, h, "handshake_address"); v < 60-16 {
		t.Errorf("%v connections counted as over their address's share, want at least 44", v)
	}
	if v := metric(t, h, `switchbridge_mqtt_connected{broker="tcp://`+addr+`"}`); v != 1 {
		t.Errorf("the hub's client: connected %v", v)
	}
}

// 300 wrong passwords for one login took 0.13 s and the right one then
// worked at once. Now the guesses are throttled per login and address,
// and counted; a plug at an address that has not failed logs in at once.
func TestDaemonBrokerPasswordGuessing(t *testing.T) {
	h, addr := brokerHub(t, "")
	for i := range 300 {
		if _, code := mqttLogin(t, "127.0.0.2", addr, fmt.Sprint("guess-", i), "tas", fmt.Sprint("guess-", i)); code == 0 {
			t.Fatalf("guess %d logged in", i)
		}
	}
	if _, code := mqttLogin(t, "127.0.0.2", addr, "right", "tas", "s3cret"); code == 0 {
		t.Error("the right password from the guessing address logged in at once")
	}
	if _, code := mqttLogin(t, "127.0.0.3", addr, "DVES_1A2B3C", "tas", "s3cret"); code != 0 {
		t.Errorf("the plug at a clean address: code %#x", code)
	}
	checked, throttled := refusals(t, h, "wrong_password"), refusals(t, h, "login_throttled")
	if checked > 5 || throttled < 295 {
		t.Errorf("%v wrong passwords checked, %v refused unchecked; want at most 5 checked", checked, throttled)
	}
}

// 1,100 retained messages of one login left no room for another login's
// retained state. Now each login has its own share.
func TestDaemonBrokerRetainedShare(t *testing.T) {
	h, addr := brokerHub(t, "")
	c, code := mqttLogin(t, "127.0.0.2", addr, "filler", "tas", "s3cret")
	if code != 0 {
		t.Fatalf("login: code %#x", code)
	}
	w := bufio.NewWriter(c)
	for i := range 1100 {
		w.Write(mqtttest.Packet(0x31, append(mqtttest.String(fmt.Sprintf("tele/tas1/fill/%d", i)), "x"...)))
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	// Once the filler's messages are through (the broker handles one
	// client's packets in order), the other login retains its state.
	eventually(t, 10*time.Second, "the filler's share full", func() bool { return refusals(t, h, "retained_share") >= 1100-512 })
	esp, code := mqttLogin(t, "127.0.0.3", addr, "esp-node", "esp", "pw2")
	if code != 0 {
		t.Fatalf("login: code %#x", code)
	}
	esp.Write(mqtttest.Packet(0x31, append(mqtttest.String("node/switch/relay/state"), "ON"...)))
	// A fresh client of that login is sent it as retained.
	r, code := mqttLogin(t, "127.0.0.3", addr, "esp-reader", "esp", "pw2")
	if code != 0 {
		t.Fatalf("login: code %#x", code)
	}
	eventually(t, 5*time.Second, "the other login's retained state", func() bool {
		r.Write(mqtttest.Subscribe(4, "node/switch/relay/state"))
		r.SetReadDeadline(time.Now().Add(time.Second))
		br := bufio.NewReader(r)
		for {
			first, body, err := mqtttest.ReadPacket(br)
			if err != nil {
				return false
			}
			if first>>4 == 3 && first&1 == 1 && strings.HasSuffix(string(body), "ON") {
				return true
			}
		}
	})
	if v := refusals(t, h, "retained_share"); v != 1100-512 {
		t.Errorf("%v retained messages counted beyond a share, want %d", v, 1100-512)
	}
}

// A login could connect with another plug's client id while that plug was
// offline and keep it out. A client id a login claims is now its own, and
// so is one it connected with first.
func TestDaemonBrokerClientIDSquatting(t *testing.T) {
	h, addr := brokerHub(t, "")
	for _, login := range [][2]string{{"esp", "pw2"}, {"old", "pw3"}} {
		if _, code := mqttLogin(t, "127.0.0.2", addr, "DVES_1A2B3C", login[0], login[1]); code != 2 {
			t.Errorf("login %s with the Tasmota plug's client id: code %#x, want 2 (identifier rejected)", login[0], code)
		}
	}
	if _, code := mqttLogin(t, "127.0.0.3", addr, "DVES_1A2B3C", "tas", "s3cret"); code != 0 {
		t.Errorf("the plug with its own client id: code %#x", code)
	}
	if v := refusals(t, h, "client_id"); v != 2 {
		t.Errorf("%v client ids counted as refused, want 2", v)
	}

	// A client id no config lists belongs to the login that used it
	// first, while its plug is offline and after the hub restarts.
	c, code := mqttLogin(t, "127.0.0.3", addr, "esp-node-1", "esp", "pw2")
	if code != 0 {
		t.Fatalf("the ESPHome node with a fresh client id: code %#x", code)
	}
	c.Close()
	if _, code := mqttLogin(t, "127.0.0.2", addr, "esp-node-1", "old", "pw3"); code != 2 {
		t.Errorf("another login with the offline node's client id: code %#x, want 2 (identifier rejected)", code)
	}
	h.Stop()
	_, addr = brokerHubOn(t, h.DataDir, "")
	if _, code := mqttLogin(t, "127.0.0.2", addr, "esp-node-1", "old", "pw3"); code != 2 {
		t.Errorf("after a restart, another login with the node's client id: code %#x, want 2", code)
	}
	if _, code := mqttLogin(t, "127.0.0.3", addr, "esp-node-1", "esp", "pw2"); code != 0 {
		t.Errorf("after a restart, the node with its own client id: code %#x", code)
	}
}

// eventually polls cond until it holds or d has passed.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
