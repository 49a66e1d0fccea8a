package mqtt

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// The embedded broker's bounds on what one client can make it hold, each
// exercised through a real connection: retained messages (count and size,
// last wills included), in-flight messages and topic aliases.

// boundsBroker opens a hub with an embedded broker and one login of the
// older form (a password alone), which may publish anything but commands.
func boundsBroker(t *testing.T, extra string) (*driver, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr+"\nusers: {plug: s3cret}"+extra,
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)
	return d, addr
}

// mqttConnectWill is a 3.1.1 CONNECT with a login and a QoS 0 last will.
func mqttConnectWill(clientID, user, pass, willTopic string, will []byte, retain bool) []byte {
	flags := byte(0x02 | 0x04 | 0xC0)
	if retain {
		flags |= 0x20
	}
	body := append(mqttString("MQTT"), 4, flags, 0, 30)
	body = append(body, mqttString(clientID)...)
	body = append(body, mqttString(willTopic)...)
	body = append(body, byte(len(will)>>8), byte(len(will)))
	body = append(body, will...)
	body = append(body, mqttString(user)...)
	body = append(body, mqttString(pass)...)
	return mqttPacket(0x10, body)
}

// watch subscribes a fresh client of the test login to filter and returns
// the topics of what it is sent.
func watch(t *testing.T, addr, filter string) <-chan string {
	t.Helper()
	return watchWhere(t, addr, filter, func(paho.Message) bool { return true })
}

// watchWhere is watch for the messages keep takes.
func watchWhere(t *testing.T, addr, filter string, keep func(paho.Message) bool) <-chan string {
	t.Helper()
	c, err := pahoConnect(addr, "watcher-"+filter, "plug", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect(0) })
	got := make(chan string, 64)
	tok := c.Subscribe(filter, 0, func(_ paho.Client, m paho.Message) {
		if !keep(m) {
			return
		}
		select {
		case got <- m.Topic():
		default:
		}
	})
	if !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", filter, tok.Error())
	}
	return got
}

// receive waits for topic on got.
func receive(t *testing.T, got <-chan string, topic string) {
	t.Helper()
	receiveAll(t, got, topic)
}

// receiveAll waits for every one of topics on got, in any order: messages
// of different clients may reach a subscriber in either order.
func receiveAll(t *testing.T, got <-chan string, topics ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, tp := range topics {
		want[tp] = true
	}
	deadline := time.After(3 * time.Second)
	for len(want) > 0 {
		select {
		case tp := <-got:
			delete(want, tp)
		case <-deadline:
			t.Fatalf("not delivered: %v", want)
		}
	}
}

// dieWithWill connects a client with a last will and drops its connection
// without a DISCONNECT, so the broker sends the will.
func dieWithWill(t *testing.T, addr, topic string, will []byte) {
	t.Helper()
	c := dialRaw(t, addr, mqttConnectWill("willful-"+topic, "plug", "s3cret", topic, will, true))
	if code, err := readConnack(c); err != nil || code != 0 {
		t.Fatalf("CONNECT with a will on %s: code %#x, %v", topic, code, err)
	}
	c.Close()
}

func TestEmbeddedBrokerRetainedBounds(t *testing.T) {
	d, addr := boundsBroker(t, "")
	retained := d.broker.srv.Topics.Retained
	pub, err := pahoConnect(addr, "pub", "plug", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(0)
	publish := func(topic string, payload []byte) {
		t.Helper()
		if tok := pub.Publish(topic, 1, true, payload); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", topic, tok.Error())
		}
	}
	got := watch(t, addr, "bounds/#")
	isRetained := func(topic string) bool { _, ok := retained.Get(topic); return ok }

	t.Run("size", func(t *testing.T) {
		publish("bounds/fits", bytes.Repeat([]byte("x"), maxRetainedPayload))
		publish("bounds/big", bytes.Repeat([]byte("x"), maxRetainedPayload+1))
		receive(t, got, "bounds/fits")
		receive(t, got, "bounds/big")
		if !isRetained("bounds/fits") {
			t.Errorf("a retained message of %d bytes was not kept", maxRetainedPayload)
		}
		if isRetained("bounds/big") {
			t.Errorf("a retained message of %d bytes was kept", maxRetainedPayload+1)
		}
	})

	t.Run("will size", func(t *testing.T) {
		// The login may hold one client per switch and two more: the first
		// will's client must be gone before the next connects.
		before := atomic.LoadInt64(&d.broker.srv.Info.ClientsConnected)
		dieWithWill(t, addr, "bounds/will-fits", []byte("offline"))
		eventually(t, 3*time.Second, "the first will's client gone", func() bool {
			return atomic.LoadInt64(&d.broker.srv.Info.ClientsConnected) <= before
		})
		dieWithWill(t, addr, "bounds/will-big", bytes.Repeat([]byte("x"), maxRetainedPayload+1))
		receiveAll(t, got, "bounds/will-fits", "bounds/will-big")
		if !isRetained("bounds/will-fits") {
			t.Error("a small retained will was not kept")
		}
		if isRetained("bounds/will-big") {
			t.Errorf("a retained will of %d bytes was kept", maxRetainedPayload+1)
		}
	})

	t.Run("count", func(t *testing.T) {
		share := DefaultMaxRetainedPerLogin
		used := func() int {
			r := d.broker.hook.retained
			r.mu.Lock()
			defer r.mu.Unlock()
			return r.used["plug"].count
		}
		for i := 0; used() < share && i < share; i++ {
			publish(fmt.Sprintf("fill/%d", i), []byte("x"))
		}
		if n := used(); n != share {
			t.Fatalf("the login holds %d retained messages after filling, want %d", n, share)
		}
		before := retained.Len()
		publish("bounds/over", []byte("x"))
		receive(t, got, "bounds/over")
		if isRetained("bounds/over") {
			t.Error("a retained message beyond the login's share was kept")
		}
		dieWithWill(t, addr, "bounds/will-over", []byte("offline"))
		receive(t, got, "bounds/will-over")
		if isRetained("bounds/will-over") {
			t.Error("a retained will beyond the login's share was kept")
		}
		if n := retained.Len(); n != before {
			t.Errorf("%d retained messages, want %d", n, before)
		}
		// A full share still takes a new value for a topic it holds.
		publish("bounds/fits", []byte("new"))
		receive(t, got, "bounds/fits")
		if m, ok := retained.Get("bounds/fits"); !ok || string(m.Payload) != "new" {
			t.Error("a retained message was not replaced in a full share")
		}
		// Clearing one makes room for another.
		publish("fill/0", nil)
		publish("bounds/after-clear", []byte("x"))
		receive(t, got, "bounds/after-clear")
		if !isRetained("bounds/after-clear") {
			t.Error("a retained message was not kept after the login cleared one of its own")
		}
	})
}

func TestEmbeddedBrokerInflightBound(t *testing.T) {
	d, addr := boundsBroker(t, "")
	// A subscriber that never acknowledges a QoS 1 message.
	c := dialRaw(t, addr, mqttConnect(4, "slow", "plug", "s3cret"))
	if code, err := readConnack(c); err != nil || code != 0 {
		t.Fatalf("login: code %#x, %v", code, err)
	}
	sub := append([]byte{0, 1}, mqttString("flood/#")...)
	if _, err := c.Write(mqttPacket(0x82, append(sub, 1))); err != nil {
		t.Fatal(err)
	}
	suback := make([]byte, 5)
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := io.ReadFull(c, suback); err != nil || suback[0] != 0x90 || suback[4] != 1 {
		t.Fatalf("SUBACK % x, %v", suback, err)
	}

	pub, err := pahoConnect(addr, "pub", "plug", "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Disconnect(0)
	const sent = maxInflight + 64
	for i := 0; i < sent; i++ {
		if tok := pub.Publish("flood/x", 1, false, fmt.Sprint(i)); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %d: %v", i, tok.Error())
		}
	}
	// The broker acknowledges a QoS 1 publish before it delivers it: wait
	// for the last deliveries.
	cl, ok := d.broker.srv.Clients.Get("slow")
	if !ok {
		t.Fatal("the slow subscriber is gone")
	}
	eventually(t, 3*time.Second, fmt.Sprintf("%d messages handled for the slow subscriber", sent), func() bool {
		return cl.State.Inflight.Len()+int(atomic.LoadInt64(&d.broker.srv.Info.InflightDropped)) >= sent
	})
	if n := cl.State.Inflight.Len(); n != maxInflight {
		t.Errorf("%d messages in flight for a subscriber that acknowledges none, want %d", n, maxInflight)
	}
}

// mqttPublish5 is an MQTT 5 QoS 0 PUBLISH of payload on topic with a topic
// alias.
func mqttPublish5(topic string, alias uint16, payload string) []byte {
	body := mqttString(topic)
	body = append(body, 3, 0x23, byte(alias>>8), byte(alias))
	return mqttPacket(0x30, append(body, payload...))
}

func TestEmbeddedBrokerTopicAliasBound(t *testing.T) {
	_, addr := boundsBroker(t, "\nmqtt5: true")
	got := watch(t, addr, "alias/#")
	c := dialRaw(t, addr, mqttConnect(5, "aliaser", "plug", "s3cret"))
	if code, err := readConnack(c); err != nil || code != 0 {
		t.Fatalf("MQTT 5 login: code %#x, %v", code, err)
	}
	// mochi v2.7.9 does not announce its Topic Alias Maximum in the
	// CONNACK; it enforces it.
	if _, err := c.Write(mqttPublish5("alias/last", topicAliases, "x")); err != nil {
		t.Fatal(err)
	}
	receive(t, got, "alias/last")
	if _, err := c.Write(mqttPublish5("alias/over", topicAliases+1, "x")); err != nil {
		t.Fatal(err)
	}
	if !closedByPeer(c) {
		t.Errorf("a client using topic alias %d is still connected", topicAliases+1)
	}
}

// One login that connects with ever new client ids and persistent sessions
// keeps only its few newest sessions, and another plug still gets in: the
// broker's session records (2 × max_clients) are not filled for the 10
// minutes a session is kept.
func TestEmbeddedBrokerSessionsPerLogin(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr+"\nmax_clients: 4\nusers: {plug: s3cret, other: pw2}",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)
	srv := d.broker.srv
	bound := 1 + spareSessions // a login of the older form may serve the one switch
	kept := func(user string) (ids []string) {
		for id, c := range srv.Clients.GetAll() {
			if c.StopTime() != 0 && string(c.Properties.Username) == user {
				ids = append(ids, id)
			}
		}
		return ids
	}

	const ids = 2*4 + 4 // more than the broker's session records
	last := ""
	for i := range ids {
		id := fmt.Sprintf("rotating-%d", i)
		o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetUsername("plug").SetPassword("s3cret")
		o.SetCleanSession(false).SetConnectTimeout(2 * time.Second).SetAutoReconnect(false)
		c := paho.NewClient(o)
		if tok := c.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
			t.Fatalf("client id %d refused: %v", i, tok.Error())
		}
		c.Disconnect(0)
		eventually(t, 3*time.Second, "the session of "+id+" kept", func() bool {
			cl, ok := srv.Clients.Get(id)
			return ok && cl.StopTime() != 0
		})
		last = id
	}
	if got := kept("plug"); len(got) > bound || !slices.Contains(got, last) {
		t.Errorf("the login keeps sessions %v, want at most %d, the newest (%s) among them", got, bound, last)
	}
	c, err := pahoConnect(addr, "replacement", "other", "pw2")
	if err != nil {
		t.Fatalf("another login's new client id after the flood: %v", err)
	}
	c.Disconnect(0)
	// A client that fails to log in drops no session.
	before := kept("plug")
	if c, err := pahoConnect(addr, "no-password", "plug", "wrong"); err == nil {
		c.Disconnect(0)
		t.Fatal("a wrong password logged in")
	}
	if got := kept("plug"); len(got) != len(before) {
		t.Errorf("a failed login changed the kept sessions from %v to %v", before, got)
	}
}
