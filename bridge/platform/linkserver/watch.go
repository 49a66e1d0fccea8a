package linkserver

// The platform's long polls: waiting for a hub's changes, waking the polls
// when the change log grows (whoever wrote it), heartbeats while a poll
// waits (link.HeartbeatInterval), and at most MaxPollsPerHub polls per
// hub.

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/link"
)

// MaxPollsPerHub is how many long polls one hub's credentials may hold
// open at once: a hub holds one, and one more covers a poll the platform
// has not yet seen end (a dead connection). A newer poll ends the oldest,
// which is answered at once with no changes, as a poll that timed out.
const MaxPollsPerHub = 2

// Poll is the long poll of GET /api/hub/v1/changes, for callers in
// process: it returns the changes for hub after cursor, waiting up to
// PollTimeout for some. It returns errHubChanged when the hub was removed
// or given a new secret while it waited.
func (p *Platform) Poll(ctx context.Context, hubID string, cursor int64) (*bridge.ChangeBatch, error) {
	b, err := p.store.Changes(ctx, hubID, cursor)
	if err != nil || !b.Empty() {
		return b, err
	}
	hub, err := p.store.Hub(ctx, hubID)
	if err != nil {
		return nil, err
	}
	locs, err := p.store.HubLocationIDs(ctx, hubID)
	if err != nil {
		return nil, err
	}
	mine := make(map[int64]bool, len(locs))
	for _, l := range locs {
		mine[l] = true
	}
	ctx, cancel := context.WithTimeout(ctx, p.PollTimeout)
	defer cancel()
	at := b.Cursor
	for {
		seq, changed, ok := p.watch.wait(ctx, at)
		if !ok {
			// Timed out: nothing for this hub, unless a change came in
			// just now. The answer carries the tag of its cursor.
			if ctx.Err() == context.DeadlineExceeded {
				return p.store.Changes(context.WithoutCancel(ctx), hubID, at)
			}
			return &bridge.ChangeBatch{Cursor: b.Cursor, CursorTag: b.CursorTag}, nil
		}
		// Location 0 is the registry: a hub removed or given a new
		// secret. This poll ends at once if it was its hub.
		if changed == nil || slices.Contains(changed, 0) {
			now, err := p.store.Hub(context.WithoutCancel(ctx), hubID)
			if bridge.ErrorCode(err) == bridge.ENOTFOUND || (err == nil && string(now.SecretHash) != string(hub.SecretHash)) {
				return nil, errHubChanged
			}
		}
		if changed != nil && !intersects(changed, mine) {
			at = seq // changes, none of them this hub's
			continue
		}
		nb, err := p.store.Changes(context.WithoutCancel(ctx), hubID, at)
		if err != nil {
			return nil, err
		}
		if !nb.Empty() {
			return nb, nil
		}
		at = nb.Cursor
	}
}

// errHubChanged ends a long poll whose hub was removed or given a new
// secret while it waited: its credentials are checked again.
var errHubChanged = errors.New("the hub was removed or given a new secret")

func intersects(a []int64, b map[int64]bool) bool {
	for _, x := range a {
		if b[x] {
			return true
		}
	}
	return false
}

// longPoll runs Poll for a hub's request. While it waits it sends the hub
// 102 Processing every link.HeartbeatInterval when the hub asked for it, so a
// dead connection shows within seconds at the hub. A newer poll of the
// same hub past MaxPollsPerHub ends it with no changes; Shutdown ends it
// with 503 (stop true: the answer is written).
func (p *Platform) longPoll(w http.ResponseWriter, r *http.Request, hubID string, cursor int64, tag string) (b *bridge.ChangeBatch, stop bool, err error) {
	ended, release := p.sessions.poll(hubID)
	defer release()
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	type result struct {
		b   *bridge.ChangeBatch
		err error
	}
	res := make(chan result, 1)
	go func() {
		b, err := p.Poll(ctx, hubID, cursor)
		res <- result{b, err}
	}()
	var beat <-chan time.Time
	if r.Header.Get(link.HeartbeatHeader) != "" {
		// The first at once: the hub measures its round trip by it, and
		// hears at once that its poll is accepted.
		w.WriteHeader(http.StatusProcessing)
		t := time.NewTicker(link.HeartbeatInterval)
		defer t.Stop()
		beat = t.C
	}
	for {
		select {
		case x := <-res:
			return x.b, false, x.err
		case <-beat:
			w.WriteHeader(http.StatusProcessing)
		case <-ended:
			cancel()
			<-res
			return &bridge.ChangeBatch{Cursor: cursor, CursorTag: tag}, false, nil
		case <-p.closing:
			cancel()
			<-res
			answerShuttingDown(w)
			return nil, true, nil
		}
	}
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

// watcher wakes long polls when the change log grows, whoever wrote it: it
// reads the newest sequence every WakeInterval while any poll waits, and
// at once when the store tells of a change (changeNotifier), and stops
// when none waits.
type watcher struct {
	p       *Platform
	mu      sync.Mutex
	seq     int64         // the newest sequence seen
	ch      chan struct{} // closed when seq moves
	waiters int
	running bool
	// spans are the latest advances of seq with the locations they
	// touched, so a poll can tell whether they are its hub's without a
	// query of its own.
	spans []span
}

type span struct {
	from, to int64
	locs     []int64
}

const maxSpans = 64

// wait blocks until the newest sequence passes after or ctx ends (ok
// false). It returns that sequence and the locations changed after after
// up to it, nil when unknown.
func (w *watcher) wait(ctx context.Context, after int64) (seq int64, changed []int64, ok bool) {
	w.mu.Lock()
	w.waiters++
	if !w.running {
		w.running = true
		go w.run()
	}
	for w.seq <= after {
		ch := w.ch
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			w.mu.Lock()
			w.waiters--
			w.mu.Unlock()
			return 0, nil, false
		case <-ch:
		}
		w.mu.Lock()
	}
	w.waiters--
	seq = w.seq
	changed = w.changedLocked(after, seq)
	w.mu.Unlock()
	return seq, changed, true
}

// changedLocked unions the spans covering (after, to]; nil when they do
// not reach back to after.
func (w *watcher) changedLocked(after, to int64) []int64 {
	var out []int64
	at := to
	for i := len(w.spans) - 1; i >= 0 && at > after; i-- {
		s := w.spans[i]
		if s.to != at {
			return nil
		}
		out = append(out, s.locs...)
		at = s.from
	}
	if at > after {
		return nil
	}
	return out
}

// changeNotifier is a store that tells of changes to its change log made
// by any process (PostgreSQL's NOTIFY): a channel closed at the next one,
// nil when it cannot tell.
type changeNotifier interface {
	ChangeNotice() <-chan struct{}
}

func (w *watcher) run() {
	t := time.NewTicker(w.p.WakeInterval)
	defer t.Stop()
	ctx := context.Background()
	notifier, _ := w.p.store.(changeNotifier)
	next := func() <-chan struct{} {
		if notifier == nil {
			return nil
		}
		return notifier.ChangeNotice()
	}
	// The channel is taken before the sequence is read, so a change that
	// commits after the read closes the channel waited on next.
	notice := next()
	for {
		select {
		case <-t.C:
		case <-notice:
			notice = next()
		}
		w.mu.Lock()
		if w.waiters == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		prev := w.seq
		w.mu.Unlock()
		seq, err := w.p.store.ChangeSeq(ctx)
		if err != nil {
			w.p.logger.Warn("hub link: reading the change log", "err", err)
			continue
		}
		if seq == prev {
			continue
		}
		var locs []int64
		if seq > prev && prev > 0 {
			locs, err = w.p.store.ChangedLocations(ctx, prev, seq)
		}
		w.mu.Lock()
		if err == nil && prev > 0 && seq > prev {
			w.spans = append(w.spans, span{from: prev, to: seq, locs: locs})
			if len(w.spans) > maxSpans {
				w.spans = w.spans[len(w.spans)-maxSpans:]
			}
		} else {
			w.spans = nil
		}
		w.seq = seq
		close(w.ch)
		w.ch = make(chan struct{})
		w.mu.Unlock()
	}
}
