// The embedded broker's bounds on what one client, and one login's clients
// together, make it hold: subscriptions (subscriptionBounds) and retained
// messages (retainedShares). The connections still logging in are bounded
// by the listener, failed logins by the login throttle.

package mqtt

import (
	"strings"
	"sync"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

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

// resize sets the store's bound (a reload changed the number of logins).
// Messages kept beyond a smaller bound stay; new ones wait for room.
func (r *retainedShares) resize(total int) {
	r.mu.Lock()
	r.total = total
	r.mu.Unlock()
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
