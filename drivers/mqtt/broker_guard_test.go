package mqtt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/drivers"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// openDriver opens the mqtt driver of a config made by hubConfig, so a test
// can reach its embedded broker, and closes it at the end of the test.
func openDriver(t testing.TB, mqttSection string, switches ...string) *driver {
	t.Helper()
	return openDriverOn(t, nil, mqttSection, switches...)
}

// openDriverOn is openDriver with st as the hub's store (drivers.Env.Store).
func openDriverOn(t testing.TB, st any, mqttSection string, switches ...string) *driver {
	t.Helper()
	c, err := config.Load("test.yaml", config.Text(hubConfig(mqttSection, switches...)))
	if err != nil {
		t.Fatal(err)
	}
	dr, err := New(drivers.Env{Settings: c.Sections["mqtt"].Value, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	d := dr.(*driver)
	for _, s := range c.Locations[0].Switches {
		if err := d.Add(drivers.Spec{ID: s.ID, Name: s.Name, Options: s.Options, Line: s.Line}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Check(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := d.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	eventually(t, 5*time.Second, "hub connected to its broker", d.connected)
	return d
}

// ---- raw MQTT, for what paho will not send

// The raw packet builders, under the names these tests use.
var (
	mqttString  = mqtttest.String
	mqttPacket  = mqtttest.Packet
	mqttConnect = mqtttest.Connect
)

// malformedSubscribe is an MQTT 5 SUBSCRIBE whose property length (4) is
// shorter than its one user property, which runs on into the topic filter:
// mochi v2.7.9 then reads the filter's options byte past the end of the
// packet and panics ("index out of range").
var malformedSubscribe = mqttPacket(0x82, []byte{0, 1, 4, 0x26, 0, 1, 'a', 0, 1, 'b'})

// dialRaw connects to addr and writes the packets.
func dialRaw(t testing.TB, addr string, pkts ...[]byte) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	for _, p := range pkts {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// readConnack reads a CONNACK and returns its return (3.1.1) or reason (5)
// code.
func readConnack(c net.Conn) (byte, error) {
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	hdr := make([]byte, 2)
	if _, err := io.ReadFull(c, hdr); err != nil {
		return 0, err
	}
	if hdr[0] != 0x20 || hdr[1] < 2 || hdr[1] > 127 {
		return 0, fmt.Errorf("not a CONNACK: % x", hdr)
	}
	body := make([]byte, hdr[1])
	if _, err := io.ReadFull(c, body); err != nil {
		return 0, err
	}
	return body[1], nil
}

// closedByPeer waits up to 3 s for the broker to close c, discarding what
// it sends meanwhile.
func closedByPeer(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// pahoConnect connects a real client and returns it, or the error.
func pahoConnect(addr, clientID, user, pass string) (paho.Client, error) {
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).SetUsername(user).SetPassword(pass)
	o.SetConnectTimeout(2 * time.Second).SetAutoReconnect(false)
	c := paho.NewClient(o)
	tok := c.Connect()
	if !tok.WaitTimeout(3 * time.Second) {
		return nil, errors.New("no CONNACK")
	}
	if tok.Error() != nil {
		return nil, tok.Error()
	}
	return c, nil
}

// ---- requirement 1: no bytes a client sends take the process down

func TestEmbeddedBrokerSurvivesMalformedSubscribe(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr+"\nmqtt5: true\nusers: {plug: s3cret}",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)

	c := dialRaw(t, addr, mqttConnect(5, "attacker", "plug", "s3cret"))
	if code, err := readConnack(c); err != nil || code != 0 {
		t.Fatalf("MQTT 5 login refused: code %#x, %v", code, err)
	}
	if _, err := c.Write(malformedSubscribe); err != nil {
		t.Fatal(err)
	}
	if !closedByPeer(c) {
		t.Fatal("the connection that sent the malformed SUBSCRIBE is still open")
	}
	// mochi's own deferred clean-up closes the connection while the panic
	// unwinds, before the listener's recover runs: wait for the latter.
	eventually(t, 3*time.Second, "the panic recovered", func() bool { return d.broker.panics.Load() >= 1 })
	if n := d.broker.panics.Load(); n != 1 {
		t.Fatalf("%d panics recovered, want 1", n)
	}
	eventually(t, 3*time.Second, "the dropped client gone from the broker's client list", func() bool {
		_, ok := d.broker.srv.Clients.Get("attacker")
		return !ok
	})
	// The broker serves a fresh client, and the hub never lost its own.
	cl, err := pahoConnect(addr, "fresh", "plug", "s3cret")
	if err != nil {
		t.Fatalf("a new client after the panic: %v", err)
	}
	cl.Disconnect(0)
	if !d.connected() {
		t.Error("the hub's own client is no longer connected")
	}
}

func TestEmbeddedBrokerRefusesMQTT5(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr+"\nusers: {plug: s3cret}",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)

	c := dialRaw(t, addr, mqttConnect(5, "v5", "plug", "s3cret"))
	if code, err := readConnack(c); err != nil || code != 0x84 {
		t.Fatalf("MQTT 5 CONNECT answered code %#x (%v), want 0x84 unsupported protocol version", code, err)
	}
	// Nothing it sends afterwards is decoded.
	c.Write(malformedSubscribe)
	if !closedByPeer(c) {
		t.Error("connection still open after the refusal")
	}
	if n := d.broker.panics.Load(); n != 0 {
		t.Errorf("%d panics: the refused client's packets were decoded", n)
	}
	// MQTT 3.1.1 still works.
	c4 := dialRaw(t, addr, mqttConnect(4, "v4", "plug", "s3cret"))
	if code, err := readConnack(c4); err != nil || code != 0 {
		t.Fatalf("MQTT 3.1.1 login: code %#x, %v", code, err)
	}
}

// ---- requirement 2: memory before login

func TestEmbeddedBrokerMemoryBeforeLogin(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr+"\nusers: {plug: s3cret}",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)
	if got := d.broker.srv.Options.Capabilities.MaximumPacketSize; got != DefaultMaxPacketSize {
		t.Errorf("maximum packet size %d, want %d", got, DefaultMaxPacketSize)
	}

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapInuse
	}
	before := heap()
	// The process's peak resident size is reset here where Linux allows it
	// (clear_refs), so a 256 MB buffer allocated and freed in between still
	// shows; otherwise the resident size after is compared.
	peakReset := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	rssBefore := procStatus(t, "VmRSS")
	// Each announces a CONNECT of 256 MB (the largest remaining length) and
	// sends no more: mochi used to allocate it all before any login.
	var conns []net.Conn
	for i := 0; i < 4; i++ {
		conns = append(conns, dialRaw(t, addr, []byte{0x10, 0xFF, 0xFF, 0xFF, 0x7F}))
	}
	for i, c := range conns {
		if !closedByPeer(c) {
			t.Errorf("connection %d announcing 256 MB is still open", i)
		}
	}
	after := heap()
	if after > before && after-before > 4<<20 {
		t.Errorf("heap in use grew by %d MB", (after-before)>>20)
	}
	rssAfter, what := procStatus(t, "VmRSS"), "resident size"
	if peakReset {
		rssAfter, what = procStatus(t, "VmHWM"), "peak resident size"
	}
	if rssBefore > 0 && rssAfter > rssBefore+8<<20 {
		t.Errorf("%s grew by %d MB (from %d MB)", what, (rssAfter-rssBefore)>>20, rssBefore>>20)
	}
}

// procStatus returns a size field of /proc/self/status in bytes, 0 where
// there is none (not Linux).
func procStatus(t *testing.T, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			var kb uint64
			fmt.Sscanf(strings.TrimSpace(v), "%d kB", &kb)
			return kb << 10
		}
	}
	return 0
}

// One address holds at most its share of the connections still logging
// in: one over it is closed at once, while a plug from another address
// still logs in; places come back as connections close.
func TestEmbeddedBrokerConnectionBound(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr+"\nmax_clients: 2\nusers: {plug: s3cret}",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)
	share := d.broker.listener.perAddr
	var idle []net.Conn
	for range share {
		idle = append(idle, mqtttest.DialFrom(t, "127.0.0.2", addr))
	}
	eventually(t, 3*time.Second, "the idle connections accepted", func() bool { return d.broker.listener.handshakes() == share })
	over := mqtttest.DialFrom(t, "127.0.0.2", addr, mqttConnect(4, "over", "plug", "s3cret"))
	if _, err := readConnack(over); err == nil {
		t.Fatal("a connection over its address's share was served")
	}
	c := mqtttest.DialFrom(t, "127.0.0.3", addr, mqttConnect(4, "other", "plug", "s3cret"))
	if code, err := readConnack(c); err != nil || code != 0 {
		t.Fatalf("a plug from another address: code %#x, %v", code, err)
	}
	for _, c := range idle {
		c.Close()
	}
	// Places come back as connections close.
	eventually(t, 3*time.Second, "a login from the address once its places are free", func() bool {
		c := mqtttest.DialFrom(t, "127.0.0.2", addr, mqttConnect(4, "later", "plug", "s3cret"))
		defer c.Close()
		code, err := readConnack(c)
		return err == nil && code == 0
	})
}

// ---- requirement 3: what each login may do

func TestEmbeddedBrokerACL(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	h := startHub(t, hubConfig("broker: embedded\nlisten: "+addr+"\nclient_id: the-hub\nconfirm_timeout: 2s\n"+
		"users:\n  tas: {password: p1, switches: [tas]}\n  esp: {password: p2, switches: [esp]}\n  old: p3\n"+
		"  sha: {password: p4, switches: [sha]}\n  shb: {password: p5, switches: [shb]}",
		`id: tas, name: Tasmota, profile: tasmota, topic: tas1`,
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`,
		`id: free, name: Free, profile: generic, state_topic: free/state, command_topic: free/set`,
		`id: sha, name: Shelly A, profile: shelly-rpc, prefix: shellyplus1-a`,
		`id: shb, name: Shelly B, profile: shelly-rpc, prefix: shellyplus1-b`))
	tas := mqtttest.NewTasmota(t, "tcp://tas:p1@"+addr, mqtttest.TasmotaOptions{Topic: "tas1"})
	esp := mqtttest.NewESPHome(t, "tcp://esp:p2@"+addr, "node", "relay")
	mqtttest.NewShellyRPC(t, "tcp://sha:p4@"+addr, "shellyplus1-a", 1, false)
	shb := mqtttest.NewShellyRPC(t, "tcp://shb:p5@"+addr, "shellyplus1-b", 1, false)
	eventually(t, 3*time.Second, "shb online", func() bool { return h.state(t, "shb").Available })
	eventually(t, 3*time.Second, "tas reported", func() bool { st := h.state(t, "tas"); return st.Available && !st.Updated.IsZero() })
	eventually(t, 3*time.Second, "esp reported", func() bool { return !h.state(t, "esp").Updated.IsZero() })

	espc, err := pahoConnect(addr, "esp-2", "esp", "p2")
	if err != nil {
		t.Fatal(err)
	}
	defer espc.Disconnect(0)
	oldc, err := pahoConnect(addr, "old-1", "old", "p3")
	if err != nil {
		t.Fatal(err)
	}
	defer oldc.Disconnect(0)
	publish := func(c paho.Client, topic string, retained bool, payload string) {
		t.Helper()
		if tok := c.Publish(topic, 1, retained, payload); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", topic, tok.Error())
		}
	}
	// barrier publishes a state the client may publish (esp's for esp's
	// login, the unclaimed free's for old) and waits for the hub to see it:
	// the broker handles one client's packets in order, so what the client
	// published before has been delivered, or dropped, by then.
	n := 0
	barrier := func(c paho.Client) {
		t.Helper()
		n++
		topic, id := "node/switch/relay/state", "esp"
		if c == oldc {
			topic, id = "free/state", "free"
		}
		v := []bridge.Value{bridge.On, bridge.Off}[n%2]
		publish(c, topic, false, strings.ToUpper(string(v)))
		eventually(t, 3*time.Second, "barrier state seen", func() bool { return h.state(t, id).Value == v })
	}

	t.Run("another plug's state", func(t *testing.T) {
		publish(espc, "stat/tas1/POWER", false, "ON")
		publish(espc, "stat/tas1/RESULT", false, `{"POWER":"ON"}`)
		barrier(espc)
		if v := h.state(t, "tas").Value; v == bridge.On {
			t.Error("esp's login reported tas's state")
		}
	})

	t.Run("commands", func(t *testing.T) {
		// The plug stays off. (Counting the commands it receives would not
		// tell: the hub itself may ask it for its state meanwhile, with an
		// empty POWER, while it re-asks plugs after connecting.)
		publish(espc, "cmnd/tas1/POWER", false, "ON")
		publish(espc, "cmnd/tasmotas/POWER", false, "ON") // Tasmota's group topic
		publish(oldc, "cmnd/tas1/POWER", false, "ON")
		barrier(espc)
		barrier(oldc)
		if tas.On() {
			t.Error("a plug login switched tas on")
		}
		// The hub's commands get through, and the tied login reports.
		if err := h.Command(context.Background(), []string{"tas"}, bridge.CommandOn); err != nil {
			t.Fatalf("hub command: %v", err)
		}
		if !tas.On() || h.state(t, "tas").Value != bridge.On {
			t.Error("tas did not switch on and report for the hub")
		}
	})

	t.Run("retained command", func(t *testing.T) {
		publish(oldc, "cmnd/tas1/POWER", true, "OFF")
		publish(espc, "node/switch/relay/command", true, "OFF")
		barrier(oldc)
		barrier(espc)
		got := make(chan string, 4)
		c, err := pahoConnect(addr, "tas-observer", "tas", "p1")
		if err != nil {
			t.Fatal(err)
		}
		defer c.Disconnect(0)
		c.Subscribe("cmnd/tas1/#", 1, func(_ paho.Client, m paho.Message) { got <- m.Topic() }).WaitTimeout(3 * time.Second)
		select {
		case topic := <-got:
			t.Errorf("retained command on %s", topic)
		case <-time.After(300 * time.Millisecond):
		}
		retained := hubDriver(h).broker.srv.Topics.Retained
		if _, ok := retained.Get("tele/tas1/LWT"); !ok {
			t.Error("tas's retained will is missing: the check above proves nothing")
		}
		for _, topic := range []string{"cmnd/tas1/POWER", "node/switch/relay/command"} {
			if _, ok := retained.Get(topic); ok {
				t.Errorf("%s is retained", topic)
			}
		}
	})

	t.Run("another Shelly's reply", func(t *testing.T) {
		// Shelly RPC plugs answer on a reply topic per switch, which only
		// that switch's login may publish on, and an answer counts only
		// for a request of the switch whose topic it came on. Here sha's
		// login forges the answers to shb's command, knowing its request id
		// (as if it had guessed it), while shb itself stays silent.
		ac, err := pahoConnect(addr, "sha-forger", "sha", "p4")
		if err != nil {
			t.Fatal(err)
		}
		defer ac.Disconnect(0)
		shb.SetSilent(true)
		defer shb.SetSilent(false)
		d := hubDriver(h)
		for _, forged := range []string{`"result":{"was_on":false}`, `"error":{"code":-103,"message":"forged"}`} {
			done := make(chan error, 1)
			go func() { done <- command(h, "shb", bridge.CommandOn) }()
			var id uint64
			eventually(t, 3*time.Second, "shb's request pending", func() bool {
				d.mu.Lock()
				defer d.mu.Unlock()
				for i, c := range d.pending {
					if c.dev.id == "shb" {
						id = i
					}
				}
				return id != 0
			})
			frame := fmt.Sprintf(`{"id":%d,"src":"shellyplus1-a","dst":"the-hub-shb",%s}`, id, forged)
			// On every reply topic the hub reads: shb's, and sha's own.
			for topic := range d.plugs().replies {
				publish(ac, topic, false, frame)
			}
			err := <-done
			if r := failures(err)["shb"]; r != bridge.FailTimeout {
				t.Errorf("shb's command with forged answers %s: reason %q (%v), want %q", forged, r, err, bridge.FailTimeout)
			}
		}
		// The broker refused the forgery on shb's topic, not only the hub.
		rules := d.brokerRules()
		for login, want := range map[string]bool{"sha": false, "shb": true, "old": false} {
			if got := rules.mayPublish(login, "the-hub-shb/rpc"); got != want {
				t.Errorf("login %s may publish shb's replies: %v, want %v", login, got, want)
			}
		}
		if st := h.state(t, "shb"); st.Value == bridge.On || shb.On() {
			t.Errorf("shb is %+v (device on=%v) after forged confirmations", st, shb.On())
		}
	})

	t.Run("wildcards", func(t *testing.T) {
		for _, c := range []paho.Client{espc, oldc} {
			for _, f := range []string{"#", "+/#", "+/tas1/POWER", "$SYS/#"} {
				tok := c.Subscribe(f, 0, nil)
				if !tok.WaitTimeout(3 * time.Second) {
					t.Fatal("no SUBACK")
				}
				if code := tok.(*paho.SubscribeToken).Result()[f]; code != 0x80 {
					t.Errorf("subscription to %s granted (%#x)", f, code)
				}
			}
		}
		// A tied login reads only its own plug's topics.
		tok := espc.Subscribe("stat/tas1/#", 0, nil)
		tok.WaitTimeout(3 * time.Second)
		if code := tok.(*paho.SubscribeToken).Result()["stat/tas1/#"]; code != 0x80 {
			t.Errorf("esp's login may read tas's topics (%#x)", code)
		}
	})

	t.Run("the hub's client id", func(t *testing.T) {
		for _, login := range [][2]string{{"esp", "p2"}, {"old", "p3"}} {
			if c, err := pahoConnect(addr, "the-hub", login[0], login[1]); err == nil {
				c.Disconnect(0)
				t.Errorf("login %s connected as the hub", login[0])
			}
		}
		// Nor can one login take another's connected client id.
		if c, err := pahoConnect(addr, "esp-2", "old", "p3"); err == nil {
			c.Disconnect(0)
			t.Error("login old took esp's connected client id")
		}
		if !hubDriver(h).connected() {
			t.Fatal("the hub lost its broker connection")
		}
		if err := h.Command(context.Background(), []string{"tas"}, bridge.CommandOff); err != nil {
			t.Fatalf("hub command after the attempts: %v", err)
		}
	})

	t.Run("last will", func(t *testing.T) {
		o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("willful").SetUsername("old").SetPassword("p3")
		o.SetWill("cmnd/tas1/POWER", "ON", 1, true).SetConnectTimeout(2 * time.Second).SetAutoReconnect(false)
		c := paho.NewClient(o)
		if tok := c.Connect(); tok.WaitTimeout(3*time.Second) && tok.Error() == nil {
			c.Disconnect(0)
			t.Error("a client with a will on a command topic connected")
		}
	})

	_ = esp
}

// hubDriver digs the mqtt driver out of a test hub.
func hubDriver(h *testHub) *driver {
	sw, _ := h.Switch("tas")
	return sw.Device.(*device).d
}
