package link

import (
	"sync"
	"time"
)

// Headers of the link beyond HTTP Basic. A side that does not know one
// ignores it, so hubs and platforms of different versions still link.
const (
	// InstanceHeader carries a random id a hub process draws at start:
	// two processes calling with one hub's credentials are two instances,
	// which the platform tells apart from one hub reconnecting.
	InstanceHeader = "Switchbridge-Instance"
	// HeartbeatHeader, on a hub's long poll, asks the platform for an
	// interim 102 Processing every HeartbeatInterval while the poll waits,
	// so the hub can tell a dead connection from a quiet one within
	// seconds. On the platform's answers it says the platform sends them.
	HeartbeatHeader = "Switchbridge-Heartbeat"
	// LocationsHeader, on the platform's answers to a hub, lists the
	// locations the platform accepts from that hub (comma-separated, empty
	// for none): the hub serves no installation of any other.
	LocationsHeader = "Switchbridge-Hub-Locations"
	// CursorHeader carries the hub's replica cursor and its tag ("N tag")
	// on its inventory report, so that a platform restored from a backup
	// older than the hub's secret can tell the hub so (RekeyHeader).
	CursorHeader = "Switchbridge-Cursor"
	// RekeyHeader marks a 401 to a hub whose cursor this platform's change
	// log never held: the platform was restored from a backup older than
	// what the hub followed, its secret included. The hub empties its
	// replica: what it holds may have been revoked in a history the
	// platform lost, and it was never issued in the one it kept.
	RekeyHeader = "Switchbridge-Hub-Rekey"
)

// HeartbeatInterval is how often a waiting long poll sends 102 Processing
// to a hub that asked for it; a hub that hears nothing for
// heartbeatSilence takes its connection for dead.
const HeartbeatInterval = time.Second

// MaxPollsPerHub is how many long polls one hub's credentials may hold
// open at once: a hub holds one, and one more covers a poll the platform
// has not yet seen end (a dead connection). A newer poll ends the oldest,
// which is answered at once with no changes, as a poll that timed out.
const MaxPollsPerHub = 2

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

// poll registers a long poll of hub id and returns a channel closed when a
// newer poll of the hub ends this one (past MaxPollsPerHub), and the
// function that unregisters it.
func (s *sessions) poll(id string) (ended <-chan struct{}, release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := s.m[id]
	if hs == nil {
		hs = &hubSession{}
		s.m[id] = hs
	}
	ch := make(chan struct{})
	hs.polls = append(hs.polls, ch)
	for len(hs.polls) > MaxPollsPerHub {
		close(hs.polls[0])
		hs.polls = hs.polls[1:]
	}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for i, c := range hs.polls {
			if c == ch {
				hs.polls = append(hs.polls[:i], hs.polls[i+1:]...)
				break
			}
		}
	}
}
