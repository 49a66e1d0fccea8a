package bridge

import (
	"fmt"
	"sync"
	"time"
)

// ChangeLimit caps how often a switch's device may be commanded: a token
// bucket that holds Burst commands and gains one back every Per. The zero
// ChangeLimit sets no cap.
type ChangeLimit struct {
	Burst int
	Per   time.Duration
}

// On reports whether l caps anything.
func (l ChangeLimit) On() bool { return l.Burst > 0 && l.Per > 0 }

func (l ChangeLimit) String() string {
	if !l.On() {
		return "no cap"
	}
	if l.Burst == 1 {
		return fmt.Sprintf("one command per %s", l.Per)
	}
	return fmt.Sprintf("%d commands at once, then one per %s", l.Burst, l.Per)
}

// ChangeLimiter is the optional interface of a Device whose driver caps how
// often it may be commanded unless the config says otherwise: a mechanical
// relay wears with every switch, and a client must not be able to chatter
// it.
type ChangeLimiter interface {
	DefaultMaxChanges() ChangeLimit
}

// Limit is the cap on commands to s: its configured MaxChanges, else its
// device's default, else none.
func (s *Switch) Limit() ChangeLimit {
	if s.MaxChanges != nil {
		return *s.MaxChanges
	}
	if l, ok := s.Device.(ChangeLimiter); ok {
		return l.DefaultMaxChanges()
	}
	return ChangeLimit{}
}

// changeBuckets holds the change caps' buckets, one per switch id so that
// a reload that keeps a switch keeps what it used. Each bucket is the
// generic cell rate algorithm's one time: when it would be full again
// (its theoretical arrival time), which needs no timer and no floats.
type changeBuckets struct {
	mu  sync.Mutex
	tat map[string]time.Time
}

// take counts one command on every switch of sws that has a cap, all or
// none: if any switch's bucket is empty, nothing is counted and it returns
// a failure for each such switch and how long until all of them have room
// again.
func (b *changeBuckets) take(sws []*Switch, now time.Time) ([]Failure, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.tat == nil {
		b.tat = map[string]time.Time{}
	}
	next := make(map[string]time.Time, len(sws))
	var refused []Failure
	var wait time.Duration
	for _, s := range sws {
		l := s.Limit()
		if !l.On() {
			continue
		}
		tat, seen := next[s.ID] // a switch listed twice counts twice
		if !seen {
			tat = b.tat[s.ID]
		}
		if tat.Before(now) {
			tat = now
		}
		tolerance := time.Duration(l.Burst-1) * l.Per
		if ahead := tat.Sub(now); ahead > tolerance {
			w := ahead - tolerance
			wait = max(wait, w)
			refused = append(refused, Failure{
				SwitchID: s.ID, Name: s.Name, Reason: FailRateLimited,
				Message: fmt.Sprintf("switched too often: the cap is %s; try again in %s", l, roundUp(w)),
			})
			continue
		}
		next[s.ID] = tat.Add(l.Per)
	}
	if len(refused) > 0 {
		return refused, wait
	}
	for id, t := range next {
		b.tat[id] = t
	}
	return nil, 0
}

// keep forgets the buckets of switches that are no longer configured, so
// the map never outgrows the switch table.
func (b *changeBuckets) keep(sws map[string]*Switch) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for id := range b.tat {
		if _, ok := sws[id]; !ok {
			delete(b.tat, id)
		}
	}
}

// roundUp rounds d up to a whole second, at least one: what a client is
// told to wait.
func roundUp(d time.Duration) time.Duration {
	if d <= time.Second {
		return time.Second
	}
	return (d + time.Second - 1).Truncate(time.Second)
}

// tooOften is the ETOOMANY a command gets when switches' caps are used up.
func tooOften(cmd Command, refused []Failure, wait time.Duration) *Error {
	return &Error{
		Code:       ETOOMANY,
		Message:    fmt.Sprintf("command %q would switch too often: %s; nothing was switched", cmd, failureList(refused)),
		Failures:   refused,
		RetryAfter: roundUp(wait),
	}
}
