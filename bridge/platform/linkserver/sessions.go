package linkserver

// One process per hub: the platform lets in the requests of the instance
// that holds a hub's link and refuses another process with the same
// credentials (409, logged and recorded for hub list). The per-hub record
// also holds the hub's long polls, bounded in watch.go.

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/infra/clientaddr"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// liveGap is how long after a request of a hub's instance ended normally
// its link counts as live: the time a hub takes between one answer and its
// next poll. A request that ended because the hub went away (a killed
// process closes its connections) leaves no such grace.
const liveGap = 2 * time.Second

// sessions tracks, per hub, the instance that holds its link and its long
// polls in flight. In memory: a restarted platform starts with none.
type sessions struct {
	mu sync.Mutex
	m  map[string]*hubSession
}

type hubSession struct {
	instance string
	active   int       // requests of instance in flight
	liveTill time.Time // the link counts as live until then when none is
	polls    []chan struct{}
}

func newSessions() *sessions { return &sessions{m: map[string]*hubSession{}} }

// enter admits a request of hub id's instance, or returns the instance
// that holds the hub's link now (ok false). done must be called when the
// request ends, with whether the hub was still there to hear the answer.
func (s *sessions) enter(id, instance string, now time.Time) (done func(answered bool), holder string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := s.m[id]
	if hs == nil {
		hs = &hubSession{}
		s.m[id] = hs
	}
	if hs.instance != instance && (hs.active > 0 || now.Before(hs.liveTill)) {
		return nil, hs.instance, false
	}
	hs.instance = instance
	hs.active++
	var once sync.Once
	return func(answered bool) {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			hs.active--
			if answered {
				hs.liveTill = time.Now().Add(liveGap)
			} else if hs.active == 0 {
				hs.liveTill = time.Time{}
			}
		})
	}, "", true
}

// admit lets a request of an authenticated hub in, unless another process
// with the hub's credentials (another instance) holds its link now: then
// it answers 409, says why, and records it for hub list. The newcomer is
// refused, not the instance serving: a copied config must not take a
// working hub's locations away. done must be called when the request ends.
func (p *Platform) admit(w http.ResponseWriter, r *http.Request, h *bridge.RegisteredHub) (done func(answered bool), ok bool) {
	inst := r.Header.Get(link.InstanceHeader)
	if len(inst) > 64 {
		inst = inst[:64]
	}
	done, holder, ok := p.sessions.enter(h.ID, inst, p.now())
	if ok {
		return done, true
	}
	addr := clientaddr.Key(r, p.opts.TrustedProxies)
	why := fmt.Sprintf("another process with this hub's credentials holds its link (instance %s); refused instance %s from %s", orNone(holder), orNone(inst), addr)
	if p.noteConflict(h.ID) {
		p.logger.Error("hub link: two processes call with the credentials of hub "+h.Name+": the one holding the link keeps it, the newcomer is refused; "+
			"stop one of them (a copied config?), or give it its own hub (hub add)", "hub", h.ID, "holder", orNone(holder), "newcomer", orNone(inst), "peer", addr)
		if err := p.store.SetHubConflict(context.WithoutCancel(r.Context()), h.ID, why, p.now()); err != nil {
			p.logger.Warn("hub link: recording a hub's conflict", "hub", h.ID, "err", err)
		}
	}
	setLocations(w, locationIDs(h.Locations))
	wire.WriteError(w, http.StatusConflict, "another process with this hub's credentials holds the link to the platform: this one is refused and must serve none of the hub's installations", nil)
	return nil, false
}

// noteConflict reports whether a hub's conflict is worth logging and
// recording now: at most once per 10 s per hub, however often the
// newcomer calls.
func (p *Platform) noteConflict(id string) bool {
	p.conflictMu.Lock()
	defer p.conflictMu.Unlock()
	now := p.now()
	if now.Sub(p.conflictLog[id]) < 10*time.Second {
		return false
	}
	if len(p.conflictLog) > hubLoginPolicy.MaxKeys {
		clear(p.conflictLog)
	}
	p.conflictLog[id] = now
	return true
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
