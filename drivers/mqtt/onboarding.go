package mqtt

// The embedded broker's onboarding login: a way in for a device not yet
// adopted, open only while the owner has opened it (switchbridge devices
// listen). Its clients may announce themselves and publish their own last
// will, nothing else; they may subscribe to nothing, so receive no
// command (a Gen2+ Shelly is listed from its prefix alone: the hub's
// Shelly.GetDeviceInfo would need it to read its rpc topic); an announcement may not
// claim a configured plug's topics. The window is kept in the hub's store,
// read at each onboarding login, so the running hub needs no reload; once
// it closes, the clients connected with it are disconnected.

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"strings"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/switchbridge/switchbridge/bridge"
)

// OnboardingLogin is the embedded broker's onboarding login; no plug
// login may have this name.
const OnboardingLogin = "switchbridge-onboarding"

// MaxOnboarding bounds how long the owner may open the onboarding login at
// once: it is a shared password, meant for the minutes a new plug needs.
const MaxOnboarding = 24 * time.Hour

// OnboardingStore is where the hub keeps the onboarding window. The hub's
// store satisfies it.
type OnboardingStore interface {
	// MQTTOnboarding returns the window, nil when none is open.
	MQTTOnboarding(ctx context.Context) (*bridge.MQTTOnboarding, error)
}

// OnboardingHash is what the store keeps of the onboarding password: its
// SHA-256. The password is 128 random bits, so a slow hash would add
// nothing but a delay to every onboarding login.
func OnboardingHash(password string) []byte {
	h := sha256.Sum256([]byte(password))
	return h[:]
}

const (
	// onboardingCheckEvery is how often, while onboarding clients are
	// connected, the broker reads the window again to disconnect them
	// once it is closed.
	onboardingCheckEvery = 2 * time.Second
	// onboardingSessions bounds the onboarding clients connected at once
	// (and the sessions kept for them): new plugs set up together.
	onboardingSessions = 32
	// maxOrigins bounds the announcements whose publisher the broker
	// keeps for discovery.
	maxOrigins = 4 * maxDiscovered
)

// onboardingPublish are the topics an onboarding client may publish on:
// each firmware's announcement, and its own availability or last will.
// A topic the hub reads for a configured switch is never among them.
var onboardingPublish = []string{
	"tasmota/discovery/+/config", "tasmota/discovery/+/sensors", "tele/+/LWT", // Tasmota
	"shellies/announce", "shellies/+/online", // Shelly Gen1
	"+/online",                                                         // Shelly Gen2+
	"homeassistant/switch/+/config", "homeassistant/switch/+/+/config", // ESPHome, Tasmota SetOption19
	"+/status",                           // ESPHome's birth and will
	"+/bridge/devices", "+/bridge/state", // a Zigbee2MQTT bridge's inventory and will
}

// onboardingMayPublish reports whether an onboarding client may publish on
// topic: an announcement or will topic no configured plug reports on.
func (r *brokerRules) onboardingMayPublish(topic string) bool {
	if r.isCommand(topic) || r.owned(topic) {
		return false
	}
	for _, f := range onboardingPublish {
		if topicMatch(f, topic) {
			return true
		}
	}
	return false
}

// owned reports whether the hub reads topic for a configured switch.
func (r *brokerRules) owned(topic string) bool {
	_, ok := r.owners[topic]
	return ok
}

// onboardingMayAnnounce reports whether an onboarding client may publish
// the announcement devs: none of its devices may report on a topic the
// hub reads for a configured switch.
func (r *brokerRules) onboardingMayAnnounce(devs []Device) bool {
	for _, d := range devs {
		for _, t := range []string{d.Topics.State, d.Topics.Availability} {
			if t != "" && r.owned(t) {
				return false
			}
		}
	}
	return true
}

// onboardedClient is what the broker keeps of a client logged in with the
// onboarding login: the window it logged in under.
type onboardedClient struct {
	hash    []byte
	expires time.Time
}

// onboarding is the hook's side of the onboarding login.
type onboarding struct {
	store OnboardingStore // nil: the login is always closed
	mu    sync.Mutex
	// clients are those logged in with the onboarding login.
	clients map[*mochi.Client]onboardedClient
}

// window reads the onboarding window, nil when it is closed.
func (o *onboarding) window() (*bridge.MQTTOnboarding, error) {
	if o.store == nil {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), clientIDTimeout)
	defer cancel()
	w, err := o.store.MQTTOnboarding(ctx)
	if err != nil || !w.OpenAt(time.Now()) {
		return nil, err
	}
	return w, nil
}

// checkOnboarding checks an onboarding login: refused while the window is
// closed (unchecked and uncounted: there is no password to guess then),
// else throttled as every plug login is.
func (h *authHook) checkOnboarding(cl *mochi.Client, got []byte) bool {
	w, err := h.onboard.window()
	if err != nil {
		h.log.Error("reading the MQTT onboarding window", "err", err)
	}
	if w == nil {
		h.count(refusedOnboarding)
		h.refused(cl, OnboardingLogin, "onboarding is closed (switchbridge devices listen opens it)")
		return false
	}
	if !h.checkPassword(cl, OnboardingLogin, func() bool {
		return subtle.ConstantTimeCompare(w.PasswordHash, OnboardingHash(string(got))) == 1
	}) {
		return false
	}
	h.onboard.mu.Lock()
	h.onboard.clients[cl] = onboardedClient{hash: w.PasswordHash, expires: w.Expires}
	h.onboard.mu.Unlock()
	return true
}

// watchOnboarding disconnects the onboarding clients once their window
// has closed (expired, ended with --off, or replaced by a new one), until
// stop is closed. It reads the store only while such clients are
// connected.
func (h *authHook) watchOnboarding(stop <-chan struct{}) {
	t := time.NewTicker(onboardingCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		h.onboard.mu.Lock()
		n := len(h.onboard.clients)
		h.onboard.mu.Unlock()
		if n == 0 {
			continue
		}
		w, err := h.onboard.window()
		if err != nil {
			// Unreadable: each client keeps its window's own expiry.
			h.log.Error("reading the MQTT onboarding window", "err", err)
		}
		now := time.Now()
		var drop []*mochi.Client
		h.onboard.mu.Lock()
		for cl, c := range h.onboard.clients {
			if !now.Before(c.expires) || err == nil && (w == nil || subtle.ConstantTimeCompare(w.PasswordHash, c.hash) != 1) {
				drop = append(drop, cl)
				delete(h.onboard.clients, cl)
			}
		}
		h.onboard.mu.Unlock()
		for _, cl := range drop {
			if !cl.Closed() {
				_ = h.srv.DisconnectClient(cl, packets.ErrNotAuthorized)
			}
		}
		if len(drop) > 0 {
			h.log.Info("MQTT onboarding closed: its clients disconnected", "clients", len(drop))
		}
	}
}

// forgetOnboarded forgets a client that disconnected.
func (h *authHook) forgetOnboarded(cl *mochi.Client) {
	h.onboard.mu.Lock()
	delete(h.onboard.clients, cl)
	h.onboard.mu.Unlock()
}

// origins keeps who published each announcement the broker let through,
// by topic and payload, so that discovery can tell which client and login
// announced a device; bounded by maxOrigins.
type origins struct {
	mu sync.Mutex
	m  map[string]Origin
}

// Origin is the client and login that published an announcement.
type Origin struct{ ClientID, Login string }

func originKey(topic string, payload []byte) string {
	h := sha256.Sum256(payload)
	return topic + "\x00" + string(h[:8])
}

func (o *origins) note(topic string, payload []byte, from Origin) {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := originKey(topic, payload)
	if _, ok := o.m[k]; !ok && len(o.m) >= maxOrigins {
		for old := range o.m {
			delete(o.m, old) // any: the oldest are as likely
			break
		}
	}
	o.m[k] = from
}

// of returns who published payload on topic, if the broker kept it.
func (o *origins) of(topic string, payload []byte) (Origin, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	from, ok := o.m[originKey(topic, payload)]
	return from, ok
}

// announcement reports whether discovery reads topic as an announcement
// (or a Gen2+ device's coming online), whose publisher is kept.
func announcement(topic string) bool {
	levels := strings.Split(topic, "/")
	switch {
	case len(levels) == 4 && levels[0] == "tasmota" && levels[1] == "discovery" && levels[3] == "config",
		topic == "shellies/announce",
		len(levels) == 2 && levels[1] == "online",
		len(levels) >= 3 && levels[len(levels)-2] == "bridge" && levels[len(levels)-1] == "devices",
		len(levels) >= 4 && levels[0] == "homeassistant" && levels[1] == "switch" && levels[len(levels)-1] == "config":
		return true
	}
	return false
}
