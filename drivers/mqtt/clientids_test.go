package mqtt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// The hub's store is what the daemon hands the driver.
var (
	_ ClientIDs     = (*hubstore.Store)(nil)
	_ ClientIDAdmin = (*hubstore.Store)(nil)
)

// CONNACK return codes of MQTT 3.1.1.
const (
	accepted           = 0
	identifierRejected = 2
)

// clientIDLogins are the logins of these tests: a and b of the older
// form, c with a client id of its own in the config.
const clientIDLogins = "\nusers:\n  a: pa\n  b: pb\n  c: {password: pc, client_ids: [listed-1]}"

// openStore opens the hub's store in dir, closed at the end of the test.
func openStore(t *testing.T, dir string) *hubstore.Store {
	t.Helper()
	db, err := store.Open(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return hubstore.New(db)
}

// brokerOn opens a driver with an embedded broker over db, with the
// logins and extra keys, and returns it and the broker's address.
func brokerOn(t *testing.T, db *hubstore.Store, logins string) (*driver, string) {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriverOn(t, db, "broker: embedded\nlisten: "+addr+logins,
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`)
	return d, addr
}

// connectAndLeave connects a real client and disconnects it again,
// failing the test unless it was accepted.
func connectAndLeave(t *testing.T, addr, id, user, pass string) {
	t.Helper()
	c, err := pahoConnect(addr, id, user, pass)
	if err != nil {
		t.Fatalf("%s as %s: %v", user, id, err)
	}
	c.Disconnect(0)
}

// TestClientIDsBelongToTheirLogin: a client id first used by one login is
// refused to another, while its plug is offline too, and after the hub
// restarts; the owner frees it; a fresh id connects; client ids the
// config lists work as before, and the config can hand a bound one to
// another login.
func TestClientIDsBelongToTheirLogin(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db := openStore(t, dir)
	d, addr := brokerOn(t, db, clientIDLogins)

	connectAndLeave(t, addr, "plug-x", "a", "pa") // a's plug, then offline
	if _, err := pahoConnect(addr, "plug-x", "b", "pb"); !errors.Is(err, packets.ErrorRefusedIDRejected) {
		t.Errorf("b with a's client id, a's plug offline: %v, want %v", err, packets.ErrorRefusedIDRejected)
	}
	refused := d.broker.refusalsCounted(refusedClientID) // paho tries MQTT 3.1.1, then 3.1
	if code := connectCode(t, "127.0.0.2", addr, "plug-x", "b", "pb"); code != identifierRejected {
		t.Errorf("b with a's client id: CONNACK code %#x, want %#x (identifier rejected)", code, identifierRejected)
	}
	if code := connectCode(t, "127.0.0.2", addr, "plug-x", "a", "pa"); code != accepted {
		t.Errorf("a with its own client id: code %#x", code)
	}
	if code := connectCode(t, "127.0.0.2", addr, "fresh-1", "b", "pb"); code != accepted {
		t.Errorf("b with a fresh client id: code %#x", code)
	}
	// The config's client ids, as before: c's alone.
	if code := connectCode(t, "127.0.0.2", addr, "listed-1", "a", "pa"); code != identifierRejected {
		t.Errorf("a with c's listed client id: code %#x, want %#x", code, identifierRejected)
	}
	if code := connectCode(t, "127.0.0.2", addr, "listed-1", "c", "pc"); code != accepted {
		t.Errorf("c with its listed client id: code %#x", code)
	}
	if n := d.broker.refusalsCounted(refusedClientID) - refused; refused == 0 || n != 2 {
		t.Errorf("client ids counted as refused: %d by paho's tries, then %d; want some, then 2", refused, n)
	}
	if owner, err := db.MQTTClientIDLogin(ctx, "plug-x"); err != nil || owner != "a" {
		t.Errorf("plug-x is bound to %q in the database (%v), want a", owner, err)
	}

	// A restart: the store opened again, a new broker.
	d.Close()
	db.DB().Close()
	db = openStore(t, dir)
	d, addr = brokerOn(t, db, clientIDLogins)
	if code := connectCode(t, "127.0.0.2", addr, "plug-x", "b", "pb"); code != identifierRejected {
		t.Errorf("after a restart, b with a's client id: code %#x, want %#x", code, identifierRejected)
	}
	if code := connectCode(t, "127.0.0.2", addr, "plug-x", "a", "pa"); code != accepted {
		t.Errorf("after a restart, a with its own client id: code %#x", code)
	}

	// The owner frees it (switchbridge mqtt release-client-id): the next
	// login to connect with it has it.
	if c, err := db.ReleaseMQTTClientID(ctx, "plug-x"); err != nil || c.Login != "a" {
		t.Fatalf("release: %+v, %v", c, err)
	}
	if _, err := db.ReleaseMQTTClientID(ctx, "plug-x"); bridge.ErrorCode(err) != bridge.ENOTFOUND {
		t.Errorf("releasing a client id bound to none: %v, want ENOTFOUND", err)
	}
	// a's last connection has closed on the broker's side too: else it
	// still holds the id.
	eventually(t, 5*time.Second, "a's connection gone", func() bool {
		cl, ok := d.broker.srv.Clients.Get("plug-x")
		return !ok || cl.Closed()
	})
	connectAndLeave(t, addr, "plug-x", "b", "pb")
	if code := connectCode(t, "127.0.0.2", addr, "plug-x", "a", "pa"); code != identifierRejected {
		t.Errorf("once b has the released client id, a: code %#x, want %#x", code, identifierRejected)
	}

	// The config hands a bound client id to another login.
	_, addr = brokerOn(t, db, "\nusers:\n  a: {password: pa, client_ids: [plug-x]}\n  b: pb")
	if code := connectCode(t, "127.0.0.2", addr, "plug-x", "a", "pa"); code != accepted {
		t.Errorf("a with a client id the config now gives it: code %#x", code)
	}
	if code := connectCode(t, "127.0.0.2", addr, "plug-x", "b", "pb"); code != identifierRejected {
		t.Errorf("b with a client id the config gives a: code %#x", code)
	}
	if owner, _ := db.MQTTClientIDLogin(ctx, "plug-x"); owner != "a" {
		t.Errorf("the config's client id is bound to %q in the database, want a", owner)
	}
}

// TestClientIDRace: logins connecting with one new client id at once: one
// login has it, the others are refused.
func TestClientIDRace(t *testing.T) {
	db := openStore(t, t.TempDir())
	_, addr := brokerOn(t, db, clientIDLogins)
	const n = 8
	codes := make([]byte, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			user, pass := "a", "pa"
			if i%2 == 1 {
				user, pass = "b", "pb"
			}
			c := mqtttest.DialFrom(t, "127.0.0.2", addr, mqttConnect(4, "contested", user, pass))
			defer c.Close()
			if code, err := readConnack(c); err == nil {
				codes[i] = code
			} else {
				codes[i] = 0xff
			}
		}()
	}
	wg.Wait()
	owner, err := db.MQTTClientIDLogin(context.Background(), "contested")
	if err != nil || owner == "" {
		t.Fatalf("contested is bound to %q, %v", owner, err)
	}
	for i, code := range codes {
		user := []string{"a", "b"}[i%2]
		if user != owner && code == accepted {
			t.Errorf("%s was let in with a client id bound to %s", user, owner)
		}
	}
}

// TestClientIDsPerLoginBounded: a login cycling client ids keeps a bounded
// number bound, its oldest going first; another login's are untouched.
func TestClientIDsPerLoginBounded(t *testing.T) {
	ctx := context.Background()
	db := openStore(t, t.TempDir())
	d, addr := brokerOn(t, db, clientIDLogins)
	connectAndLeave(t, addr, "b-plug", "b", "pb")
	keep := clientIDsKept * d.brokerRules().keptSessions("a")
	for i := range keep + 5 {
		c := login(t, addr, 4, fmt.Sprint("cycle-", i), "a", "pa")
		c.Close()
		time.Sleep(2 * time.Millisecond) // a later last use
	}
	ids, err := db.MQTTClientIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]int{}
	for _, c := range ids {
		held[c.Login]++
	}
	if held["a"] != keep || held["b"] != 1 {
		t.Errorf("bound: %v; want a %d (its bound), b 1", held, keep)
	}
	if owner, _ := db.MQTTClientIDLogin(ctx, "cycle-0"); owner != "" {
		t.Errorf("a's oldest client id is still bound to %q", owner)
	}
	if owner, _ := db.MQTTClientIDLogin(ctx, fmt.Sprint("cycle-", keep+4)); owner != "a" {
		t.Errorf("a's newest client id is bound to %q", owner)
	}
}
