package bridge

import (
	"strconv"
	"strings"
	"sync"
	"time"
)

// Cause says why a switch changed.
type Cause string

// The causes of a change.
const (
	// CauseAPI: a command through the installation API (any installation).
	CauseAPI Cause = "api"
	// CauseDevice: the device changed by itself (its button, another
	// controller).
	CauseDevice Cause = "device"
	// CauseStartup: the hub set it while starting (a start-up policy).
	CauseStartup Cause = "startup"
	// CauseAvailability: the device became reachable or unreachable; the
	// value did not change.
	CauseAvailability Cause = "availability"
)

// Event is one change of one switch, as the feed hands it out.
type Event struct {
	// Seq orders the events of one run of the hub: it grows by one per
	// event, starting at 1.
	Seq       uint64
	SwitchID  string
	Value     Value // "" when not known
	Previous  Value // "" when not known
	Available bool
	At        time.Time
	Cause     Cause

	kept time.Time // when the feed took it in, by the feed's clock
}

// Feed defaults.
const (
	// DefaultFeedBuffer is how many past events a feed keeps for clients
	// that resume.
	DefaultFeedBuffer = 1024
	// DefaultFeedMaxAge is how long a past event is kept for them.
	DefaultFeedMaxAge = 10 * time.Minute
	// DefaultSubscriptionBuffer is how many events a subscriber may fall
	// behind before it is dropped.
	DefaultSubscriptionBuffer = 64
)

// Feed turns what drivers and commands report of switches into a sequence
// of changes, keeps the last ones for clients that resume, and hands them
// to subscribers. Reporting never blocks: a subscriber that falls more than
// its buffer behind is dropped (its channel closed) rather than holding up
// a driver; it may resume from the kept events.
type Feed struct {
	// Epoch names this run of the hub: an event id from another run
	// (before a restart) is not one of this feed's.
	epoch string
	// Buffer and MaxAge bound the kept events.
	buffer int
	maxAge time.Duration
	now    func() time.Time

	mu      sync.Mutex
	seq     uint64
	ring    []Event // the kept events, oldest first
	last    map[string]feedState
	pending map[string]*[2]int // commands in flight per switch: [off, on]
	started bool
	subs    map[*Subscription]struct{}
}

type feedState struct {
	value     Value
	available bool
	known     bool // available was reported
	at        time.Time
}

// FeedOptions change a feed's bounds; zero values take the defaults.
type FeedOptions struct {
	Buffer int
	MaxAge time.Duration
	Now    func() time.Time
}

// NewFeed starts an empty feed. Until Started is called, value changes are
// caused by the hub's start-up.
func NewFeed(o FeedOptions) *Feed {
	if o.Buffer <= 0 {
		o.Buffer = DefaultFeedBuffer
	}
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultFeedMaxAge
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Feed{
		epoch:  strconv.FormatInt(time.Now().UnixNano(), 36),
		buffer: o.Buffer, maxAge: o.MaxAge, now: o.Now,
		last: map[string]feedState{}, pending: map[string]*[2]int{}, subs: map[*Subscription]struct{}{},
	}
}

// Seed sets what the feed takes a switch's value to be before any report:
// the value stored before the hub last stopped. A report of the same value
// is then no change.
func (f *Feed) Seed(id string, v Value) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.last[id]; !ok {
		f.last[id] = feedState{value: v}
	}
}

// Started marks the end of the hub's start-up: later changes are no longer
// caused by it.
func (f *Feed) Started() {
	f.mu.Lock()
	f.started = true
	f.mu.Unlock()
}

// Notify takes in a state a driver reports (drivers.Env.Notify). A value
// comes with when it was learnt; one learnt before the last one taken in
// is dropped. A state with a zero Updated passes on availability only. It
// never blocks.
func (f *Feed) Notify(id string, st State) {
	f.notify(id, st, "")
}

// commanding counts a command to value v in flight on each switch: a change
// to v reported meanwhile is the command's (CauseAPI).
func (f *Feed) commanding(sws []*Switch, v Value, delta int) {
	i := 0
	if v == On {
		i = 1
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range sws {
		p := f.pending[s.ID]
		if p == nil {
			p = &[2]int{}
			f.pending[s.ID] = p
		}
		p[i] += delta
		if p[0] <= 0 && p[1] <= 0 {
			delete(f.pending, s.ID)
		}
	}
}

// confirmed takes in a command's confirmation, in case the driver has not
// reported the change (yet): the change is then in the feed before the
// command is answered.
func (f *Feed) confirmed(id string, v Value, at time.Time) {
	f.notify(id, State{Value: v, Updated: at}, CauseAPI)
}

// notify takes in a state. A driver's state says whether the device is
// available now; a command's confirmation (cause CauseAPI) says nothing of
// it, as the device may have gone since it confirmed.
func (f *Feed) notify(id string, st State, cause Cause) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, seen := f.last[id]
	next := prev
	if cause == "" {
		next.available, next.known = st.Available, true
	} else if !prev.known {
		next.available, next.known = true, true
	}
	valueChanged := false
	if st.Value != "" && !st.Updated.IsZero() {
		// A value learnt before the one the feed has (a confirmation
		// taken in after the device's next report) is no news; the
		// availability that comes with it is.
		if !st.Updated.Before(prev.at) {
			next.at = st.Updated
			if st.Value != prev.value {
				next.value = st.Value
				valueChanged = true
			}
		}
	} else if prev.value == "" && st.Value != "" {
		// A driver's first state, restored from the store: not a change.
		next.value = st.Value
	}
	f.last[id] = next
	availabilityChanged := seen && prev.known && prev.available != next.available
	if !valueChanged && !availabilityChanged {
		return
	}
	if cause == "" {
		switch {
		case !valueChanged:
			cause = CauseAvailability
		case !f.started:
			cause = CauseStartup
		case f.pendingTo(id, next.value):
			cause = CauseAPI
		default:
			cause = CauseDevice
		}
	}
	at := st.Updated
	if at.IsZero() {
		at = f.now()
	}
	f.seq++
	e := Event{Seq: f.seq, SwitchID: id, Value: next.value, Previous: prev.value, Available: next.available, At: at, Cause: cause, kept: f.now()}
	if len(f.ring) >= 2*f.buffer {
		// Keep the newest buffer events, copying them down once per
		// buffer events rather than once per event.
		f.ring = append(f.ring[:0], f.ring[len(f.ring)-f.buffer:]...)
	}
	f.ring = append(f.ring, e)
	// One copy for every subscriber: channels of pointers keep an idle
	// subscription's buffer small (a thousand streams).
	if len(f.subs) > 0 {
		ev := e
		for s := range f.subs {
			s.offer(&ev)
		}
	}
}

func (f *Feed) pendingTo(id string, v Value) bool {
	p := f.pending[id]
	if p == nil {
		return false
	}
	if v == On {
		return p[1] > 0
	}
	return p[0] > 0
}

// EventID is the id of the event (or snapshot) at seq: the feed's epoch
// and the sequence number, so that an id from before a restart is told
// apart from one of this run.
func (f *Feed) EventID(seq uint64) string {
	return f.epoch + "-" + strconv.FormatUint(seq, 10)
}

// parseEventID returns the sequence number of an id of this feed.
func (f *Feed) parseEventID(id string) (uint64, bool) {
	epoch, seq, ok := strings.Cut(id, "-")
	if !ok || epoch != f.epoch {
		return 0, false
	}
	n, err := strconv.ParseUint(seq, 10, 64)
	return n, err == nil
}

// Subscription is one subscriber's share of the feed: the events of the
// switches it asked for, from when it subscribed.
type Subscription struct {
	f        *Feed
	switches map[string]bool
	c        chan *Event
	dropped  bool // under f.mu
	// Seq is the last event before the subscription began: a snapshot
	// taken after Subscribe returns reflects at least every event up to
	// it.
	Seq uint64
}

// Events delivers the subscription's events in order; the events are
// shared by every subscriber and must not be changed. It is closed when
// the subscriber fell too far behind (Dropped) or Close was called.
func (s *Subscription) Events() <-chan *Event { return s.c }

// Dropped reports whether the subscription was ended because its
// subscriber fell behind.
func (s *Subscription) Dropped() bool {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.dropped
}

// offer hands e to the subscriber, or drops it when it is full. Under f.mu.
func (s *Subscription) offer(e *Event) {
	if s.switches != nil && !s.switches[e.SwitchID] {
		return
	}
	select {
	case s.c <- e:
	default:
		s.dropped = true
		delete(s.f.subs, s)
		close(s.c)
	}
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if _, ok := s.f.subs[s]; ok {
		delete(s.f.subs, s)
		close(s.c)
	}
}

// Subscribe starts a subscription to the events of the switches ids (of
// every switch when ids is nil), with room for buffer events
// (DefaultSubscriptionBuffer when 0).
//
// With lastID, the id of the last event a client saw (Last-Event-ID), it
// also returns the kept events of those switches after it, and resumed
// true, so the client misses none; resumed is false when lastID is not
// one of this run's ids, or older than the kept events: the client needs a
// snapshot.
func (f *Feed) Subscribe(ids []string, buffer int, lastID string) (s *Subscription, missed []Event, resumed bool) {
	if buffer <= 0 {
		buffer = DefaultSubscriptionBuffer
	}
	s = &Subscription{f: f, c: make(chan *Event, buffer)}
	if ids != nil {
		s.switches = make(map[string]bool, len(ids))
		for _, id := range ids {
			s.switches[id] = true
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.trim()
	s.Seq = f.seq
	f.subs[s] = struct{}{}
	if lastID == "" {
		return s, nil, false
	}
	after, ok := f.parseEventID(lastID)
	first := f.seq + 1 // the oldest kept event
	if n := len(f.ring); n > 0 {
		first = f.ring[max(0, n-f.buffer)].Seq
	}
	if !ok || after > f.seq || after+1 < first {
		return s, nil, false
	}
	for _, e := range f.ring[max(0, len(f.ring)-f.buffer):] {
		if e.Seq > after && (s.switches == nil || s.switches[e.SwitchID]) {
			missed = append(missed, e)
		}
	}
	return s, missed, true
}

// trim forgets events older than maxAge. Under f.mu.
func (f *Feed) trim() {
	cut := f.now().Add(-f.maxAge)
	n := 0
	for n < len(f.ring) && f.ring[n].kept.Before(cut) {
		n++
	}
	if n > 0 {
		f.ring = append(f.ring[:0], f.ring[n:]...)
	}
}

// Seq is the sequence number of the last event.
func (f *Feed) Seq() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// Subscribers is how many subscriptions are open.
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}
