package bridge

import (
	"cmp"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
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
	// CauseReading: the device measured something new (power, energy);
	// neither value nor availability changed. At most one per switch per
	// FeedOptions.ReadingEvery.
	CauseReading Cause = "reading"
)

// DefaultReadingEvery is how often at most a switch's readings alone make
// an event (power_events_every): a plug reports its power every few
// seconds, and each would otherwise be an event to every stream and
// webhook.
const DefaultReadingEvery = 10 * time.Second

// Event is one change of one switch, as the feed hands it out.
type Event struct {
	// Seq orders the events of one run of the hub: it grows by one per
	// event, starting at 1. It is the hub's own: a client sees an event's
	// position in its View, never this.
	Seq       uint64
	SwitchID  string
	Value     Value // "" when not known
	Previous  Value // "" when not known
	Available bool
	At        time.Time
	Cause     Cause
	// By lists the installations whose commands were in flight to this
	// value when the change came (CauseAPI only): usually one. A stream or
	// webhook of one of them marks the event as its own; nothing else of
	// it leaves the hub, so an app never learns of another's commands.
	By []string
	// LastSeen is the device's State.LastSeen as the feed last heard it
	// (a command's confirmation counts); zero when never.
	LastSeen time.Time
	// Reading is the device's latest reading when the event was made; nil
	// for a device that has not reported one. Stale is whether it may no
	// longer hold (State.Stale).
	Reading *Reading
	Stale   bool

	kept time.Time // when the feed took it in, by the feed's clock
}

// Feed defaults.
const (
	// DefaultFeedBuffer is how many past events of each switch a feed
	// keeps for clients that resume: a switch that changes more often in
	// DefaultFeedMaxAge is a device in trouble, not a client's concern.
	DefaultFeedBuffer = 256
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
	// key is this run's secret for views' ids: an id from another run
	// (before a restart), or another view, is not one of a view's.
	key []byte
	// Buffer and MaxAge bound the kept events of each switch.
	buffer int
	maxAge time.Duration
	now    func() time.Time
	// readingEvery bounds the events of readings alone, per switch.
	readingEvery time.Duration

	mu     sync.Mutex
	seq    uint64
	counts map[string]uint64 // events per switch: views' positions
	// kept holds each switch's last events for clients that resume. Kept
	// per switch, not for the whole hub: whether a client's stream
	// resumes must not depend on how often switches it may not see
	// changed, which it would otherwise learn from a snapshot where it
	// expected its missed events.
	kept    map[string]*keptEvents
	last    map[string]feedState
	pending map[string]*[2]int // commands in flight per switch: [off, on]
	// pendingBy counts the commands in flight per switch and value by
	// installation (those whose context names one: WithSender).
	pendingBy map[pendingKey]map[string]int
	started   bool
	subs      map[*Subscription]struct{}
}

type feedState struct {
	value     Value
	available bool
	known     bool // available was reported
	at        time.Time
	lastSeen  time.Time
	// reading is the latest reading; readingAt when the device took it,
	// and readingSent when an event last carried one.
	reading     *Reading
	readingSent time.Time
}

// FeedOptions change a feed's bounds; zero values take the defaults.
type FeedOptions struct {
	// Buffer is how many past events of each switch are kept for
	// clients that resume, and MaxAge for how long.
	Buffer int
	MaxAge time.Duration
	Now    func() time.Time
	// ReadingEvery is how often at most readings alone make an event for
	// one switch; DefaultReadingEvery when 0.
	ReadingEvery time.Duration
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
	if o.ReadingEvery <= 0 {
		o.ReadingEvery = DefaultReadingEvery
	}
	// Not kept anywhere: ids are only ever taken back within one run of
	// the hub (the kept events are in memory), so a key that dies with
	// the run ends the ids of the run with it.
	key := make([]byte, 32)
	rand.Read(key)
	return &Feed{
		key:    key,
		buffer: o.Buffer, maxAge: o.MaxAge, now: o.Now, readingEvery: o.ReadingEvery,
		last: map[string]feedState{}, counts: map[string]uint64{}, kept: map[string]*keptEvents{}, pending: map[string]*[2]int{}, pendingBy: map[pendingKey]map[string]int{}, subs: map[*Subscription]struct{}{},
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
func (f *Feed) commanding(sws []*Switch, v Value, delta int, by string) {
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
		if by == "" {
			continue
		}
		k := pendingKey{s.ID, v}
		m := f.pendingBy[k]
		if m == nil {
			m = map[string]int{}
			f.pendingBy[k] = m
		}
		if m[by] += delta; m[by] <= 0 {
			delete(m, by)
		}
		if len(m) == 0 {
			delete(f.pendingBy, k)
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
	// A sign of the device is no change by itself: a plug's telemetry
	// every few minutes would flood the streams. Events carry the latest.
	if st.LastSeen.After(next.lastSeen) {
		next.lastSeen = st.LastSeen
	}
	if cause == CauseAPI && st.Updated.After(next.lastSeen) {
		next.lastSeen = st.Updated // the device confirmed the command then
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
	readingNews := false
	if st.Reading != nil && (prev.reading == nil || st.Reading.At.After(prev.reading.At)) {
		next.reading = st.Reading
		readingNews = prev.reading == nil || *st.Reading != *prev.reading
	}
	availabilityChanged := seen && prev.known && prev.available != next.available
	readingDue := readingNews && f.now().Sub(prev.readingSent) >= f.readingEvery
	if !valueChanged && !availabilityChanged && !readingDue {
		f.last[id] = next
		return
	}
	if next.reading != nil {
		next.readingSent = f.now()
	}
	f.last[id] = next
	if cause == "" {
		switch {
		case !valueChanged && !availabilityChanged:
			cause = CauseReading
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
	if cause == CauseReading {
		at = next.reading.At
	}
	if at.IsZero() {
		at = f.now()
	}
	f.seq++
	f.counts[id]++
	e := Event{Seq: f.seq, SwitchID: id, Value: next.value, Previous: prev.value, Available: next.available, At: at, Cause: cause, LastSeen: next.lastSeen, kept: f.now()}
	if cause == CauseAPI {
		for in := range f.pendingBy[pendingKey{id, next.value}] {
			e.By = append(e.By, in)
		}
		slices.Sort(e.By)
	}
	if next.reading != nil {
		e.Reading = next.reading
		e.Stale = State{Available: next.available, Reading: next.reading}.Stale(f.now())
	}
	k := f.kept[id]
	if k == nil {
		k = &keptEvents{}
		f.kept[id] = k
	}
	k.add(e, f.buffer, f.now().Add(-f.maxAge))
	// One copy for every subscriber: channels of pointers keep an idle
	// subscription's buffer small (a thousand streams).
	if len(f.subs) > 0 {
		ev := e
		for s := range f.subs {
			s.offer(&ev)
		}
	}
}

// pendingKey is a switch and a value a command is setting it to.
type pendingKey struct {
	id string
	v  Value
}

// OwnedBy reports whether installation's commands caused e.
func (e *Event) OwnedBy(installation string) bool {
	return installation != "" && slices.Contains(e.By, installation)
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
	// Pos is the view's position at Seq: the snapshot's. The events that
	// follow on Events are at Pos+1, Pos+2, …; the missed events
	// Subscribe returned end at Pos.
	Pos uint64
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
// (DefaultSubscriptionBuffer when 0): the hub's own subscribers' (webhooks,
// the streams' writer), through a view of no installation. lastID is as
// for View.Subscribe.
func (f *Feed) Subscribe(ids []string, buffer int, lastID string) (s *Subscription, missed []Event, resumed bool) {
	return f.View("", ids).Subscribe(buffer, lastID)
}

// A View is the feed as one installation's event streams see it: the
// events of its switches, numbered among themselves (each one more than
// the last), in ids no other view takes back. Ids of the whole feed's
// sequence would tell an installation, by their gaps, how many times
// switches it may not see changed, and when; a view's ids tell nothing of
// those, nor (their numbers start at an offset of the view's own) how
// many changes its switches had before its client first looked.
type View struct {
	f        *Feed
	switches map[string]bool // nil: every switch
	// prefix starts each id: a MAC of the installation and its switches
	// under the run's key, so that an id is taken back only by the view
	// that gave it out, in the run that gave it out.
	prefix string
	offset uint64
	// installation is whose view it is ("" for the hub's own).
	installation string
}

// Installation is the installation whose view v is.
func (v *View) Installation() string { return v.installation }

// View is the feed as installation sees it when granted the switches ids
// (every switch when ids is nil). A view is the same, ids and all, for
// the same installation and switches within one run of the hub; a grant
// with other switches has ids of its own, so a client resuming across
// that change is given a snapshot of what it now may see.
func (f *Feed) View(installation string, ids []string) *View {
	v := &View{f: f, installation: installation}
	// Each field length first: no two views' fields run together alike.
	var msg []byte
	field := func(s string) {
		msg = binary.AppendUvarint(msg, uint64(len(s)))
		msg = append(msg, s...)
	}
	field("switchbridge event ids")
	field(installation)
	if ids == nil {
		field("*") // every switch, unlike an empty grant
	} else {
		v.switches = make(map[string]bool, len(ids))
		sorted := slices.Clone(ids)
		slices.Sort(sorted)
		sorted = slices.Compact(sorted)
		msg = append(msg, '[')
		for _, id := range sorted {
			v.switches[id] = true
			field(id)
		}
	}
	m := hmac.New(sha256.New, f.key)
	m.Write(msg)
	sum := m.Sum(nil)
	v.prefix = hex.EncodeToString(sum[:8]) + "-"
	// Below 2^53, so that a client that reads the number as a
	// JavaScript number reads it whole.
	v.offset = binary.BigEndian.Uint64(sum[16:24]) >> 11
	return v
}

// EventID is the id of the event (or snapshot) at the view's position
// pos.
func (v *View) EventID(pos uint64) string {
	return string(v.AppendEventID(nil, pos))
}

// AppendEventID appends EventID(pos) to b: a stream's writer numbers each
// event for each stream without allocating.
func (v *View) AppendEventID(b []byte, pos uint64) []byte {
	b = append(b, v.prefix...)
	return strconv.AppendUint(b, v.offset+pos, 10)
}

// position returns the position of an id of this view.
func (v *View) position(id string) (uint64, bool) {
	num, ok := strings.CutPrefix(id, v.prefix)
	if !ok || num == "" || num[0] < '0' || num[0] > '9' {
		return 0, false
	}
	n, err := strconv.ParseUint(num, 10, 64)
	// Wrapping: an offset near the top and a position past it.
	return n - v.offset, err == nil
}

// pos is the view's position now: how many events of its switches the
// feed has had. Under f.mu.
func (v *View) pos() uint64 {
	if v.switches == nil {
		return v.f.seq
	}
	var n uint64
	for id := range v.switches {
		n += v.f.counts[id]
	}
	return n
}

// Subscribe starts a subscription to the view's events, with room for
// buffer events (DefaultSubscriptionBuffer when 0).
//
// With lastID, the id of the last event a client saw (Last-Event-ID), it
// also returns the kept events of the view after it, and resumed true, so
// the client misses none; resumed is false when lastID is not an id of
// this view in this run, or older than the kept events: the client needs
// a snapshot.
func (v *View) Subscribe(buffer int, lastID string) (s *Subscription, missed []Event, resumed bool) {
	f := v.f
	if buffer <= 0 {
		buffer = DefaultSubscriptionBuffer
	}
	s = &Subscription{f: f, switches: v.switches, c: make(chan *Event, buffer)}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.Seq, s.Pos = f.seq, v.pos()
	f.subs[s] = struct{}{}
	if lastID == "" {
		return s, nil, false
	}
	after, ok := v.position(lastID)
	if !ok || after > s.Pos {
		return s, nil, false
	}
	want := s.Pos - after
	if want == 0 {
		return s, nil, true
	}
	// The events after it are the view's last want: the last want of
	// the events its switches keep, unless a switch forgot one of them
	// (too many of its own changes since, or too old), and the client
	// has then missed some for good.
	cut := f.now().Add(-f.maxAge)
	var kept []Event
	var forgot uint64
	take := func(k *keptEvents) {
		k.trim(cut)
		kept = append(kept, k.events...)
		forgot = max(forgot, k.forgot)
	}
	if v.switches == nil {
		for _, k := range f.kept {
			take(k)
		}
	}
	for id := range v.switches {
		if k := f.kept[id]; k != nil {
			take(k)
		}
	}
	if uint64(len(kept)) < want {
		return s, nil, false
	}
	slices.SortFunc(kept, func(a, b Event) int { return cmp.Compare(a.Seq, b.Seq) })
	missed = kept[uint64(len(kept))-want:]
	if forgot > missed[0].Seq {
		return s, nil, false
	}
	return s, missed, true
}

// keptEvents are one switch's last events, oldest first: at most the
// feed's buffer, none older than its maxAge.
type keptEvents struct {
	events []Event
	// forgot is the Seq of the newest event no longer kept; 0 while
	// none was forgotten.
	forgot uint64
}

// add keeps e, forgetting the events kept before cut and the oldest beyond
// buffer. Under f.mu.
func (k *keptEvents) add(e Event, buffer int, cut time.Time) {
	k.trim(cut)
	if len(k.events) >= buffer {
		k.forget(len(k.events) - buffer + 1)
	}
	k.events = append(k.events, e)
}

// trim forgets the events kept before cut. Under f.mu.
func (k *keptEvents) trim(cut time.Time) {
	n := 0
	for n < len(k.events) && k.events[n].kept.Before(cut) {
		n++
	}
	k.forget(n)
}

// forget drops the oldest n events. The array under them is reused until
// append outgrows it, so dropping one event per change copies nothing.
func (k *keptEvents) forget(n int) {
	if n <= 0 {
		return
	}
	k.forgot = k.events[n-1].Seq
	clear(k.events[:n]) // what the events point to (readings) may go
	k.events = k.events[n:]
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
