package mqtt

import (
	"context"
	"fmt"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

var _ OnboardingStore = (*hubstore.Store)(nil)

// onboardingBroker is a driver with an embedded broker over a fresh store,
// with the login kitchen serving the configured Tasmota kitchen.
func onboardingBroker(t *testing.T) (*driver, *hubstore.Store, string) {
	t.Helper()
	db := openStore(t, t.TempDir())
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriverOn(t, db, "broker: embedded\nlisten: "+addr+"\nusers:\n  kitchen: {password: pk, switches: [kitchen]}",
		`id: kitchen, name: Kitchen, profile: tasmota, topic: kitchen`)
	return d, db, addr
}

// openOnboarding opens the onboarding window with password pw for d.
func openOnboarding(t *testing.T, db *hubstore.Store, pw string, d time.Duration) {
	t.Helper()
	now := time.Now()
	if err := db.OpenMQTTOnboarding(context.Background(), OnboardingHash(pw), now, now.Add(d)); err != nil {
		t.Fatal(err)
	}
}

// listed returns the discovered device id, if listed.
func listed(d *driver, id string) (Device, bool) {
	for _, dev := range d.Discovered() {
		if dev.ID == id {
			return dev, true
		}
	}
	return Device{}, false
}

// TestOnboardingWindow: the onboarding login is refused while closed,
// accepted inside the window, throttled on wrong passwords as every login
// is, and refused and disconnected once the window closes (ended early or
// expired).
func TestOnboardingWindow(t *testing.T) {
	ctx := context.Background()
	d, db, addr := onboardingBroker(t)

	if code := connectCode(t, "127.0.0.2", addr, "new-1", OnboardingLogin, "anything"); code == accepted {
		t.Fatal("the onboarding login was accepted while closed")
	}
	if n := d.broker.refusalsCounted(refusedOnboarding); n != 1 {
		t.Errorf("refusals counted as onboarding_closed: %d, want 1", n)
	}
	if n := d.broker.refusalsCounted(refusedPassword); n != 0 {
		t.Errorf("a login while closed counted as a wrong password (%d): nothing was checked", n)
	}

	openOnboarding(t, db, "right-pw", time.Hour)
	if code := connectCode(t, "127.0.0.2", addr, "new-1", OnboardingLogin, "right-pw"); code != accepted {
		t.Fatalf("onboarding inside the window: code %#x", code)
	}
	// Wrong passwords from one address: the free ones, then the right
	// password from there is refused unchecked; another address is not
	// slowed.
	for i := range pairFree + 1 {
		if code := connectCode(t, "127.0.0.3", addr, fmt.Sprint("guess-", i), OnboardingLogin, fmt.Sprint("guess-", i)); code == accepted {
			t.Fatalf("guess %d accepted", i)
		}
	}
	if code := connectCode(t, "127.0.0.3", addr, "new-2", OnboardingLogin, "right-pw"); code == accepted {
		t.Error("the right onboarding password from the guessing address was accepted at once")
	}
	if d.broker.refusalsCounted(refusedPassword) < pairFree || d.broker.refusalsCounted(refusedThrottled) == 0 {
		t.Errorf("wrong onboarding passwords: %d counted wrong, %d throttled; want the free ones wrong, then throttled",
			d.broker.refusalsCounted(refusedPassword), d.broker.refusalsCounted(refusedThrottled))
	}
	if code := connectCode(t, "127.0.0.4", addr, "new-3", OnboardingLogin, "right-pw"); code != accepted {
		t.Errorf("onboarding from an address that has not failed: code %#x", code)
	}

	// Ended early: connected clients are dropped, new ones refused.
	c, err := pahoConnect(addr, "new-4", OnboardingLogin, "right-pw")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(0)
	if was, err := db.CloseMQTTOnboarding(ctx, time.Now()); err != nil || !was {
		t.Fatalf("close: %v, %v", was, err)
	}
	eventually(t, 5*onboardingCheckEvery+5*time.Second, "the onboarding client disconnected once closed", func() bool { return !c.IsConnectionOpen() })
	if _, err := pahoConnect(addr, "new-4", OnboardingLogin, "right-pw"); err == nil {
		t.Error("onboarding accepted after the window was closed")
	}

	// Expired: the same, by its own clock.
	openOnboarding(t, db, "pw-2", 4*time.Second)
	c2, err := pahoConnect(addr, "new-5", OnboardingLogin, "pw-2")
	if err != nil {
		t.Fatalf("onboarding in a window of 4 s: %v", err)
	}
	defer c2.Disconnect(0)
	eventually(t, 4*time.Second+5*onboardingCheckEvery+5*time.Second, "the onboarding client disconnected once expired", func() bool { return !c2.IsConnectionOpen() })
	if _, err := pahoConnect(addr, "new-5", OnboardingLogin, "pw-2"); err == nil {
		t.Error("onboarding accepted after the window expired")
	}
}

// TestOnboardingRules: a Tasmota logging in with the onboarding login is
// listed with its client id and login, receives no command (its
// subscriptions refused), and cannot publish or announce on a configured
// plug's topics; a Gen2+ Shelly is listed from its prefix.
func TestOnboardingRules(t *testing.T) {
	d, db, addr := onboardingBroker(t)
	openOnboarding(t, db, "pw", time.Hour)
	kitchen := mqtttest.NewTasmota(t, "tcp://kitchen:pk@"+addr, mqtttest.TasmotaOptions{Topic: "kitchen"})
	onboard := "tcp://" + OnboardingLogin + ":pw@" + addr

	fresh := mqtttest.NewTasmota(t, onboard, mqtttest.TasmotaOptions{Topic: "fresh", Discovery: true, MAC: "A4CF12000009"})
	eventually(t, 10*time.Second, "the onboarding Tasmota listed", func() bool { _, ok := listed(d, "tasmota-A4CF12000009"); return ok })
	dev, _ := listed(d, "tasmota-A4CF12000009")
	if dev.ClientID != "DVES_fresh" || dev.Login != OnboardingLogin {
		t.Errorf("announced by client %q, login %q; want DVES_fresh, %s", dev.ClientID, dev.Login, OnboardingLogin)
	}
	eventually(t, 10*time.Second, "the store's record names who announced it", func() bool {
		devs, err := db.DiscoveredDevices(context.Background())
		for _, r := range devs {
			if r.ID == "tasmota-A4CF12000009" {
				return err == nil && r.ClientID == "DVES_fresh" && r.Login == OnboardingLogin
			}
		}
		return false
	})

	// Commands: the hub's to the new plug, then to the configured one,
	// which answers; the new plug got none.
	d.publish(message{topic: "cmnd/fresh/POWER", payload: []byte("ON")})
	eventually(t, 5*time.Second, "the kitchen plug heard from", func() bool { return d.byID["kitchen"].State().Available })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.byID["kitchen"].Do(ctx, bridge.CommandOn); err != nil {
		t.Fatalf("the configured plug: %v", err)
	}
	if n := fresh.Commands(); n != 0 {
		t.Errorf("the onboarding plug received %d commands", n)
	}

	c, err := pahoConnect(addr, "raw-onboard", OnboardingLogin, "pw")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(0)
	for _, f := range []string{"cmnd/fresh/#", "cmnd/tasmotas/#", "shellies/fresh/relay/0/command", "fresh/+/set", "zigbee2mqtt/#", "tasmota/discovery/#", "shellyplus1-a8032ab99999/rpc"} {
		tok := c.Subscribe(f, 0, nil)
		if !tok.WaitTimeout(3 * time.Second) {
			t.Fatalf("subscribe %s: no SUBACK", f)
		}
		if q := tok.(*paho.SubscribeToken).Result()[f]; q != 0x80 {
			t.Errorf("an onboarding client subscribed to %s (granted %#x)", f, q)
		}
	}

	// A configured plug's state, its will, and an announcement of its
	// topics: dropped. Then an announcement of its own, which the hub
	// reads: the ones before it would have arrived first.
	pub := func(topic, payload string, retain bool) {
		t.Helper()
		if tok := c.Publish(topic, 0, retain, payload); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
			t.Fatalf("publish %s: %v", topic, tok.Error())
		}
	}
	pub("stat/kitchen/POWER", "OFF", false)
	pub("tele/kitchen/LWT", "Offline", true)
	pub("tasmota/discovery/A4CF12000077/config", mqtttest.TasmotaDiscoveryConfig(mqtttest.TasmotaOptions{Topic: "kitchen", MAC: "A4CF12000077"}, 1), true)
	pub("tasmota/discovery/A4CF12000078/config", mqtttest.TasmotaDiscoveryConfig(mqtttest.TasmotaOptions{Topic: "other", MAC: "A4CF12000078"}, 1), true)
	eventually(t, 10*time.Second, "the onboarding client's own announcement listed", func() bool { _, ok := listed(d, "tasmota-A4CF12000078"); return ok })
	if _, ok := listed(d, "tasmota-A4CF12000077"); ok {
		t.Error("an onboarding announcement of the configured plug's topic was listed")
	}
	if st := d.byID["kitchen"].State(); st.Value != bridge.On || !st.Available {
		t.Errorf("the kitchen after the onboarding client's reports: %+v; want on and available", st)
	}
	if kitchen.Commands() == 0 {
		t.Error("the kitchen plug never got the hub's command")
	}

	// A will on the configured plug's LWT: refused at CONNECT.
	o := paho.NewClientOptions().AddBroker("tcp://"+addr).SetClientID("raw-will").SetUsername(OnboardingLogin).SetPassword("pw").
		SetWill("tele/kitchen/LWT", "Offline", 1, true).SetConnectTimeout(2 * time.Second).SetAutoReconnect(false)
	wc := paho.NewClient(o)
	if tok := wc.Connect(); tok.WaitTimeout(3*time.Second) && tok.Error() == nil {
		wc.Disconnect(0)
		t.Error("an onboarding client with the configured plug's LWT as its will was accepted")
	}

	// Gen2+: listed from its prefix alone; its rpc topic, where the hub
	// asks it for its device info, is refused it as every subscription.
	mqtttest.NewShellyRPC(t, onboard, "shellyplus1-a8032ab99999", 1, false)
	eventually(t, 10*time.Second, "the onboarding Shelly listed", func() bool {
		dev, ok := listed(d, "shellyplus1-a8032ab99999")
		return ok && dev.Login == OnboardingLogin && dev.ClientID != ""
	})
}
