package mqtt

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// The embedded broker's bounds per client, per login and per address,
// each through real connections: subscriptions, connections still logging
// in, failed logins, the retained share and claimed client ids.

// limitsBroker opens a hub whose broker has the logins plug (of the older
// form) and other, and the extra mqtt keys.
func limitsBroker(t *testing.T, extra string) (*driver, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr+"\nusers: {plug: s3cret, other: pw2}"+extra,
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)
	return d, addr
}

// login connects a raw client with an MQTT CONNECT of level (4 or 5) and
// fails the test unless it is accepted.
func login(t *testing.T, addr string, level byte, id, user, pass string) net.Conn {
	t.Helper()
	c := dialRaw(t, addr, mqttConnect(level, id, user, pass))
	if code, err := readConnack(c); err != nil || code != 0 {
		t.Fatalf("login %s as %s: code %#x, %v", id, user, code, err)
	}
	return c
}

// subscribe sends one SUBSCRIBE of filters at QoS 0 and returns the
// SUBACK's codes, one per filter.
func subscribe(t *testing.T, c net.Conn, level byte, filters ...string) []byte {
	t.Helper()
	if _, err := c.Write(mqtttest.Subscribe(level, filters...)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	codes, err := mqtttest.ReadSuback(bufio.NewReader(c), level)
	if err != nil {
		t.Fatalf("no SUBACK: %v", err)
	}
	if len(codes) != len(filters) {
		t.Fatalf("SUBACK with %d codes for %d filters", len(codes), len(filters))
	}
	return codes
}

// granted counts the codes of a SUBACK that grant a subscription.
func granted(codes []byte) int {
	n := 0
	for _, c := range codes {
		if c < 0x80 {
			n++
		}
	}
	return n
}

func filters(prefix string, n int) []string {
	fs := make([]string, n)
	for i := range fs {
		fs[i] = fmt.Sprintf("%s/%d", prefix, i)
	}
	return fs
}

func TestEmbeddedBrokerSubscriptionBounds(t *testing.T) {
	d, addr := limitsBroker(t, "\nmqtt5: true\nmax_subscriptions_per_client: 10\nmax_subscriptions_per_login: 15")
	refused := func() int { return int(d.broker.refusalsCounted(refusedSubscription)) }

	a := login(t, addr, 4, "a", "plug", "s3cret")
	codes := subscribe(t, a, 4, filters("a", 12)...)
	if granted(codes) != 10 || codes[10] != 0x80 || codes[11] != 0x80 {
		t.Fatalf("12 filters for a client bound to 10: SUBACK % x", codes)
	}
	// Subscribing again to a filter it has takes no more room.
	if codes := subscribe(t, a, 4, "a/0", "a/1"); granted(codes) != 2 {
		t.Errorf("subscribing again to held filters: SUBACK % x", codes)
	}
	// The login's other client gets what is left of the login's 15.
	b := login(t, addr, 5, "b", "plug", "s3cret")
	codes = subscribe(t, b, 5, filters("b", 8)...)
	if granted(codes) != 5 || !slices.Equal(codes[5:], []byte{0x97, 0x97, 0x97}) {
		t.Errorf("8 filters with 5 left of the login's bound: SUBACK % x, want 5 granted, then 0x97 (quota exceeded)", codes)
	}
	// Another login has its own bound.
	o := login(t, addr, 4, "o", "other", "pw2")
	if codes := subscribe(t, o, 4, filters("o", 10)...); granted(codes) != 10 {
		t.Errorf("another login: SUBACK % x", codes)
	}
	// Unsubscribing makes room again.
	if _, err := a.Write(mqttPacket(0xa2, append([]byte{0, 8}, append(mqttString("a/0"), mqttString("a/1")...)...))); err != nil {
		t.Fatal(err)
	}
	a.SetReadDeadline(time.Now().Add(3 * time.Second))
	if typ, _, err := mqtttest.ReadPacket(bufio.NewReader(a)); err != nil || typ != 0xb0 {
		t.Fatalf("no UNSUBACK: %#x, %v", typ, err)
	}
	if codes := subscribe(t, b, 5, "b/5", "b/6"); granted(codes) != 2 {
		t.Errorf("after an unsubscribe: SUBACK % x", codes)
	}
	// A filter too deep or too long is refused whatever the room.
	if codes := subscribe(t, o, 4, strings.Repeat("x/", maxFilterLevels)+"x", strings.Repeat("y", maxFilterLength+1)); granted(codes) != 0 {
		t.Errorf("a filter too deep or too long: SUBACK % x", codes)
	}
	if n := refused(); n != 2+3 {
		t.Errorf("%d subscriptions counted as refused, want 5", n)
	}
	if n := d.broker.refusalsCounted(refusedFilter); n != 2 {
		t.Errorf("%d filters counted as too long, want 2", n)
	}
	// The hub's own subscriptions are not bounded: it still works.
	if !d.connected() {
		t.Error("the hub lost its connection")
	}
}

// Connections that never log in hold at most their address's share of the
// places for connections logging in, and only for a few seconds; when
// attackers at a few addresses keep every place taken, a plug from another
// address still logs in, and so does the hub's own client, at its
// reconnect even with max_clients plugs connected.
func TestEmbeddedBrokerHandshakesPerAddress(t *testing.T) {
	d, addr := limitsBroker(t, "\nmax_clients: 2")
	gl := d.broker.listener
	slots := handshakeSlots(2)

	// Attackers at four addresses keep every place taken.
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if gl.handshakes() >= slots {
				continue
			}
			dl := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i%4))}, Timeout: time.Second}
			if c, err := dl.Dial("tcp", addr); err == nil {
				t.Cleanup(func() { c.Close() })
			}
		}
	}()
	defer func() { close(stop); <-done }()
	eventually(t, 5*time.Second, "every place taken", func() bool { return gl.handshakes() == slots })

	login(t, addr, 4, "plug-1", "plug", "s3cret")
	p2 := mqtttest.DialFrom(t, "127.0.0.11", addr, mqttConnect(4, "plug-2", "other", "pw2"))
	if code, err := readConnack(p2); err != nil || code != 0 {
		t.Fatalf("a plug from another address while every place is taken: code %#x, %v", code, err)
	}
	if d.broker.refusalsCounted(refusedHandshake) == 0 {
		t.Error("no connection counted as closed to make room")
	}
	// max_clients plugs are connected: a third is refused, the hub is not
	// when it reconnects.
	p3 := mqtttest.DialFrom(t, "127.0.0.12", addr, mqttConnect(4, "plug-3", "plug", "s3cret"))
	if code, err := readConnack(p3); err != nil || code != 3 {
		t.Errorf("a plug beyond max_clients: code %#x, %v, want 3 (server unavailable)", code, err)
	}
	hub, ok := d.broker.srv.Clients.Get(d.set.ClientID)
	if !ok {
		t.Fatal("the hub's client is not connected")
	}
	hub.Stop(fmt.Errorf("test: the hub's connection dropped"))
	eventually(t, 10*time.Second, "the hub's client back", func() bool {
		cl, ok := d.broker.srv.Clients.Get(d.set.ClientID)
		return ok && cl != hub && !cl.Closed() && d.connected()
	})
}

// A connection that sends no CONNECT is closed within a few seconds.
func TestEmbeddedBrokerConnectTimeout(t *testing.T) {
	_, addr := limitsBroker(t, "")
	c := mqtttest.DialFrom(t, "127.0.0.2", addr)
	start := time.Now()
	c.SetReadDeadline(start.Add(handshakeTimeout + 3*time.Second))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a connection without a CONNECT still open after %s", time.Since(start).Round(time.Second))
	}
	if handshakeTimeout > 5*time.Second {
		t.Errorf("the CONNECT timeout is %s, want a few seconds", handshakeTimeout)
	}
}

// connectCode connects from ip and returns the CONNACK's code, or 0xff
// when the connection closed without one.
func connectCode(t *testing.T, ip, addr, id, user, pass string) byte {
	t.Helper()
	c := mqtttest.DialFrom(t, ip, addr, mqttConnect(4, id, user, pass))
	defer c.Close()
	code, err := readConnack(c)
	if err != nil {
		return 0xff
	}
	return code
}

// 300 wrong passwords for one login from one address: a few are checked,
// the rest refused unchecked, and the right password from that address is
// refused too for a while; from another address, and another login from
// the same address, log in at once.
func TestEmbeddedBrokerLoginThrottle(t *testing.T) {
	d, addr := limitsBroker(t, "")
	start := time.Now()
	for i := range 300 {
		if code := connectCode(t, "127.0.0.2", addr, fmt.Sprint("guess-", i), "plug", fmt.Sprint("guess-", i)); code == 0 {
			t.Fatalf("guess %d logged in", i)
		}
	}
	if code := connectCode(t, "127.0.0.2", addr, "right", "plug", "s3cret"); code == 0 {
		t.Errorf("the right password from the guessing address logged in at once, %s after 300 guesses", time.Since(start).Round(time.Millisecond))
	}
	if code := connectCode(t, "127.0.0.3", addr, "plug-elsewhere", "plug", "s3cret"); code != 0 {
		t.Errorf("the login from an address that has not failed: code %#x", code)
	}
	if code := connectCode(t, "127.0.0.2", addr, "other", "other", "pw2"); code != 0 {
		t.Errorf("another login from the guessing address: code %#x", code)
	}
	checked, throttled := d.broker.refusalsCounted(refusedPassword), d.broker.refusalsCounted(refusedThrottled)
	if checked > pairFree || throttled < 300-pairFree {
		t.Errorf("%d passwords checked and %d refused unchecked, want at most %d checked", checked, throttled, pairFree)
	}
}

// The throttle's schedule: free failures, then delays that double up to
// maxDelay; a success clears the pair, not the address; a login failing
// from many addresses leaves each pair one free failure; a clean pair is
// never slowed.
func TestLoginThrottleSchedule(t *testing.T) {
	now := time.Unix(1e9, 0)
	th := newLoginThrottle()
	th.now = func() time.Time { return now }
	for range pairFree {
		if w := th.wait("plug", "10.0.0.2"); w != 0 {
			t.Fatalf("a free failure must wait %s", w)
		}
		th.fail("plug", "10.0.0.2")
	}
	for i, want := range []time.Duration{firstDelay, 2 * firstDelay, 4 * firstDelay} {
		if w := th.wait("plug", "10.0.0.2"); w != want {
			t.Fatalf("after %d failures: wait %s, want %s", pairFree+i, w, want)
		}
		now = now.Add(want)
		th.fail("plug", "10.0.0.2")
	}
	for range 20 {
		th.fail("plug", "10.0.0.2")
	}
	if w := th.wait("plug", "10.0.0.2"); w != maxDelay {
		t.Errorf("after many failures: wait %s, want %s", w, maxDelay)
	}
	if w := th.wait("plug", "10.0.0.3"); w != 0 {
		t.Errorf("another address waits %s", w)
	}
	th.succeed("plug", "10.0.0.2")
	if w := th.wait("plug", "10.0.0.2"); w == 0 {
		t.Error("a success at an address with many failures cleared the address's own count")
	}
	if w := th.wait("other", "10.0.0.2"); w == 0 {
		t.Errorf("the address failed %d times, past its %d free ones, yet another login need not wait", 8+20, addrFree)
	}
	// A login failing from many addresses.
	for i := range loginAttack {
		th.fail("lamp", fmt.Sprintf("10.1.%d.%d", i/200, i%200))
	}
	if w := th.wait("lamp", "10.2.0.1"); w != 0 {
		t.Errorf("a clean address waits %s while the login is attacked", w)
	}
	th.fail("lamp", "10.2.0.1")
	if w := th.wait("lamp", "10.2.0.1"); w == 0 {
		t.Error("under attack, a pair's second try is not slowed")
	}
	// Forgotten after a day.
	now = now.Add(forgetAfter + time.Minute)
	if w := th.wait("plug", "10.0.0.2"); w != 0 {
		t.Errorf("a day later: wait %s", w)
	}
}

// One login's retained messages fill its own share only: another login's
// retained state is still kept.
func TestEmbeddedBrokerRetainedSharePerLogin(t *testing.T) {
	d, addr := limitsBroker(t, "\nmax_retained_per_login: 50\nmax_retained_bytes_per_login: 4096")
	isRetained := func(topic string) bool { _, ok := d.broker.srv.Topics.Retained.Get(topic); return ok }
	pub := func(user, pass string) func(topic string, payload []byte) {
		c, err := pahoConnect(addr, "pub-"+user, user, pass)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Disconnect(0) })
		return func(topic string, payload []byte) {
			t.Helper()
			if tok := c.Publish(topic, 1, true, payload); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
				t.Fatalf("publish %s: %v", topic, tok.Error())
			}
		}
	}
	flood, other := pub("plug", "s3cret"), pub("other", "pw2")
	for i := range 60 {
		flood(fmt.Sprintf("flood/%d", i), []byte("x"))
	}
	kept := 0
	for i := range 60 {
		if isRetained(fmt.Sprintf("flood/%d", i)) {
			kept++
		}
	}
	if kept != 50 {
		t.Errorf("%d of 60 retained messages kept for one login, want its share of 50", kept)
	}
	other("other/state", []byte("on"))
	if !isRetained("other/state") {
		t.Error("another login's retained message was not kept once the first filled its share")
	}
	// The share of bytes: topic and payload count.
	big := []byte(strings.Repeat("x", 1900))
	for i := range 3 {
		other(fmt.Sprintf("other/big%d", i), big)
	}
	if !isRetained("other/big0") || !isRetained("other/big1") || isRetained("other/big2") {
		t.Errorf("retained with a 4096-byte share: big0 %v, big1 %v, big2 %v; want the first two only",
			isRetained("other/big0"), isRetained("other/big1"), isRetained("other/big2"))
	}
	if n := d.broker.refusalsCounted(refusedRetained); n != 10+1 {
		t.Errorf("%d retained messages counted as beyond a share, want 11", n)
	}
}

// A client id a login claims is that login's alone: another login cannot
// take it while its plug is offline. And a login taking another's client
// id once the owner freed it does not get that client's kept
// subscriptions.
func TestEmbeddedBrokerClientIDs(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	db := openStore(t, t.TempDir())
	d := openDriverOn(t, db, "broker: embedded\nlisten: "+addr+"\nusers:\n  a: {password: pa, client_ids: [DVES_1A2B3C, \"shelly1-*\"]}\n  b: pb",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)
	for _, c := range []struct {
		id, user, pass string
		want           byte
	}{
		{"DVES_1A2B3C", "b", "pb", 2},
		{"shelly1-328900", "b", "pb", 2},
		{"DVES_1A2B3C", "a", "pa", 0},
		{"shelly1-328900", "a", "pa", 0},
		{"DVES_FFFFFF", "b", "pb", 0},
	} {
		if code := connectCode(t, "127.0.0.2", addr, c.id, c.user, c.pass); code != c.want {
			t.Errorf("%s as %s: code %#x, want %#x", c.user, c.id, code, c.want)
		}
	}
	if n := d.broker.refusalsCounted(refusedClientID); n != 2 {
		t.Errorf("%d client ids counted as refused, want 2", n)
	}

	// b keeps a session with a subscription; a takes its client id.
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("shared").SetUsername("b").SetPassword("pb")
	o.SetCleanSession(false).SetConnectTimeout(2 * time.Second).SetAutoReconnect(false)
	bc := paho.NewClient(o)
	if tok := bc.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	if tok := bc.Subscribe("b/secret/#", 0, nil); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	bc.Disconnect(0)
	eventually(t, 3*time.Second, "b's session kept", func() bool {
		cl, ok := d.broker.srv.Clients.Get("shared")
		return ok && cl.Closed()
	})
	if _, err := db.ReleaseMQTTClientID(context.Background(), "shared"); err != nil {
		t.Fatal(err)
	}
	o.SetUsername("a").SetPassword("pa")
	ac := paho.NewClient(o)
	if tok := ac.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	defer ac.Disconnect(0)
	cl, ok := d.broker.srv.Clients.Get("shared")
	if !ok || string(cl.Properties.Username) != "a" {
		t.Fatal("a's client is not the one with the id")
	}
	if subs := cl.State.Subscriptions.GetAll(); len(subs) != 0 {
		t.Errorf("a's client got b's subscriptions %v", subs)
	}
}

// One login connects at most one client per switch it serves and two more
// at once, so it cannot fill max_clients; a plug taking its own client id
// over still gets in, and so does another login.
func TestEmbeddedBrokerClientsPerLogin(t *testing.T) {
	d, addr := limitsBroker(t, "")
	bound := 1 + spareSessions // plug, of the older form, may serve the one switch
	for i := range bound {
		login(t, addr, 4, fmt.Sprint("c", i), "plug", "s3cret")
	}
	if code := connectCode(t, "127.0.0.2", addr, "one-more", "plug", "s3cret"); code != 3 {
		t.Errorf("a client beyond the login's share: code %#x, want 3 (server unavailable)", code)
	}
	if code := connectCode(t, "127.0.0.2", addr, "c0", "plug", "s3cret"); code != 0 {
		t.Errorf("a client taking its own id over: code %#x", code)
	}
	if code := connectCode(t, "127.0.0.2", addr, "o", "other", "pw2"); code != 0 {
		t.Errorf("another login: code %#x", code)
	}
	if n := d.broker.refusalsCounted(refusedLoginClients); n != 1 {
		t.Errorf("%d clients counted beyond a login's share, want 1", n)
	}
}

// 30 wrong passwords at once for one login from one address: the budget's
// check and its charge are one step, so no more passwords are checked than
// the pair's free failures, however the connections interleave.
func TestEmbeddedBrokerLoginThrottleParallel(t *testing.T) {
	d, addr := limitsBroker(t, "")
	var wg sync.WaitGroup
	codes := make([]byte, 30)
	for i := range codes {
		wg.Go(func() {
			codes[i] = connectCode(t, "127.0.0.2", addr, fmt.Sprint("guess-", i), "plug", fmt.Sprint("guess-", i))
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code == 0 {
			t.Errorf("guess %d logged in", i)
		}
	}
	checked, throttled := d.broker.refusalsCounted(refusedPassword), d.broker.refusalsCounted(refusedThrottled)
	// Some guesses may be refused before any login (the address's
	// connection limits); none may be checked past the budget.
	if checked > pairFree || throttled == 0 {
		t.Errorf("%d passwords checked and %d refused unchecked of %d guesses, want at most %d checked", checked, throttled, len(codes), pairFree)
	}
}

// The throttle's check is one step: with a password check slow enough
// that parallel guesses overlap, no more are checked than the free
// failures (a check of the budget, then the password, then a charge would
// let every guess that overlaps the first through).
func TestLoginThrottleCheckIsOneStep(t *testing.T) {
	th := newLoginThrottle()
	var checked atomic.Int32
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			th.check("plug", "192.0.2.1", func() bool {
				checked.Add(1)
				time.Sleep(time.Millisecond)
				return false
			})
		})
	}
	wg.Wait()
	if n := checked.Load(); n != pairFree {
		t.Errorf("%d passwords checked by 30 parallel guesses, want %d", n, pairFree)
	}
}
