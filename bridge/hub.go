package bridge

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// DefaultCommandTimeout bounds how long one switch may take to confirm a
// command when the config does not say otherwise.
const DefaultCommandTimeout = 5 * time.Second

// SwitchState pairs a switch with what is known of it.
type SwitchState struct {
	Switch *Switch
	State  State
}

// CommandObserver is told the outcome of every switch of every command:
// "ok" or one of the Fail* reasons, with how long the switch took.
type CommandObserver func(sw *Switch, cmd Command, outcome string, d time.Duration)

// Hub runs commands across switches and answers state queries from the
// drivers' caches. The switch table can be replaced while it runs (config
// reload); a command in flight keeps the table it started with.
type Hub struct {
	// Timeout bounds each switch of a command; DefaultCommandTimeout when 0.
	Timeout time.Duration
	// Observe, when set, is called once per switch per command.
	Observe CommandObserver
	// Sync, when set, is called after every command before it returns,
	// with the value the command set and, for each switch that confirmed
	// it, when it did: so that what the command changed is stored by the
	// time the client hears of it, and a report the device sent after its
	// confirmation is not overwritten by it. (A driver's own report of the
	// change may come later, from another goroutine; the hub does not wait
	// for it.) An error means the new values could not be stored.
	Sync func(v Value, confirmedAt map[string]time.Time) error

	// cmdMu is held shared by every command and exclusively by Exclusive,
	// so a reload never closes a device under a command.
	cmdMu sync.RWMutex

	mu        sync.RWMutex
	switches  map[string]*Switch
	locations map[int64]*Location
	locOrder  []int64
}

// NewHub builds a hub from the configured locations and switches. Every
// switch must belong to a known location and ids must be unique.
func NewHub(locations []Location, switches []*Switch) (*Hub, error) {
	h := &Hub{}
	if err := h.Replace(locations, switches); err != nil {
		return nil, err
	}
	return h, nil
}

// Replace swaps the hub's locations and switches for new ones, after the same
// checks NewHub makes. On error the hub keeps its old table.
func (h *Hub) Replace(locations []Location, switches []*Switch) error {
	locs := make(map[int64]*Location, len(locations))
	var order []int64
	for i := range locations {
		l := locations[i]
		if _, dup := locs[l.ID]; dup {
			return Errorf(EINVALID, "location %d is defined twice", l.ID)
		}
		locs[l.ID] = &l
		order = append(order, l.ID)
	}
	sws := make(map[string]*Switch, len(switches))
	for _, s := range switches {
		if _, dup := sws[s.ID]; dup {
			return Errorf(EINVALID, "switch %q is defined twice", s.ID)
		}
		if _, ok := locs[s.LocationID]; !ok {
			return Errorf(EINVALID, "switch %q is in unknown location %d", s.ID, s.LocationID)
		}
		if s.Device == nil {
			return Errorf(EINVALID, "switch %q has no device", s.ID)
		}
		sws[s.ID] = s
	}
	h.mu.Lock()
	h.switches, h.locations, h.locOrder = sws, locs, order
	h.mu.Unlock()
	return nil
}

// Exclusive runs fn while no command runs: commands in flight finish first,
// and new ones wait until fn returns. A config reload swaps drivers in it.
func (h *Hub) Exclusive(fn func() error) error {
	h.cmdMu.Lock()
	defer h.cmdMu.Unlock()
	return fn()
}

// Switch returns the switch with id.
func (h *Hub) Switch(id string) (*Switch, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s, ok := h.switches[id]
	return s, ok
}

// Location returns the location with id.
func (h *Hub) Location(id int64) (*Location, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	l, ok := h.locations[id]
	return l, ok
}

// Locations returns every location in config order.
func (h *Hub) Locations() []*Location {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Location, 0, len(h.locOrder))
	for _, id := range h.locOrder {
		out = append(out, h.locations[id])
	}
	return out
}

// Switches returns every switch, sorted by id.
func (h *Hub) Switches() []*Switch {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Switch, 0, len(h.switches))
	for _, s := range h.switches {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// lookup resolves ids to switches, in the order given. A switch that is no
// longer configured (removed from the config after an installation selected
// it) is ENOTFOUND naming it.
func (h *Hub) lookup(ids []string) ([]*Switch, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Switch, 0, len(ids))
	var missing []string
	for _, id := range ids {
		s, ok := h.switches[id]
		if !ok {
			missing = append(missing, id)
			continue
		}
		out = append(out, s)
	}
	if len(missing) > 0 {
		return nil, Errorf(ENOTFOUND, "switches no longer configured on this hub: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// States reports the cached state of each switch in ids, in that order. It
// never waits on a device.
func (h *Hub) States(ids []string) ([]SwitchState, error) {
	sws, err := h.lookup(ids)
	if err != nil {
		return nil, err
	}
	out := make([]SwitchState, len(sws))
	for i, s := range sws {
		out[i] = SwitchState{Switch: s, State: s.Device.State()}
	}
	return out, nil
}

// Command runs cmd on every switch in ids.
//
// Before touching any device it checks that every switch supports cmd; if one
// does not, it returns ENOTIMPLEMENTED naming those switches and nothing was
// actuated. Then it fans out to all switches at once, each under its own
// deadline, so the call takes as long as the slowest switch. If any switch
// fails or times out it returns EDEVICE naming each failure; the others have
// run the command. A client that goes away does not abort the command half
// way: each switch runs to its own deadline.
func (h *Hub) Command(ctx context.Context, ids []string, cmd Command) error {
	if _, err := ParseCommand(string(cmd)); err != nil {
		return err
	}
	h.cmdMu.RLock()
	defer h.cmdMu.RUnlock()
	sws, err := h.lookup(ids)
	if err != nil {
		return err
	}
	var unsupported []Failure
	for _, s := range sws {
		if !Supports(s.Device, cmd) {
			unsupported = append(unsupported, Failure{
				SwitchID: s.ID, Name: s.Name, Reason: FailUnsupported,
				Message: fmt.Sprintf("driver %s does not support %q on this switch", s.Driver, cmd),
			})
			h.observe(s, cmd, FailUnsupported, 0)
		}
	}
	if len(unsupported) > 0 {
		return &Error{
			Code:     ENOTIMPLEMENTED,
			Message:  fmt.Sprintf("command %q is not supported by every selected switch: %s", cmd, names(unsupported)),
			Failures: unsupported,
		}
	}

	timeout := h.Timeout
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	base := context.WithoutCancel(ctx)
	results := make([]*Failure, len(sws))
	confirmedAt := make([]time.Time, len(sws))
	var wg sync.WaitGroup
	for i, s := range sws {
		run := func() {
			sctx, cancel := context.WithTimeout(base, timeout)
			defer cancel()
			start := time.Now()
			err := s.Device.(Commander).Do(sctx, cmd)
			if err == nil && sctx.Err() != nil {
				// A driver that returns nil past its deadline did not confirm in time.
				err = sctx.Err()
			}
			d := time.Since(start)
			if err == nil {
				confirmedAt[i] = time.Now()
				h.observe(s, cmd, "ok", d)
				return
			}
			f := classify(s, err)
			h.observe(s, cmd, f.Reason, d)
			results[i] = &f
		}
		if len(sws) == 1 {
			run() // nothing to run beside it: spare the goroutine hand-off
			break
		}
		wg.Go(run)
	}
	wg.Wait()
	if h.Sync != nil {
		confirmed := map[string]time.Time{}
		for i, s := range sws {
			if results[i] == nil {
				confirmed[s.ID] = confirmedAt[i]
			}
		}
		if len(confirmed) > 0 {
			if err := h.Sync(cmd.Value(), confirmed); err != nil {
				return Errorf(EUNAVAILABLE, "the switches were commanded, but the hub could not store their new state (%v); the command may be repeated", err)
			}
		}
	}

	var failed []Failure
	allUnsupported := true
	for _, f := range results {
		if f != nil {
			failed = append(failed, *f)
			allUnsupported = allUnsupported && f.Reason == FailUnsupported
		}
	}
	if len(failed) == 0 {
		return nil
	}
	code := EDEVICE
	if allUnsupported {
		code = ENOTIMPLEMENTED
	}
	return &Error{
		Code:     code,
		Message:  fmt.Sprintf("command %q failed on %d of %d switches: %s", cmd, len(failed), len(sws), names(failed)),
		Failures: failed,
	}
}

func (h *Hub) observe(s *Switch, cmd Command, outcome string, d time.Duration) {
	if h.Observe != nil {
		h.Observe(s, cmd, outcome, d)
	}
}

func classify(s *Switch, err error) Failure {
	f := Failure{SwitchID: s.ID, Name: s.Name, Message: err.Error()}
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		f.Reason = FailUnsupported
	case errors.Is(err, context.DeadlineExceeded):
		f.Reason = FailTimeout
		f.Message = "no confirmation before the deadline"
	case errors.Is(err, ErrUnavailable):
		f.Reason = FailUnavailable
	default:
		f.Reason = FailError
	}
	return f
}

func names(fs []Failure) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%s (%s)", f.SwitchID, f.Reason)
	}
	return strings.Join(parts, ", ")
}
