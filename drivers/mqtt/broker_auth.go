// The embedded broker's auth hook: logins and their passwords, client ids,
// the clients and sessions each login keeps, and the rules (ACL) on every
// publish and subscription, with the per-login bounds applied where mochi
// asks.

package mqtt

import (
	"bytes"
	"cmp"
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/switchbridge/switchbridge/bridge"
)

// authHook checks logins against the configured users (constant time,
// failures throttled), refuses what a client may not do before it is
// connected (MQTT 5 unless enabled, the hub's client id or another
// login's, listed in the config or bound to it, a last will it may not
// publish), binds each new client id to the login that first uses it, bounds the clients and the
// sessions each login keeps, its subscriptions and its retained messages,
// and applies rules to every publish and subscription.
type authHook struct {
	mochi.HookBase
	srv *mochi.Server
	log *slog.Logger
	// cfg is the logins and rules, which a reload replaces (reload.go).
	cfg         atomic.Pointer[authConfig]
	mqtt5       bool
	maxSessions int
	maxClients  int

	subs     *subscriptionBounds
	retained *retainedShares
	throttle *loginThrottle
	// bound keeps the login each other client id belongs to: the first
	// that connected with it (clientids.go).
	bound ClientIDs

	// onboard is the onboarding login's window and clients (onboarding.go).
	onboard *onboarding
	// origins keeps who published each announcement, for discovery.
	origins *origins

	// Refusals are logged at most once per refusalLogEvery, with a count,
	// and each is counted by reason.
	refusals logLimiter
	count    func(reason string)
}

// authConfig is what the config says of the broker's logins: a reload
// replaces it whole, and each check reads one.
type authConfig struct {
	// logins maps each login, the hub's among them, to its password.
	logins    map[string]string
	anonymous bool // no plug logins: anyone may connect
	rules     *brokerRules
	// clientIDs maps each client id, or prefix ending in *, that a login
	// claims (mqtt.users.<login>.client_ids) to that login.
	clientIDs map[string]string
}

// newAuthConfig is the logins of users, and the hub's, with rules.
func newAuthConfig(hubUser, hubPassword string, users map[string]Login, rules *brokerRules) *authConfig {
	a := &authConfig{logins: map[string]string{hubUser: hubPassword}, anonymous: len(users) == 0, rules: rules, clientIDs: map[string]string{}}
	for u, l := range users {
		if u != hubUser {
			a.logins[u] = l.Password
		}
		for _, id := range l.ClientIDs {
			a.clientIDs[id] = u
		}
	}
	return a
}

// conf is the logins and rules in force.
func (h *authHook) conf() *authConfig { return h.cfg.Load() }

func (h *authHook) ID() string { return "switchbridge-auth" }

func (h *authHook) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnConnect, mochi.OnConnectAuthenticate, mochi.OnSessionEstablish,
		mochi.OnDisconnect, mochi.OnACLCheck, mochi.OnSubscribe, mochi.OnSubscribed, mochi.OnPublish, mochi.OnWill,
		mochi.OnRetainMessage, mochi.OnRetainedExpired}, []byte{b})
}

// OnConnect refuses, with the CONNACK code that says why, what no login may
// do. It runs before the password is checked; a client with an unknown
// login is left to OnConnectAuthenticate.
func (h *authHook) OnConnect(cl *mochi.Client, pk packets.Packet) error {
	user := string(pk.Connect.Username)
	refuse := func(code packets.Code, why string) error {
		h.refused(cl, user, why)
		_ = h.srv.SendConnack(cl, code, false, nil)
		return code
	}
	if pk.ProtocolVersion >= 5 && !h.mqtt5 {
		// No plug firmware needs MQTT 5, and its decoders are where mochi
		// has panicked. [MQTT-3.1.2-2]
		return refuse(packets.ErrUnsupportedProtocolVersion, "MQTT 5 is off (mqtt.mqtt5)")
	}
	if user == h.conf().rules.hubUser {
		return nil
	}
	if cl.ID == h.conf().rules.hubClientID {
		return refuse(packets.ErrClientIdentifierNotValid, "the client id is the hub's")
	}
	if owner, ok := h.clientIDOwner(cl.ID); ok && owner != user {
		h.count(refusedClientID)
		return refuse(packets.ErrClientIdentifierNotValid, "the client id belongs to login "+owner)
	} else if !ok && h.bindsClientIDs(cl) {
		ctx, cancel := context.WithTimeout(context.Background(), clientIDTimeout)
		owner, err := h.bound.MQTTClientIDLogin(ctx, cl.ID)
		cancel()
		if err != nil {
			h.log.Error("reading the login of an MQTT client id", "client", bridge.Untrusted(cl.ID), "err", err)
			return refuse(packets.ErrServerUnavailable, "the client id's login could not be read")
		}
		if owner != "" && owner != user {
			h.count(refusedClientID)
			return refuse(packets.ErrClientIdentifierNotValid, "the client id belongs to login "+owner+" (switchbridge mqtt release-client-id frees it)")
		}
	}
	existing, ok := h.srv.Clients.Get(cl.ID)
	if ok && !existing.Closed() && string(existing.Properties.Username) != user &&
		(string(existing.Properties.Username) != OnboardingLogin || user == OnboardingLogin) {
		// A plug's own login, once its password is checked, takes its
		// client id over from an onboarding client: the plug adopted, or
		// one squatting its id.
		// mochi would disconnect the client holding the id.
		h.count(refusedClientID)
		return refuse(packets.ErrClientIdentifierNotValid, "the client id is in use by another login")
	}
	if !ok && h.srv.Clients.Len() >= h.maxSessions {
		return refuse(packets.ErrServerUnavailable, "too many sessions")
	}
	if h.pluggedIn(ok && !existing.Closed()) >= h.maxClients {
		// mochi's own bound is one higher: room kept for the hub's client.
		h.count(refusedClients)
		return refuse(packets.ErrServerUnavailable, "max_clients plugs are connected")
	}
	if bound := h.conf().rules.keptSessions(user); !h.conf().anonymous && h.connected(user, cl.ID) >= bound {
		// Room for the other logins' plugs: one login (a compromised plug
		// cycling client ids) cannot fill max_clients.
		h.count(refusedLoginClients)
		return refuse(packets.ErrServerUnavailable, fmt.Sprintf("the login has %d clients connected, one per switch it serves and %d more", bound, spareSessions))
	}
	if pk.Connect.WillFlag && !h.conf().rules.mayPublish(user, pk.Connect.WillTopic) {
		// mochi publishes a will without asking the ACL.
		return refuse(packets.ErrBadUsernameOrPassword, "its last will is on a topic it may not publish on: "+pk.Connect.WillTopic)
	}
	return nil
}

// clientIDOwner returns the login that claims client id id, if any.
func (h *authHook) clientIDOwner(id string) (string, bool) { return h.conf().clientIDOwner(id) }

// clientIDOwner returns the login that claims client id id, if any.
func (a *authConfig) clientIDOwner(id string) (string, bool) {
	if u, ok := a.clientIDs[id]; ok {
		return u, true
	}
	for p, u := range a.clientIDs {
		if claims(p, id) {
			return u, true
		}
	}
	return "", false
}

// pluggedIn is the number of clients connected other than the hub's,
// less one when the connecting client takes over a connected one.
func (h *authHook) pluggedIn(takesOver bool) int {
	n := int(atomic.LoadInt64(&h.srv.Info.ClientsConnected))
	if hub, ok := h.srv.Clients.Get(h.conf().rules.hubClientID); ok && !hub.Closed() {
		n--
	}
	if takesOver {
		n--
	}
	return n
}

// connected is the number of clients of user connected with another
// client id than id (a client taking its own id over replaces its
// connection).
func (h *authHook) connected(user, id string) int {
	n := 0
	for _, c := range h.srv.Clients.GetAll() {
		if c.ID != id && !c.Closed() && string(c.Properties.Username) == user {
			n++
		}
	}
	return n
}

// OnConnectAuthenticate checks the password, unless the login must wait
// after failures (see loginThrottle), and then, the login being proven,
// bounds the sessions it keeps.
func (h *authHook) OnConnectAuthenticate(cl *mochi.Client, pk packets.Packet) bool {
	user := string(pk.Connect.Username)
	want, known := h.conf().logins[user]
	var ok bool
	switch {
	case !known && h.conf().anonymous:
		// Without configured users anyone may connect, whatever login the
		// firmware sends by default (Tasmota sends DVES_USER).
		ok = true
	case user == OnboardingLogin:
		ok = h.checkOnboarding(cl, pk.Connect.Password)
	case user == h.conf().rules.hubUser:
		// The hub's password is random and never fails: not throttled.
		if ok = subtle.ConstantTimeCompare([]byte(want), pk.Connect.Password) == 1; !ok {
			h.count(refusedPassword)
			h.refused(cl, user, "wrong password for the hub's own login")
		}
	default:
		ok = h.checkPassword(cl, user, func() bool {
			return known && subtle.ConstantTimeCompare([]byte(want), pk.Connect.Password) == 1
		})
	}
	if ok && user != h.conf().rules.hubUser {
		if !h.bindClientID(cl, user) {
			return false
		}
		h.awaitPredecessor(cl)
		h.takeSessionOver(cl, user)
		h.boundSessions(cl, user)
	} else if ok {
		h.awaitPredecessor(cl)
	}
	return ok
}

// predecessorWait bounds how long a client logging in waits for the last
// connection with its client id to leave (see awaitPredecessor): that
// connection's way out is its last will, through the retained fence
// (fenceWait), and mochi's bookkeeping.
const predecessorWait = 3 * time.Second

// awaitPredecessor lets the connection that last used cl's client id,
// with a session that ends with it (a clean session), leave the broker's
// client list before cl joins it. mochi removes such a client from the
// list by client id when its connection has ended, unless a newer
// connection took the session over before it looked; a newer one joining
// after that look is removed in its place: it stays connected and
// subscribed and is sent nothing, its plug online and deaf. A plug whose
// connection a reload ended (its login or password changed when it was
// adopted) or that reconnects the moment its old connection broke joins
// in just that moment. So the connection still open is ended here (a
// takeover, which mochi would do; its last will goes out first, as it
// would), and cl waits until it has left, at most predecessorWait: past
// that cl goes ahead, as it did before, and it is logged. A kept session
// (not clean) stays in the list, and is taken over as mochi does.
func (h *authHook) awaitPredecessor(cl *mochi.Client) {
	old, ok := h.srv.Clients.Get(cl.ID)
	if !ok || old == cl || !sessionEnds(old) {
		return
	}
	if !old.Closed() {
		_ = h.srv.DisconnectClient(old, packets.ErrSessionTakenOver)
	}
	deadline := time.Now().Add(predecessorWait)
	for {
		cur, ok := h.srv.Clients.Get(cl.ID)
		if !ok || cur != old {
			return
		}
		if time.Now().After(deadline) {
			h.log.Warn("an MQTT client's last connection with its client id has not left; it connects anyway",
				"client", bridge.Untrusted(cl.ID), "waited", predecessorWait)
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// sessionEnds reports whether cl's session ends with its connection
// (MQTT 3's clean session, MQTT 5's session expiry 0), so that mochi
// removes it from its client list when it leaves.
func sessionEnds(cl *mochi.Client) bool {
	if cl.Properties.ProtocolVersion >= 5 {
		return cl.Properties.Props.SessionExpiryInterval == 0
	}
	return cl.Properties.Clean
}

// bindsClientIDs reports whether cl's client id is bound to the login that
// first used it: with logins configured (anyone may connect without), and
// not when the broker made the id up for a client that sent none.
func (h *authHook) bindsClientIDs(cl *mochi.Client) bool {
	return !h.conf().anonymous && cl.Properties.Props.AssignedClientID == ""
}

// bindClientID binds cl's client id to user, whose password is checked,
// unless it is another login's: OnConnect refused that already, but
// another login may have bound it since. A client id the config gives
// user is bound to user whatever it was bound to. When the binding cannot
// be written, only a client id bound to user already is let in.
func (h *authHook) bindClientID(cl *mochi.Client, user string) bool {
	if !h.bindsClientIDs(cl) || user == OnboardingLogin {
		// An onboarding client binds nothing: it would keep the client id
		// from the login the device is adopted with, and one squatting
		// ids would keep them from the plugs that use them.
		return true
	}
	_, listed := h.clientIDOwner(cl.ID) // then user's: OnConnect checked
	ctx, cancel := context.WithTimeout(context.Background(), clientIDTimeout)
	defer cancel()
	owner, err := h.bound.BindMQTTClientID(ctx, cl.ID, user, time.Now(), listed, clientIDsKept*h.conf().rules.keptSessions(user))
	if err != nil {
		h.log.Error("binding an MQTT client id to its login", "login", bridge.Untrusted(user), "client", bridge.Untrusted(cl.ID), "err", err)
		owner, err = h.bound.MQTTClientIDLogin(ctx, cl.ID)
		return err == nil && owner == user
	}
	if owner != user {
		h.count(refusedClientID)
		h.refused(cl, user, "the client id belongs to login "+owner)
		return false
	}
	return true
}

// checkPassword checks a plug login's password with match, throttled per
// login and address: a login that must still wait is refused unchecked.
// Failures (an unknown login among them) are logged, rate-limited, and
// counted.
func (h *authHook) checkPassword(cl *mochi.Client, user string, match func() bool) bool {
	addr := remoteKey(cl.Net.Conn.RemoteAddr())
	wait, ok, attack := h.throttle.check(user, addr, match)
	if wait > 0 {
		h.count(refusedThrottled)
		h.refused(cl, user, fmt.Sprintf("too many failed logins from this address; refused unchecked for %s more", wait.Round(time.Second)))
		return false
	}
	if ok {
		return true
	}
	h.count(refusedPassword)
	if attack {
		h.log.Warn("MQTT login failing from many addresses: someone may be guessing its password",
			"login", bridge.Untrusted(user), "failures_per_hour", loginAttack)
	}
	h.refused(cl, user, "wrong login or password")
	return false
}

// takeSessionOver drops the kept session of another login that used cl's
// client id (its client disconnected; OnConnect refuses a connected one):
// mochi would hand its subscriptions to cl, a client of another login.
func (h *authHook) takeSessionOver(cl *mochi.Client, user string) {
	old, ok := h.srv.Clients.Get(cl.ID)
	if !ok || string(old.Properties.Username) == user {
		return
	}
	h.srv.UnsubscribeClient(old)
	old.ClearInflights()
	if cur, ok := h.srv.Clients.Get(old.ID); ok && cur == old {
		h.srv.Clients.Delete(old.ID)
	}
}

// OnSessionEstablish runs once a client has logged in: its connection no
// longer takes a place among those logging in.
func (h *authHook) OnSessionEstablish(cl *mochi.Client, _ packets.Packet) {
	if c, ok := cl.Net.Conn.(*slotConn); ok {
		c.loggedIn()
	}
}

// OnDisconnect forgets a SUBSCRIBE of cl left undecided, and cl if it was
// an onboarding client.
func (h *authHook) OnDisconnect(cl *mochi.Client, _ error, _ bool) {
	h.subs.done(cl)
	h.forgetOnboarded(cl)
}

// OnSubscribe refuses the filters of a SUBSCRIBE beyond the client's or
// its login's bounds (see subscriptionBounds); the hub's client has none.
func (h *authHook) OnSubscribe(cl *mochi.Client, pk packets.Packet) packets.Packet {
	user := string(cl.Properties.Username)
	if user == h.conf().rules.hubUser || cl.Net.Inline {
		return pk
	}
	pk, refused := h.subs.admit(h.srv, cl, user, pk)
	for _, why := range refused {
		h.count(why)
	}
	if len(refused) > 0 {
		h.refused(cl, user, fmt.Sprintf("%d subscriptions beyond max_subscriptions_per_client (%d), max_subscriptions_per_login (%d) or %d bytes and %d levels a filter",
			len(refused), h.subs.maxPerClient, h.subs.maxPerLogin, maxFilterLength, maxFilterLevels))
	}
	return pk
}

// OnSubscribed answers each refused filter with "quota exceeded" for an
// MQTT 5 client (an MQTT 3 client gets mochi's 0x80, failure). mochi
// writes the SUBACK with reasonCodes after this hook.
func (h *authHook) OnSubscribed(cl *mochi.Client, pk packets.Packet, reasonCodes []byte) {
	h.subs.done(cl)
	if cl.Properties.ProtocolVersion < 5 {
		return
	}
	for i, f := range pk.Filters {
		if f.Filter == overBound && i < len(reasonCodes) {
			reasonCodes[i] = packets.ErrQuotaExceeded.Code
		}
	}
}

// OnRetainMessage forgets a retained message cleared by an empty one.
func (h *authHook) OnRetainMessage(_ *mochi.Client, pk packets.Packet, _ int64) {
	if len(pk.Payload) == 0 {
		h.retained.drop(pk.TopicName)
	}
}

// OnRetainedExpired forgets a retained message that expired (MQTT 5).
func (h *authHook) OnRetainedExpired(topic string) { h.retained.drop(topic) }

// boundSessions makes room, when cl brings a new client id, for one more
// kept session of user: beyond rules.keptSessions its oldest disconnected
// sessions are dropped. Else one login could fill the broker's session
// records (OnConnect refuses every new client id beyond maxSessions) with
// client ids of its own for sessionExpiry, and a plug replaced meanwhile
// would be refused. It runs only once user's password is checked: a client
// that cannot log in drops nothing.
func (h *authHook) boundSessions(cl *mochi.Client, user string) {
	if _, ok := h.srv.Clients.Get(cl.ID); ok {
		return // its own session, resumed or taken over: no new record
	}
	var kept []*mochi.Client
	for _, c := range h.srv.Clients.GetAll() {
		if c.StopTime() != 0 && string(c.Properties.Username) == user {
			kept = append(kept, c)
		}
	}
	bound := h.conf().rules.keptSessions(user)
	if len(kept) < bound {
		return
	}
	slices.SortFunc(kept, func(a, b *mochi.Client) int { return cmp.Compare(a.StopTime(), b.StopTime()) })
	drop := kept[:len(kept)-bound+1]
	for _, c := range drop {
		h.srv.UnsubscribeClient(c)
		c.ClearInflights()
		if cur, ok := h.srv.Clients.Get(c.ID); ok && cur == c {
			h.srv.Clients.Delete(c.ID)
		}
	}
	if ok, held := h.refusals.allow(); ok {
		h.log.Warn("MQTT login keeps too many sessions; dropped its oldest", "login", bridge.Untrusted(user), "client", bridge.Untrusted(cl.ID),
			"dropped", len(drop), "bound", bound, "refusals_not_logged", held)
	}
}

// OnACLCheck decides subscriptions and deliveries. Publishes are decided in
// OnPublish, where a refused one can be dropped without disconnecting the
// client (mochi disconnects an MQTT 3 client whose QoS 1 publish the ACL
// refuses), as Mosquitto does.
func (h *authHook) OnACLCheck(cl *mochi.Client, topic string, write bool) bool {
	if write {
		return true
	}
	user := string(cl.Properties.Username)
	if h.conf().rules.mayReadAs(user, cl.ID, topic) {
		return true
	}
	if user != OnboardingLogin {
		// An onboarding client's firmware subscribes to its commands at
		// every connect: refused by design, not logged each time.
		h.refused(cl, user, "may not subscribe to "+topic)
	}
	return false
}

// OnPublish drops what the publisher may not publish, retained commands
// from anyone, and the retain flag beyond the retained-message bounds.
func (h *authHook) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	user := string(cl.Properties.Username)
	rules := h.conf().rules
	if !rules.mayPublish(user, pk.TopicName) {
		if rules.quietDrop(user, cl.ID, pk.TopicName, pk.Payload, pk.FixedHeader.Retain) {
			return pk, packets.CodeSuccessIgnore
		}
		h.refused(cl, user, "may not publish on "+pk.TopicName)
		return pk, packets.CodeSuccessIgnore
	}
	if !rules.mayAnnounce(user, pk.TopicName, pk.Payload) {
		h.refused(cl, user, "may not announce another plug's device on "+pk.TopicName)
		return pk, packets.CodeSuccessIgnore
	}
	if user != rules.hubUser && len(pk.Payload) > 0 && announcement(pk.TopicName) {
		h.origins.note(pk.TopicName, pk.Payload, Origin{ClientID: cl.ID, Login: user})
	}
	if !pk.FixedHeader.Retain || len(pk.Payload) == 0 {
		return pk, nil // an empty retained message clears one
	}
	if h.conf().rules.isCommand(pk.TopicName) {
		// Tasmota replays a retained command at every reconnect.
		h.refused(cl, user, "may not retain a command on "+pk.TopicName)
		return pk, packets.CodeSuccessIgnore
	}
	pk.FixedHeader.Retain = h.mayRetain(cl, user, pk.TopicName, pk.Payload)
	return pk, nil
}

// OnWill applies the retained-message bounds to a last will as it is sent:
// mochi retains a will without passing it through OnPublish. Its topic was
// checked at CONNECT.
func (h *authHook) OnWill(cl *mochi.Client, will mochi.Will) (mochi.Will, error) {
	if will.Retain && len(will.Payload) > 0 {
		will.Retain = h.mayRetain(cl, string(cl.Properties.Username), will.TopicName, will.Payload)
	}
	return will, nil
}

// mayRetain reports whether a retained message fits the bounds: at most
// maxRetainedPayload bytes, within the share of user (retainedShares) and
// of the store. Beyond them the message is delivered, not kept.
func (h *authHook) mayRetain(cl *mochi.Client, user, topic string, payload []byte) bool {
	if len(payload) > maxRetainedPayload {
		return false
	}
	if !h.retained.take(user, topic, payload) {
		h.count(refusedRetained)
		h.refused(cl, user, fmt.Sprintf("not retained on %s: the login's share of retained messages is full", topic))
		return false
	}
	return true
}

// refused logs a refusal, rate-limited: a misbehaving client must not flood
// the journal.
func (h *authHook) refused(cl *mochi.Client, user, why string) {
	if ok, held := h.refusals.allow(); ok {
		h.log.Warn("MQTT client refused", "login", bridge.Untrusted(user), "client", bridge.Untrusted(cl.ID), "remote", cl.Net.Remote,
			"reason", bridge.Untrusted(why), "refusals_not_logged", held)
	}
}
