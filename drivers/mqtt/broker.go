// The embedded broker: mochi set up with the hub's bounds, started and
// closed; a client whose packet made mochi panic dropped alone; the
// reasons the broker refuses, counted and logged at a bounded rate.

package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// The embedded broker's bounds per client, per login and per address, so
// that no plug login, neighbour or guesser can use up what all share: the
// connections still logging in (the listener, broker_listener.go), the
// subscriptions and the retained store (broker_limits.go), the client ids
// and the sessions (the auth hook, broker_auth.go) and the passwords'
// secrecy (broker_throttle.go).

// Bounds of the embedded broker that are not config keys. Each caps what one
// client, logged in or not, can make the hub hold.
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
	fence       *retainFence
	// panics counts the client connections dropped because mochi panicked
	// on what they sent.
	panics atomic.Int64
	// refusals counts what the broker refused, by reason, as the metric
	// does (this one for tests and the log).
	refusals map[string]*atomic.Int64
	// stopWatch ends the watch on the onboarding window.
	stopWatch chan struct{}
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
	// clientIDs keeps which login each client id belongs to; nil keeps
	// them in memory.
	clientIDs ClientIDs
	// onboarding is where the onboarding window is kept; nil keeps the
	// onboarding login closed.
	onboarding OnboardingStore
}

// startEmbedded listens on o.set.Listen (a bind error comes back here,
// before the hub reports ready) and serves MQTT there. With no configured
// users any client may connect (the config allows that only on loopback).
// The hub's own client logs in with a random password made here.
func startEmbedded(o embeddedOptions, log *slog.Logger) (*embeddedBroker, error) {
	ln, err := net.Listen("tcp", o.set.Listen)
	if err != nil {
		return nil, fmt.Errorf("mqtt.listen %s: embedded MQTT broker: %w", o.set.Listen, err)
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
	hook := &authHook{srv: b.srv, log: blog, mqtt5: o.set.MQTT5, maxSessions: 2 * o.set.MaxClients, maxClients: o.set.MaxClients,
		refusals: logLimiter{every: refusalLogEvery}, count: refused,
		subs:     &subscriptionBounds{maxPerClient: o.set.MaxSubsPerClient, maxPerLogin: o.set.MaxSubsPerLogin, pending: map[*mochi.Client]int{}},
		retained: newRetainedShares(o.set.MaxRetainedPerLogin, o.set.MaxRetainedBytesLogin, retainedTotal(o.set)),
		throttle: newLoginThrottle(), bound: o.clientIDs,
		onboard: &onboarding{store: o.onboarding, clients: map[*mochi.Client]onboardedClient{}},
		origins: &origins{m: map[string]Origin{}}}
	hook.cfg.Store(newAuthConfig(b.hubUser, b.hubPassword, o.set.Users, o.rules))
	if hook.bound == nil {
		hook.bound = newMemoryClientIDs()
	}
	b.hook = hook
	// The fence's publish side before the auth hook, its will side after
	// it (broker_fence.go).
	b.fence = newRetainFence(fenceWait)
	for _, h := range []mochi.Hook{&fenceHook{f: b.fence}, hook, &fenceWillHook{f: b.fence}} {
		if err := b.srv.AddHook(h, nil); err != nil {
			ln.Close()
			return nil, err
		}
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
	b.stopWatch = make(chan struct{})
	go hook.watchOnboarding(b.stopWatch)
	log.Info("embedded MQTT broker listening", "address", b.addr, "logins", len(o.set.Users), "mqtt5", o.set.MQTT5)
	return b, nil
}

// retainedTotal bounds the retained store: maxRetained messages, or every
// login's share (the hub's and onboarding's among them) when that is more.
func retainedTotal(s Settings) int {
	return max(maxRetained, (len(s.Users)+2)*s.MaxRetainedPerLogin)
}

func (b *embeddedBroker) close() {
	close(b.stopWatch)
	b.srv.Close()
}

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
		// Nor did its way out of the retained-message fence come.
		b.fence.leave(cl)
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

// Reasons a client or connection is refused, the label values of
// switchbridge_mqtt_broker_refusals_total: a fixed set, never client input.
const (
	refusedSubscription = "subscription_bound" // a filter beyond a client's or login's bound
	refusedFilter       = "filter_too_long"    // a filter too long or too deep
	refusedPassword     = "wrong_password"     // a login with a wrong password
	refusedThrottled    = "login_throttled"    // a login refused unchecked: its address failed too often
	refusedHandshake    = "handshake_evicted"  // a connection without a login closed to make room
	refusedAddress      = "handshake_address"  // a connection over its address's share of those still logging in
	refusedRetained     = "retained_share"     // a retained message beyond its login's share (delivered, not kept)
	refusedClientID     = "client_id"          // a client id that belongs to another login, or is held by one
	refusedClients      = "max_clients"        // a plug over max_clients
	refusedLoginClients = "login_clients"      // a client over its login's share of the connections
	refusedOnboarding   = "onboarding_closed"  // the onboarding login while it is closed
)

// refusalReasons lists every reason, so each series exists from the start.
var refusalReasons = []string{refusedSubscription, refusedFilter, refusedPassword, refusedThrottled,
	refusedHandshake, refusedAddress, refusedRetained, refusedClientID, refusedClients, refusedLoginClients, refusedOnboarding}

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
