package mqtt

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/switchbridge/switchbridge/bridge"
)

// Bounds of the embedded broker that are not config keys. Each caps what one
// client, logged in or not, can make the hub hold. The bounds per address
// and per login are in broker_limits.go.
const (
	// maxInflight is the QoS 1/2 messages kept per client until acknowledged.
	maxInflight = 256
	// receiveMaximum is the QoS 2 messages a client may have unacknowledged.
	receiveMaximum = 64
	// maxWritesPending is the messages queued per client for its socket
	// (mochi allocates the queue at every accept).
	maxWritesPending = 1024
	// topicAliases bounds each MQTT 5 client's topic alias table.
	topicAliases = 16
	// sessionExpiry is how long a disconnected client's persistent session
	// (clean session off) is kept, in seconds.
	sessionExpiry = 600
	// maxRetained and maxRetainedPayload bound the retained messages:
	// beyond them a message is delivered but not retained. The store holds
	// maxRetained messages, or every login's share
	// (max_retained_per_login) when that is more.
	maxRetained        = 1024
	maxRetainedPayload = 16 << 10
)

// embeddedBroker is the MQTT broker the hub runs in-process for
// broker: embedded, so plugs can connect straight to the hub.
type embeddedBroker struct {
	srv         *mochi.Server
	addr        string // where it listens
	dialAddr    string // where the hub's own client reaches it
	hubUser     string
	hubPassword string
	log         *slog.Logger
	listener    *guardedListener
	hook        *authHook
	// panics counts the client connections dropped because mochi panicked
	// on what they sent.
	panics atomic.Int64
	// refusals counts what the broker refused, by reason, as the metric
	// does (this one for tests and the log).
	refusals map[string]*atomic.Int64
}

// refusalsCounted is how often the broker refused for reason.
func (b *embeddedBroker) refusalsCounted(reason string) int64 {
	if c, ok := b.refusals[reason]; ok {
		return c.Load()
	}
	return 0
}

// embeddedOptions is what startEmbedded needs from the driver.
type embeddedOptions struct {
	set         Settings
	hubClientID string
	rules       *brokerRules
	// refused is told of each refusal, by reason (the refused* constants);
	// nil ignores them.
	refused func(reason string)
}

// startEmbedded listens on o.set.Listen (a bind error comes back here,
// before the hub reports ready) and serves MQTT there. With no configured
// users any client may connect (the config allows that only on loopback).
// The hub's own client logs in with a random password made here.
func startEmbedded(o embeddedOptions, log *slog.Logger) (*embeddedBroker, error) {
	ln, err := net.Listen("tcp", o.set.Listen)
	if err != nil {
		return nil, fmt.Errorf("embedded MQTT broker: %w", err)
	}
	secret := make([]byte, 16)
	if _, err := rand.Read(secret); err != nil {
		ln.Close()
		return nil, err
	}
	blog := log.With("component", "embedded-broker")
	b := &embeddedBroker{addr: ln.Addr().String(), hubUser: HubLogin, hubPassword: hex.EncodeToString(secret), log: blog}
	b.dialAddr = b.addr
	if tcp, ok := ln.Addr().(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
		b.dialAddr = net.JoinHostPort("127.0.0.1", fmt.Sprint(tcp.Port))
	}

	logins := map[string]string{b.hubUser: b.hubPassword}
	for u, l := range o.set.Users {
		if u != b.hubUser {
			logins[u] = l.Password
		}
	}
	caps := mochi.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = uint32(o.set.MaxPacketSize)
	// One more for the hub's own client: OnConnect holds the others to
	// max_clients, so plugs cannot take the hub's place.
	caps.MaximumClients = int64(o.set.MaxClients) + 1
	caps.MaximumInflight = maxInflight
	caps.ReceiveMaximum = receiveMaximum
	caps.MaximumClientWritesPending = maxWritesPending
	caps.TopicAliasMaximum = topicAliases
	caps.MaximumSessionExpiryInterval = sessionExpiry
	caps.SharedSubAvailable = 0
	b.srv = mochi.New(&mochi.Options{
		Logger:       slog.New(minLevel{blog.Handler(), slog.LevelWarn}),
		Capabilities: caps,
		// The $SYS topics are of no use to plugs; publish them rarely.
		SysTopicResendInterval: 3600,
	})
	b.refusals = map[string]*atomic.Int64{}
	for _, r := range refusalReasons {
		b.refusals[r] = &atomic.Int64{}
	}
	refused := func(reason string) {
		if c, ok := b.refusals[reason]; ok {
			c.Add(1)
		}
		if o.refused != nil {
			o.refused(reason)
		}
	}
	shares := len(o.set.Users) + 1 // and the hub's
	hook := &authHook{srv: b.srv, log: blog, logins: logins, anonymous: len(o.set.Users) == 0,
		rules: o.rules, mqtt5: o.set.MQTT5, maxSessions: 2 * o.set.MaxClients, maxClients: o.set.MaxClients,
		refusals: logLimiter{every: refusalLogEvery}, count: refused,
		subs:     &subscriptionBounds{maxPerClient: o.set.MaxSubsPerClient, maxPerLogin: o.set.MaxSubsPerLogin, pending: map[*mochi.Client]int{}},
		retained: newRetainedShares(o.set.MaxRetainedPerLogin, o.set.MaxRetainedBytesLogin, max(maxRetained, shares*o.set.MaxRetainedPerLogin)),
		throttle: newLoginThrottle(), clientIDs: map[string]string{}}
	for u, l := range o.set.Users {
		for _, id := range l.ClientIDs {
			hook.clientIDs[id] = u
		}
	}
	b.hook = hook
	if err := b.srv.AddHook(hook, nil); err != nil {
		ln.Close()
		return nil, err
	}
	gl := newGuardedListener(ln, handshakeSlots(o.set.MaxClients), refused, blog)
	b.listener = gl
	if err := b.srv.AddListener(newHubListener(gl, blog, b.recovered, b.disconnectAll)); err != nil {
		ln.Close()
		return nil, err
	}
	if err := b.srv.Serve(); err != nil {
		b.srv.Close()
		return nil, err
	}
	log.Info("embedded MQTT broker listening", "address", b.addr, "logins", len(o.set.Users), "mqtt5", o.set.MQTT5)
	return b, nil
}

func (b *embeddedBroker) close() { b.srv.Close() }

// recovered drops the client whose packet made mochi panic, and what the
// broker holds for it: the panic skipped mochi's own clean-up after the
// client's read loop, which would have done the same.
func (b *embeddedBroker) recovered(c net.Conn, v any) {
	b.panics.Add(1)
	stack := debug.Stack()
	if len(stack) > 4096 {
		stack = stack[:4096]
	}
	b.log.Error("an MQTT client sent a packet the broker could not decode; dropped that client",
		"remote", c.RemoteAddr().String(), "panic", fmt.Sprint(v), "stack", string(stack))
	for _, cl := range b.srv.Clients.GetAll() {
		if cl.Net.Conn != c {
			continue
		}
		cl.Stop(fmt.Errorf("panic decoding a packet: %v", v))
		b.srv.UnsubscribeClient(cl)
		cl.ClearInflights()
		if cur, ok := b.srv.Clients.Get(cl.ID); ok && cur == cl {
			b.srv.Clients.Delete(cl.ID)
		}
	}
	c.Close()
}

// disconnectAll tells every client of the broker that it is shutting down
// and closes its connection. mochi's own way to do this at Close
// (Clients.GetByListener) takes the clients' read lock twice, and a client
// leaving at that moment (Clients.Delete waiting for the write lock)
// deadlocks both, so Close never returns; GetAll takes it once.
func (b *embeddedBroker) disconnectAll() {
	for _, cl := range b.srv.Clients.GetAll() {
		if !cl.Closed() {
			_ = b.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
		}
	}
}

// hubListener is the broker's listener: mochi's listeners.Net, plus a
// recover around each connection and retries of failed accepts. mochi
// decodes a client's packets on that client's goroutine, and a decoder
// panic there (v2.7.9 has some on malformed MQTT 5 packets) would otherwise
// end the whole hub, releasing its relays; here it ends only that
// connection.
type hubListener struct {
	ln        net.Listener
	log       *slog.Logger
	recovered func(net.Conn, any)
	// disconnect closes every client at Close, in place of mochi's CloseFn.
	disconnect func()
	closed     atomic.Bool
	done       chan struct{} // closed by Close: ends a wait between accepts
	acceptLog  logLimiter

	// The connections being served, each by a serveConn goroutine: Close
	// closes them and waits for those goroutines. mochi's Close waits on
	// its count of clients (Listeners.ClientsWg) right after this
	// listener's Close, and each connection adds itself to that count on
	// its own goroutine; a connection still on its way there would race
	// with that wait (the race detector reports it) and outlive it.
	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// Backoff between failed accepts, as net/http's Server does.
const (
	acceptRetryMin = 5 * time.Millisecond
	acceptRetryMax = time.Second
)

func newHubListener(ln net.Listener, log *slog.Logger, recovered func(net.Conn, any), disconnect func()) *hubListener {
	return &hubListener{ln: ln, log: log, recovered: recovered, disconnect: disconnect, done: make(chan struct{}),
		acceptLog: logLimiter{every: refusalLogEvery}, conns: map[net.Conn]struct{}{}}
}

func (l *hubListener) ID() string              { return "switchbridge" }
func (l *hubListener) Address() string         { return l.ln.Addr().String() }
func (l *hubListener) Protocol() string        { return "tcp" }
func (l *hubListener) Init(*slog.Logger) error { return nil }

// Serve accepts until the listener is closed. A failed accept (EMFILE when
// the hub is out of file descriptors, ECONNABORTED) is retried after a
// growing pause, and logged at most once per refusalLogEvery: mochi's own
// loop stopped serving for good at the first, silently.
func (l *hubListener) Serve(establish listeners.EstablishFn) {
	var pause time.Duration
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if l.closed.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			pause = min(max(2*pause, acceptRetryMin), acceptRetryMax)
			if ok, held := l.acceptLog.allow(); ok {
				l.log.Error("accepting an MQTT connection failed; retrying", "error", err, "retry_in", pause,
					"failures_not_logged", held)
			}
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
			continue
		}
		pause = 0
		l.mu.Lock()
		if l.closed.Load() {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.conns[c] = struct{}{}
		l.wg.Add(1)
		l.mu.Unlock()
		go l.serveConn(establish, c)
	}
}

func (l *hubListener) serveConn(establish listeners.EstablishFn, c net.Conn) {
	defer func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		l.wg.Done()
	}()
	defer func() {
		if v := recover(); v != nil {
			l.recovered(c, v)
		}
	}()
	err := establish(l.ID(), c)
	switch {
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		l.log.Debug("MQTT client connection ended", "remote", c.RemoteAddr().String(), "error", err)
	}
}

// Close stops accepting and closes the clients. It does not call mochi's
// CloseFn, which can deadlock (see disconnectAll); the broker has this one
// listener, so its clients are all the broker's clients.
func (l *hubListener) Close(listeners.CloseFn) {
	l.mu.Lock()
	first := l.closed.CompareAndSwap(false, true)
	l.mu.Unlock()
	if first {
		close(l.done)
		l.disconnect()
	}
	l.ln.Close()
	// Connections still in their handshake are not clients yet: closing
	// them ends their goroutines too.
	l.mu.Lock()
	for c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// authHook checks logins against the configured users (constant time,
// failures throttled), refuses what a client may not do before it is
// connected (MQTT 5 unless enabled, the hub's client id or another
// login's, a last will it may not publish), bounds the clients and the
// sessions each login keeps, its subscriptions and its retained messages,
// and applies rules to every publish and subscription.
type authHook struct {
	mochi.HookBase
	srv         *mochi.Server
	log         *slog.Logger
	logins      map[string]string
	anonymous   bool
	rules       *brokerRules
	mqtt5       bool
	maxSessions int
	maxClients  int

	subs     *subscriptionBounds
	retained *retainedShares
	throttle *loginThrottle
	// clientIDs maps each client id, or prefix ending in *, that a login
	// claims (mqtt.users.<login>.client_ids) to that login.
	clientIDs map[string]string

	// Refusals are logged at most once per refusalLogEvery, with a count,
	// and each is counted by reason.
	refusals logLimiter
	count    func(reason string)
}

const refusalLogEvery = 10 * time.Second

// logLimiter lets a log line through at most once per interval, so a
// misbehaving client (or a failing accept) cannot flood the journal.
type logLimiter struct {
	every      time.Duration
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether a line may be logged now and, if so, how many were
// held back since the last one.
func (l *logLimiter) allow() (ok bool, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && time.Since(l.last) < l.every {
		l.suppressed++
		return false, 0
	}
	held = l.suppressed
	l.last, l.suppressed = time.Now(), 0
	return true, held
}

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
	if user == h.rules.hubUser {
		return nil
	}
	if cl.ID == h.rules.hubClientID {
		return refuse(packets.ErrClientIdentifierNotValid, "the client id is the hub's")
	}
	if owner, ok := h.clientIDOwner(cl.ID); ok && owner != user {
		h.count(refusedClientID)
		return refuse(packets.ErrClientIdentifierNotValid, "the client id belongs to login "+owner)
	}
	existing, ok := h.srv.Clients.Get(cl.ID)
	if ok && !existing.Closed() && string(existing.Properties.Username) != user {
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
	if bound := h.rules.keptSessions(user); !h.anonymous && h.connected(user, cl.ID) >= bound {
		// Room for the other logins' plugs: one login (a compromised plug
		// cycling client ids) cannot fill max_clients.
		h.count(refusedLoginClients)
		return refuse(packets.ErrServerUnavailable, fmt.Sprintf("the login has %d clients connected, one per switch it serves and %d more", bound, spareSessions))
	}
	if pk.Connect.WillFlag && !h.rules.mayPublish(user, pk.Connect.WillTopic) {
		// mochi publishes a will without asking the ACL.
		return refuse(packets.ErrBadUsernameOrPassword, "its last will is on a topic it may not publish on: "+pk.Connect.WillTopic)
	}
	return nil
}

// clientIDOwner returns the login that claims client id id, if any.
func (h *authHook) clientIDOwner(id string) (string, bool) {
	if u, ok := h.clientIDs[id]; ok {
		return u, true
	}
	for p, u := range h.clientIDs {
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
	if hub, ok := h.srv.Clients.Get(h.rules.hubClientID); ok && !hub.Closed() {
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
	want, known := h.logins[user]
	var ok bool
	switch {
	case !known && h.anonymous:
		// Without configured users anyone may connect, whatever login the
		// firmware sends by default (Tasmota sends DVES_USER).
		ok = true
	case user == h.rules.hubUser:
		// The hub's password is random and never fails: not throttled.
		if ok = subtle.ConstantTimeCompare([]byte(want), pk.Connect.Password) == 1; !ok {
			h.count(refusedPassword)
			h.refused(cl, user, "wrong password for the hub's own login")
		}
	default:
		ok = h.checkPassword(cl, user, known, want, pk.Connect.Password)
	}
	if ok && user != h.rules.hubUser {
		h.takeSessionOver(cl, user)
		h.boundSessions(cl, user)
	}
	return ok
}

// checkPassword checks a plug login's password, throttled per login and
// address: a login that must still wait is refused unchecked. Failures
// (an unknown login among them) are logged, rate-limited, and counted.
func (h *authHook) checkPassword(cl *mochi.Client, user string, known bool, want string, got []byte) bool {
	addr := remoteKey(cl.Net.Conn.RemoteAddr())
	if wait := h.throttle.wait(user, addr); wait > 0 {
		h.count(refusedThrottled)
		h.refused(cl, user, fmt.Sprintf("too many failed logins from this address; refused unchecked for %s more", wait.Round(time.Second)))
		return false
	}
	if known && subtle.ConstantTimeCompare([]byte(want), got) == 1 {
		h.throttle.succeed(user, addr)
		return true
	}
	h.count(refusedPassword)
	if h.throttle.fail(user, addr) {
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

// OnDisconnect forgets a SUBSCRIBE of cl left undecided.
func (h *authHook) OnDisconnect(cl *mochi.Client, _ error, _ bool) { h.subs.done(cl) }

// OnSubscribe refuses the filters of a SUBSCRIBE beyond the client's or
// its login's bounds (see subscriptionBounds); the hub's client has none.
func (h *authHook) OnSubscribe(cl *mochi.Client, pk packets.Packet) packets.Packet {
	user := string(cl.Properties.Username)
	if user == h.rules.hubUser || cl.Net.Inline {
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
	bound := h.rules.keptSessions(user)
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
	if h.rules.mayRead(user, topic) {
		return true
	}
	h.refused(cl, user, "may not subscribe to "+topic)
	return false
}

// OnPublish drops what the publisher may not publish, retained commands
// from anyone, and the retain flag beyond the retained-message bounds.
func (h *authHook) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	user := string(cl.Properties.Username)
	if !h.rules.mayPublish(user, pk.TopicName) {
		h.refused(cl, user, "may not publish on "+pk.TopicName)
		return pk, packets.CodeSuccessIgnore
	}
	if !pk.FixedHeader.Retain || len(pk.Payload) == 0 {
		return pk, nil // an empty retained message clears one
	}
	if h.rules.isCommand(pk.TopicName) {
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

// minLevel drops records below a level: the broker's own info messages
// (every listener and hook it adds) would drown the hub's.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(as), m.min}
}

func (m minLevel) WithGroup(g string) slog.Handler { return minLevel{m.Handler.WithGroup(g), m.min} }
