package mqtt

import (
	"container/list"
	"log/slog"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/switchbridge/switchbridge/bridge"
)

// The embedded broker's bounds per client, per login and per address, so
// that no plug login, neighbour or guesser can use up what all share: the
// connections still logging in, the subscriptions, the retained store,
// the client ids and the passwords' secrecy.

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
	refusedClientID     = "client_id"          // a client id bound to another login, or held by one
	refusedClients      = "max_clients"        // a plug over max_clients
	refusedLoginClients = "login_clients"      // a client over its login's share of the connections
)

// refusalReasons lists every reason, so each series exists from the start.
var refusalReasons = []string{refusedSubscription, refusedFilter, refusedPassword, refusedThrottled,
	refusedHandshake, refusedAddress, refusedRetained, refusedClientID, refusedClients, refusedLoginClients}

// ---- connections still logging in

const (
	// handshakeTimeout is how long a new connection has to send its
	// CONNECT (plugs send it at once); then the keepalive it asks for
	// applies.
	handshakeTimeout = 5 * time.Second
	// minHandshakeSlots is the fewest connections that may be logging in
	// at once; there are max_clients/2 when that is more.
	minHandshakeSlots = 16
	// handshakeShare: one address may hold at most a quarter of them
	// (and at least minPerAddrHandshakes), as on the HTTP listener.
	handshakeShare       = 4
	minPerAddrHandshakes = 4
)

// handshakeSlots is the number of connections that may be logging in at
// once for a broker of maxClients clients.
func handshakeSlots(maxClients int) int { return max(minHandshakeSlots, maxClients/2) }

// guardedListener bounds the connections that have not logged in yet
// (the handshakes): at most slots at once, at most perAddr of them from
// one address (IPv6 by its /64), each with handshakeTimeout to send its
// CONNECT. When all slots are taken, a new connection takes the place of
// the oldest handshake of the address holding the most, so idle
// connections from a few addresses can never keep a plug from another
// address, or the hub's own client, from logging in. A connection that
// has logged in leaves the handshakes; the logged-in clients are bounded
// by max_clients (authHook.OnConnect).
//
// It also turns Nagle's algorithm off on each connection. Go already does
// that for every TCP connection it makes; doing it here keeps that true
// whatever listener sits below. With Nagle on, a plug's small confirmation
// can wait ~40 ms for the client's delayed ACK.
type guardedListener struct {
	net.Listener
	slots, perAddr int
	refused        func(reason string)
	log            *slog.Logger // nil logs nothing
	logEvery       logLimiter

	mu      sync.Mutex
	pending *list.List // of *slotConn still logging in, oldest first
	byAddr  map[string]int
}

func newGuardedListener(l net.Listener, slots int, refused func(string), log *slog.Logger) *guardedListener {
	return &guardedListener{Listener: l, slots: slots, perAddr: max(minPerAddrHandshakes, slots/handshakeShare),
		refused: refused, log: log, logEvery: logLimiter{every: refusalLogEvery}, pending: list.New(), byAddr: map[string]int{}}
}

// warn logs why a connection was closed before its login, at most once
// per refusalLogEvery.
func (l *guardedListener) warn(why string, c net.Conn) {
	if l.log == nil {
		return
	}
	if ok, held := l.logEvery.allow(); ok {
		l.log.Warn("MQTT connection closed before its login: "+why, "remote", c.RemoteAddr().String(),
			"refusals_not_logged", held)
	}
}

func (l *guardedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc := &slotConn{Conn: c, l: l, key: remoteKey(c.RemoteAddr())}
		evict, ok := l.hold(sc)
		if evict != nil {
			l.refused(refusedHandshake)
			l.warn("every place for connections logging in was taken; closed the oldest of the address holding the most", evict)
			evict.Close()
		}
		if !ok {
			l.refused(refusedAddress)
			l.warn("its address holds its share of the places for connections logging in", c)
			c.Close()
			continue
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		// mochi sets the keepalive deadline once the CONNECT is read.
		_ = c.SetDeadline(time.Now().Add(handshakeTimeout))
		return sc, nil
	}
}

// hold takes a handshake slot for c, and returns the handshake to close to
// make room, if any; ok is false when c's address holds its share already.
func (l *guardedListener) hold(c *slotConn) (evict *slotConn, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr[c.key] >= l.perAddr {
		return nil, false
	}
	if l.pending.Len() >= l.slots {
		evict = l.victimLocked()
		l.releaseLocked(evict)
	}
	c.elem = l.pending.PushBack(c)
	l.byAddr[c.key]++
	return evict, true
}

// victimLocked is the oldest handshake of the address holding the most.
func (l *guardedListener) victimLocked() *slotConn {
	most := 0
	for _, n := range l.byAddr {
		most = max(most, n)
	}
	for e := l.pending.Front(); e != nil; e = e.Next() {
		if c := e.Value.(*slotConn); l.byAddr[c.key] == most {
			return c
		}
	}
	return l.pending.Front().Value.(*slotConn)
}

// release gives c's handshake slot back, once (it logged in, or closed).
func (l *guardedListener) release(c *slotConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.releaseLocked(c)
}

func (l *guardedListener) releaseLocked(c *slotConn) {
	if c.elem == nil {
		return
	}
	l.pending.Remove(c.elem)
	c.elem = nil
	if l.byAddr[c.key]--; l.byAddr[c.key] <= 0 {
		delete(l.byAddr, c.key)
	}
}

// handshakes is the number of connections still logging in (for tests).
func (l *guardedListener) handshakes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pending.Len()
}

// slotConn is a connection of the guardedListener: it holds a handshake
// slot until it logs in or closes.
type slotConn struct {
	net.Conn
	l    *guardedListener
	key  string        // its address's key
	elem *list.Element // in l.pending while logging in; guarded by l.mu
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.l.release(c)
	return err
}

// loggedIn moves c out of the handshakes.
func (c *slotConn) loggedIn() { c.l.release(c) }

// remoteKey is the per-address key of a remote address: as the HTTP
// listener and the web login count addresses (IPv6 by its /64).
func remoteKey(a net.Addr) string {
	if a == nil {
		return "unknown"
	}
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return "unknown"
	}
	return bridge.AddrKey(ap.Addr().Unmap())
}

// ---- subscriptions

const (
	// maxFilterLength and maxFilterLevels bound one filter: the broker's
	// topic tree holds a node per level. The driver's own topics are at
	// most 1024 bytes (checkTopic); firmware topics have a few levels.
	maxFilterLength = 1024
	maxFilterLevels = 32
	// overBound replaces a filter the bounds refuse before mochi sees it:
	// it is no valid filter (# not last), so mochi refuses it without
	// adding anything, and OnSubscribed knows it by this value.
	overBound = "#/over-bound"
)

// subscriptionBounds keeps each client within maxPerClient filters and
// each login within maxPerLogin, its kept sessions included. The counts
// are the broker's own records of the subscriptions; a SUBSCRIBE being
// decided holds what it takes as pending until it is done, so clients of
// one login subscribing at once cannot pass the bound together.
type subscriptionBounds struct {
	maxPerClient, maxPerLogin int

	mu      sync.Mutex
	pending map[*mochi.Client]int
}

// admit decides the filters of a SUBSCRIBE of cl (of login user): each
// beyond a bound, or too long or deep, is replaced by overBound. It returns
// the packet and the reasons for the refusals.
func (b *subscriptionBounds) admit(srv *mochi.Server, cl *mochi.Client, user string, pk packets.Packet) (packets.Packet, []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	clientHas := cl.State.Subscriptions.Len()
	loginHas := 0
	for _, c := range srv.Clients.GetAll() {
		if c != cl && string(c.Properties.Username) == user {
			loginHas += c.State.Subscriptions.Len() + b.pending[c]
		}
	}
	var refused []string
	filters := make([]packets.Subscription, len(pk.Filters))
	copy(filters, pk.Filters)
	seen := map[string]bool{}
	taken := 0
	for i, f := range filters {
		if len(f.Filter) > maxFilterLength || strings.Count(f.Filter, "/") >= maxFilterLevels {
			filters[i].Filter = overBound
			refused = append(refused, refusedFilter)
			continue
		}
		if _, has := cl.State.Subscriptions.Get(f.Filter); has || seen[f.Filter] {
			continue // replaces a subscription: nothing more to hold
		}
		if clientHas+taken >= b.maxPerClient || clientHas+loginHas+taken >= b.maxPerLogin {
			filters[i].Filter = overBound
			refused = append(refused, refusedSubscription)
			continue
		}
		seen[f.Filter] = true
		taken++
	}
	pk.Filters = filters
	b.pending[cl] = taken
	return pk, refused
}

// done ends the SUBSCRIBE of cl: what it took is in the broker's records now.
func (b *subscriptionBounds) done(cl *mochi.Client) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pending, cl)
}

// ---- retained messages

// retainedShares gives each login its own share of the retained store:
// at most count messages and bytes bytes (topic and payload) of the
// messages it retained last. A login's message on a topic another login's
// message holds takes that place over, within its own share.
type retainedShares struct {
	count, bytes int
	// total bounds the store as a whole, whatever the number of logins
	// (without configured logins, any login name connects).
	total int

	mu     sync.Mutex
	owners map[string]retainedBy // by topic
	used   map[string]*retainedUse
}

type retainedBy struct {
	login string
	size  int
}

type retainedUse struct{ count, bytes int }

func newRetainedShares(count, bytes, total int) *retainedShares {
	return &retainedShares{count: count, bytes: bytes, total: total, owners: map[string]retainedBy{}, used: map[string]*retainedUse{}}
}

// take reports whether login may retain payload on topic, and if so
// records it as the topic's retained message.
func (r *retainedShares) take(login, topic string, payload []byte) bool {
	size := len(topic) + len(payload)
	r.mu.Lock()
	defer r.mu.Unlock()
	u := r.used[login]
	if u == nil {
		u = &retainedUse{}
	}
	count, bytes := u.count+1, u.bytes+size
	prev, replaces := r.owners[topic]
	if replaces && prev.login == login {
		count, bytes = count-1, bytes-prev.size
	}
	if count > r.count || bytes > r.bytes || !replaces && len(r.owners) >= r.total {
		return false
	}
	r.dropLocked(topic)
	r.owners[topic] = retainedBy{login, size}
	u.count++
	u.bytes += size
	r.used[login] = u
	return true
}

// drop forgets the retained message of topic (cleared, or expired).
func (r *retainedShares) drop(topic string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(topic)
}

func (r *retainedShares) dropLocked(topic string) {
	prev, ok := r.owners[topic]
	if !ok {
		return
	}
	delete(r.owners, topic)
	u := r.used[prev.login]
	u.count--
	u.bytes -= prev.size
	if u.count <= 0 {
		delete(r.used, prev.login)
	}
}

// ---- failed logins

// Failed broker logins are throttled as the web login's are (see
// bridge/oauth's throttle.go for the reasoning): failures count against
// the (login, address) pair and against the address; past a few free
// failures each further try must wait a delay that doubles with every
// failure. A login tried while it must wait is refused without its
// password being checked, so guesses then learn nothing. A pair or
// address that has not failed is never slowed: a plug on its own address
// logs in at once while another address guesses its password. When one
// login fails from many addresses (loginAttack within loginWindow), each
// pair of it gets pairFreeUnderAttack free failures instead of pairFree.
//
// The delays are shorter than the web login's: a plug given a new
// password retries by itself, and should be back within minutes.
const (
	pairFree            = 5
	pairFreeUnderAttack = 1
	addrFree            = 20
	firstDelay          = 5 * time.Second
	maxDelay            = 5 * time.Minute
	loginAttack         = 100
	loginWindow         = time.Hour
	forgetAfter         = 24 * time.Hour
	maxThrottled        = 10000
)

type loginThrottle struct {
	now  func() time.Time
	mu   sync.Mutex
	keys map[string]*loginFailures
}

type loginFailures struct {
	count int
	last  time.Time
	// For a login: the failures since windowStart.
	window      int
	windowStart time.Time
}

func newLoginThrottle() *loginThrottle {
	return &loginThrottle{now: time.Now, keys: map[string]*loginFailures{}}
}

func pairKey(login, addr string) string { return "pair:" + login + "\x00" + addr }
func addrKey(addr string) string        { return "addr:" + addr }
func loginKey(login string) string      { return "login:" + login }

// failDelay is how long after its last failure a key with count failures,
// of which free were free, must wait.
func failDelay(count, free int) time.Duration {
	over := count - free
	if over < 0 {
		return 0
	}
	return min(firstDelay<<min(over, 10), maxDelay)
}

// wait returns how long a login of login from addr must still wait.
func (t *loginThrottle) wait(login, addr string) time.Duration {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	free := pairFree
	if f, ok := t.keys[loginKey(login)]; ok && now.Sub(f.windowStart) < loginWindow && f.window >= loginAttack {
		free = pairFreeUnderAttack
	}
	var longest time.Duration
	for _, k := range []struct {
		key  string
		free int
	}{{pairKey(login, addr), free}, {addrKey(addr), addrFree}} {
		f, ok := t.keys[k.key]
		if !ok || now.Sub(f.last) > forgetAfter {
			continue
		}
		if until := f.last.Add(failDelay(f.count, k.free)); now.Before(until) {
			longest = max(longest, until.Sub(now))
		}
	}
	return longest
}

// fail counts a failed login; it reports whether this failure put the
// login under attack, so that is logged once.
func (t *loginThrottle) fail(login, addr string) (attackStarted bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.keys) >= maxThrottled-3 {
		t.evictLocked(now)
	}
	for _, key := range []string{pairKey(login, addr), addrKey(addr), loginKey(login)} {
		f := t.keys[key]
		if f == nil || now.Sub(f.last) > forgetAfter {
			f = &loginFailures{}
			t.keys[key] = f
		}
		f.count++
		f.last = now
	}
	n := t.keys[loginKey(login)]
	if now.Sub(n.windowStart) >= loginWindow {
		n.window, n.windowStart = 0, now
	}
	n.window++
	return n.window == loginAttack
}

// succeed forgets the pair's failures; the address keeps its own.
func (t *loginThrottle) succeed(login, addr string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.keys, pairKey(login, addr))
}

// evictLocked makes room: first what is forgotten anyway, then the
// quarter of keys whose last failure is oldest.
func (t *loginThrottle) evictLocked(now time.Time) {
	for k, f := range t.keys {
		if now.Sub(f.last) > forgetAfter {
			delete(t.keys, k)
		}
	}
	if len(t.keys) < maxThrottled*3/4 {
		return
	}
	keys := make([]string, 0, len(t.keys))
	for k := range t.keys {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return t.keys[keys[i]].last.Before(t.keys[keys[j]].last) })
	for _, k := range keys[:len(keys)/4] {
		delete(t.keys, k)
	}
}
