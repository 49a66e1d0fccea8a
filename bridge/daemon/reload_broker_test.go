package daemon_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// loginPlug is a Tasmota-like plug with a login of the embedded broker: a
// real MQTT client that announces itself (will tele/<topic>/LWT Offline),
// answers POWER commands and queries on stat/<topic>/POWER and counts its
// connections and their losses.
type loginPlug struct {
	t     *testing.T
	topic string
	c     paho.Client

	connects, losses atomic.Int32

	mu      sync.Mutex // orders the plug's reports: one at a time, as firmware sends them
	on      bool
	sent    bool // a report went out
	changes int  // reports that changed the value the plug last reported
}

func startLoginPlug(t *testing.T, addr, user, password, topic string) *loginPlug {
	return startLoginPlugRetrying(t, addr, user, password, topic, 200*time.Millisecond)
}

// startLoginPlugRetrying is startLoginPlug with the longest wait between
// the plug's reconnect attempts.
func startLoginPlugRetrying(t *testing.T, addr, user, password, topic string, retry time.Duration) *loginPlug {
	t.Helper()
	p := &loginPlug{t: t, topic: topic}
	up := make(chan struct{}, 1)
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("DVES_" + topic).SetUsername(user).SetPassword(password)
	o.SetWill("tele/"+topic+"/LWT", "Offline", 1, true)
	o.SetAutoReconnect(true).SetMaxReconnectInterval(retry).SetConnectTimeout(2 * time.Second)
	o.SetOnConnectHandler(func(c paho.Client) {
		p.connects.Add(1)
		c.Subscribe("cmnd/"+topic+"/#", 0, func(_ paho.Client, m paho.Message) {
			switch strings.ToUpper(string(m.Payload())) {
			case "ON":
				p.answer(true)
			case "OFF":
				p.answer(false)
			case "":
				p.mu.Lock()
				on := p.on
				p.mu.Unlock()
				p.answer(on)
			}
		}).WaitTimeout(5 * time.Second)
		c.Publish("tele/"+topic+"/LWT", 1, true, "Online").WaitTimeout(5 * time.Second)
		select {
		case up <- struct{}{}:
		default:
		}
	})
	o.SetConnectionLostHandler(func(paho.Client, error) { p.losses.Add(1) })
	p.c = paho.NewClient(o)
	if tok := p.c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("plug %s (login %s) did not connect: %v", topic, user, tok.Error())
	}
	select {
	case <-up:
	case <-time.After(5 * time.Second):
		t.Fatalf("plug %s did not subscribe and announce itself", topic)
	}
	t.Cleanup(func() { p.c.Disconnect(0) })
	return p
}

// report publishes the relay's state, as the plug's button or a command
// makes it do; it counts each report that changes the value.
func (p *loginPlug) report(on bool) { p.send(on, false) }

// answer reports the relay's state in answer to the hub.
func (p *loginPlug) answer(on bool) { p.send(on, true) }

// send publishes a report; one that answers the hub may be lost with the
// broker (below).
func (p *loginPlug) send(on, answering bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.sent || on != p.on {
		p.changes++
	}
	p.on, p.sent = on, true
	payload := "OFF"
	if on {
		payload = "ON"
	}
	// QoS 1, so the broker has each report before the next is sent: the
	// count of reports is the plug's own, whatever the socket buffers.
	if tok := p.c.Publish("stat/"+p.topic+"/POWER", 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		if answering {
			// An answer to the hub's command or query, from paho's
			// goroutine, possibly after the test ended: one that met the
			// broker going away (the test moves it) is lost as a real
			// plug's is, and the hub asks again once it is back. What
			// the test checks is what reached the hub.
			return
		}
		p.t.Errorf("plug %s could not report: %v", p.topic, tok.Error())
	}
}

func (p *loginPlug) changed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changes
}

// brokerConfig is a hub config with the embedded broker on listen, the
// logins in users (YAML flow mappings, one a line) and a tasmota switch
// per topic.
func brokerConfig(dataDir, listen string, users []string, topics ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: %q\n", dataDir)
	fmt.Fprintf(&b, "mqtt:\n  broker: embedded\n  listen: %s\n  client_id: reload-hub\n  users:\n", listen)
	for _, u := range users {
		b.WriteString("    " + u + "\n")
	}
	b.WriteString("locations:\n  - id: 1\n    name: Home\n    switches:\n")
	for _, t := range topics {
		fmt.Fprintf(&b, "      - {id: %s, name: %s, driver: mqtt, profile: tasmota, topic: %s}\n", t, t, t)
	}
	return b.String()
}

// TestReloadKeepsPlugsConnected: a reload that adds a switch and its login,
// removes another's login and changes a third's password, under a steady
// stream of reports from two plugs whose logins do not change, loses none
// of their reports (each change is one event of the stream) and does not
// reconnect them; it disconnects the removed login's and the changed
// password's plugs then, and only then; the new plug gets in and is served.
// A reload that moves mqtt.listen says the broker restarts, and every plug
// is unavailable until it reports again.
func TestReloadKeepsPlugsConnected(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	logs := &logtest.Buffer{}
	users := []string{
		"kitchen: {password: k1, switches: [kitchen]}",
		"hall: {password: h1, switches: [hall]}",
		"attic: {password: a1, switches: [attic]}",
		"cellar: {password: c1, switches: [cellar]}",
	}
	dataDir := t.TempDir()
	body, _ := strings.CutPrefix(brokerConfig(dataDir, addr, users, "kitchen", "hall", "attic", "cellar"),
		fmt.Sprintf("server: {listen: 127.0.0.1:0, metrics_listen: \"off\"}\ndata_dir: %q\n", dataDir))
	h := daemontest.StartWith(t, daemontest.Options{Config: body, DataDir: dataDir, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	reload := func(text string) {
		t.Helper()
		cfg, err := config.Load("next.yaml", config.Text(text))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := h.Reload(context.Background(), cfg); err != nil {
			t.Fatalf("reload: %v", err)
		}
		t.Logf("reload took %s", time.Since(start).Round(time.Millisecond))
	}
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)

	kitchen := startLoginPlug(t, addr, "kitchen", "k1", "kitchen")
	hall := startLoginPlug(t, addr, "hall", "h1", "hall")
	attic := startLoginPlug(t, addr, "attic", "a1", "attic")
	// Its retries with the old password stay within the broker's free
	// failures (broker_throttle.go), so its new password is let in at once.
	cellar := startLoginPlugRetrying(t, addr, "cellar", "c1", "cellar", time.Second)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen", "hall")
	waitFor(t, 10*time.Second, "every plug available", func() bool {
		for _, id := range []string{"kitchen", "hall", "attic", "cellar"} {
			if sw, ok := h.Switchboard.Switch(id); !ok || !sw.Device.State().Available {
				return false
			}
		}
		return true
	})
	s := openStream(t, h, g, "")
	s.next() // the snapshot

	// The steady stream: each plug reports a change every 5 ms; the reload
	// comes in the middle of it.
	const reports = 200
	var wg sync.WaitGroup
	halfway := make(chan struct{}, 2)
	base := map[*loginPlug]int{kitchen: kitchen.changed(), hall: hall.changed()}
	for _, p := range []*loginPlug{kitchen, hall} {
		wg.Go(func() {
			for i := range reports {
				p.report(i%2 == 0)
				if i == reports/4 {
					halfway <- struct{}{}
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	<-halfway
	<-halfway
	if attic.losses.Load() != 0 || cellar.losses.Load() != 0 {
		t.Fatal("a plug was disconnected before the reload")
	}
	reload(brokerConfig(dataDir, addr, []string{
		"kitchen: {password: k1, switches: [kitchen]}",
		"hall: {password: h1, switches: [hall]}",
		"cellar: {password: c2, switches: [cellar]}",
		"porch: {password: p1, switches: [porch]}",
	}, "kitchen", "hall", "cellar", "porch"))
	waitFor(t, 10*time.Second, "the removed login's and the changed password's plugs disconnected", func() bool {
		return attic.losses.Load() > 0 && cellar.losses.Load() > 0
	})
	wg.Wait()

	// Every change the two plugs reported is an event: none was lost.
	want := map[string]int{"kitchen": kitchen.changed() - base[kitchen], "hall": hall.changed() - base[hall]}
	got := map[string]int{}
	deadline := time.Now().Add(20 * time.Second)
	for got["kitchen"] < want["kitchen"] || got["hall"] < want["hall"] {
		if time.Now().After(deadline) {
			t.Fatalf("events %v, want %v: reports were lost", got, want)
		}
		_, sw := s.nextSwitch()
		if !sw.Available {
			t.Fatalf("a plug kept through the reload became unavailable: %+v", sw)
		}
		got[sw.ID]++
	}
	t.Logf("through the reload: %v changes reported, %v events", want, got)
	for _, p := range []*loginPlug{kitchen, hall} {
		if c, l := p.connects.Load(), p.losses.Load(); c != 1 || l != 0 {
			t.Errorf("plug %s: %d connects, %d losses; want its one connection kept", p.topic, c, l)
		}
	}
	if sw, _ := h.Switchboard.Switch("cellar"); sw == nil {
		t.Fatal("cellar is no longer served")
	}
	// The cellar plug, with its old password, stays out.
	time.Sleep(1500 * time.Millisecond) // past its first reconnect attempt
	if cellar.c.IsConnectionOpen() {
		t.Error("the cellar plug got back in with its old password")
	}
	if sw, _ := h.Switchboard.Switch("cellar"); sw.Device.State().Available {
		t.Error("cellar is available though its plug was disconnected (its will said Offline)")
	}
	cellar.c.Disconnect(0)
	startLoginPlug(t, addr, "cellar", "c2", "cellar")
	// The new switch: unavailable until its plug reports; its login gets in.
	if sw, ok := h.Switchboard.Switch("porch"); !ok || sw.Device.State().Available {
		t.Fatalf("porch after the reload: served %v, want it served and unavailable until heard from", ok)
	}
	startLoginPlug(t, addr, "porch", "p1", "porch")
	waitFor(t, 10*time.Second, "the new plug and the cellar's, back with its new password, available", func() bool {
		p, _ := h.Switchboard.Switch("porch")
		c, _ := h.Switchboard.Switch("cellar")
		return p.Device.State().Available && c.Device.State().Available
	})
	if p := h.Command(t, g, "on"); p.StatusCode != 204 || !kitchen.on || !hall.on {
		t.Errorf("PUT on after the reload = %d %s", p.StatusCode, p.Body)
	}

	// A new listen address: the broker restarts, says so, and no plug is
	// claimed until it reports on the new address.
	moved := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	reload(brokerConfig(dataDir, moved, []string{
		"kitchen: {password: k1, switches: [kitchen]}",
		"hall: {password: h1, switches: [hall]}",
	}, "kitchen", "hall"))
	if !strings.Contains(logs.String(), "need the embedded broker to start again") || !strings.Contains(logs.String(), "keys=listen") {
		t.Errorf("the log does not say the broker restarts for mqtt.listen:\n%s", logs)
	}
	for _, l := range h.List(t, g) {
		if l.Available {
			t.Errorf("%s is available right after the broker moved, before its plug reported", l.ID)
		}
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the old listen address still accepts connections")
	}
	startLoginPlug(t, moved, "kitchen", "k1", "kitchen")
	waitFor(t, 10*time.Second, "kitchen available once it reports on the new address", func() bool {
		l := h.List(t, g)
		return l[0].ID == "kitchen" && l[0].Available && !l[1].Available
	})
}
