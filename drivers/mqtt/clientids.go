// Client ids that belong to their login: the first plug login that
// connects to the embedded broker with a client id keeps it, so that
// another login cannot take it (and with it the session the broker keeps
// for that client id, its subscriptions and queued messages) while the
// plug is offline. The bindings are kept in the hub's database when the
// daemon hands one over (drivers.Env.Store), in memory otherwise.

package mqtt

import (
	"context"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// ClientIDs is where the embedded broker keeps which login each client id
// belongs to. The hub's store satisfies it.
type ClientIDs interface {
	// MQTTClientIDLogin returns the login id is bound to, "" when none.
	MQTTClientIDLogin(ctx context.Context, id string) (string, error)
	// BindMQTTClientID binds id to login when it is bound to none (or,
	// with take, to another), notes at as its last use when it is
	// login's, and returns the login it is bound to after; login keeps at
	// most keep client ids, its least recently used going first.
	BindMQTTClientID(ctx context.Context, id, login string, at time.Time, take bool, keep int) (string, error)
}

// ClientIDAdmin is what the owner's commands do with the bindings.
type ClientIDAdmin interface {
	// ReleaseMQTTClientID unbinds id, returning what it was bound to; a
	// *bridge.Error with ENOTFOUND when it was bound to none.
	ReleaseMQTTClientID(ctx context.Context, id string) (*bridge.MQTTClientID, error)
	// MQTTClientIDs lists the bindings.
	MQTTClientIDs(ctx context.Context) ([]*bridge.MQTTClientID, error)
}

// clientIDsKept bounds the client ids one login keeps bound, as a multiple
// of the sessions it may keep (one per switch it serves and spareSessions
// more): room for plugs replaced and firmware that changed its client id,
// while a login cycling client ids only unbinds its own oldest.
const clientIDsKept = 4

// ClientIDsKept is how many client ids a login serving switches switches
// keeps bound, as the broker counts them.
func ClientIDsKept(switches int) int { return clientIDsKept * (switches + spareSessions) }

// clientIDTimeout bounds a binding's read or write: the broker's hooks
// run on the connecting client's goroutine, with no context of their own.
const clientIDTimeout = 5 * time.Second

// memoryClientIDs keeps the bindings in memory, for a driver built
// without the hub's database: they hold until the hub stops.
type memoryClientIDs struct {
	mu    sync.Mutex
	login map[string]string
	last  map[string]time.Time
}

func newMemoryClientIDs() *memoryClientIDs {
	return &memoryClientIDs{login: map[string]string{}, last: map[string]time.Time{}}
}

func (m *memoryClientIDs) MQTTClientIDLogin(_ context.Context, id string) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.login[id], nil
}

func (m *memoryClientIDs) BindMQTTClientID(_ context.Context, id, login string, at time.Time, take bool, keep int) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if owner, ok := m.login[id]; ok && owner != login && !take {
		return owner, nil
	}
	m.login[id], m.last[id] = login, at
	var held []string
	for other, l := range m.login {
		if l == login && other != id {
			held = append(held, other)
		}
	}
	for len(held) >= keep {
		oldest := 0
		for i, other := range held {
			if m.last[other].Before(m.last[held[oldest]]) {
				oldest = i
			}
		}
		delete(m.login, held[oldest])
		delete(m.last, held[oldest])
		held = append(held[:oldest], held[oldest+1:]...)
	}
	return login, nil
}

// clientIDStore is the hub's database when the daemon handed it over, else
// nil: the broker then keeps the bindings in memory.
func (d *driver) clientIDStore() ClientIDs {
	if st, ok := d.env.Store.(ClientIDs); ok {
		return st
	}
	return nil
}

// onboardingStore is the hub's database when the daemon handed it over,
// else nil: the onboarding login then stays closed.
func (d *driver) onboardingStore() OnboardingStore {
	if st, ok := d.env.Store.(OnboardingStore); ok {
		return st
	}
	return nil
}
