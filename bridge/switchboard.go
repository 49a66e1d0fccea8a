package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// OutcomeOK or one of the Fail* reasons, with how long the switch took.
type CommandObserver func(sw *Switch, cmd Command, outcome string, d time.Duration)

// Switchboard runs commands across switches and answers state queries from the
// drivers' caches. The switch table can be replaced while it runs (config
// reload); a command in flight keeps the table it started with.
// SwitchboardOptions is what a Switchboard is built with; every field may
// be left zero.
type SwitchboardOptions struct {
	// Timeout bounds each switch of a command; DefaultCommandTimeout when 0.
	Timeout time.Duration
	// Observe, when set, is called once per switch per command.
	Observe CommandObserver
	// Persist, when set, stores what a command leaves: the values it
	// confirmed and its audit records, in one write. It is called before
	// the command returns, with the value the command set and, for each
	// switch that confirmed it, when it did: so that what the command
	// changed is stored by the time the client hears of it, and a report
	// the device sent after its confirmation is not overwritten by it. (A
	// driver's own report of the change may come later, from another
	// goroutine; the hub does not wait for it.)
	//
	// A command with a sender (SenderOf: the installation API's) brings
	// one audit record per switch, whatever its outcome, so Persist is
	// called for every such command that reaches the switchboard: one
	// where nothing confirmed, one refused before any device was touched
	// (a switch lacking the command, a change cap, a switch no longer
	// configured) and, through Refused, one its caller refused. A command
	// without a sender brings none, and calls Persist only when a switch
	// confirmed.
	//
	// An error means the new values and the records could not be stored;
	// the switchboard reports it to the client only for a command that
	// switched something (its values are at stake), else the command's
	// own answer stands and Persist is to log what it lost.
	Persist func(v Value, confirmedAt map[string]time.Time, audit []AuditRecord) error
	// Now is the clock of the switches' change caps and of the audit
	// records; time.Now when nil.
	Now func() time.Time
	// Feed, when set, hears of every command: a change reported while a
	// command to that value is in flight is the command's, and a
	// confirmed command is in the feed before the command returns.
	Feed *Feed
}

type Switchboard struct {
	opts SwitchboardOptions

	// cmdMu is held shared by every command and exclusively by Exclusive,
	// so a reload never closes a device under a command.
	cmdMu sync.RWMutex

	changes changeBuckets

	mu        sync.RWMutex
	switches  map[string]*Switch
	locations map[int64]*Location
	locOrder  []int64
}

// NewSwitchboard builds a switchboard from the configured locations and switches. Every
// switch must belong to a known location and ids must be unique.
func NewSwitchboard(locations []Location, switches []*Switch, opts SwitchboardOptions) (*Switchboard, error) {
	h := &Switchboard{opts: opts}
	if err := h.Replace(locations, switches); err != nil {
		return nil, err
	}
	return h, nil
}

// Replace swaps the switchboard's locations and switches for new ones, after the same
// checks NewSwitchboard makes. On error the hub keeps its old table.
func (h *Switchboard) Replace(locations []Location, switches []*Switch) error {
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
	h.changes.keep(sws)
	return nil
}

// Exclusive runs fn while no command runs: commands in flight finish first,
// and new ones wait until fn returns. A config reload swaps drivers in it.
func (h *Switchboard) Exclusive(fn func() error) error {
	h.cmdMu.Lock()
	defer h.cmdMu.Unlock()
	return fn()
}

// Switch returns the switch with id.
func (h *Switchboard) Switch(id string) (*Switch, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	s, ok := h.switches[id]
	return s, ok
}

// Location returns the location with id.
func (h *Switchboard) Location(id int64) (*Location, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	l, ok := h.locations[id]
	return l, ok
}

// Locations returns every location in config order.
func (h *Switchboard) Locations() []*Location {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Location, 0, len(h.locOrder))
	for _, id := range h.locOrder {
		out = append(out, h.locations[id])
	}
	return out
}

// Switches returns every switch, sorted by id.
func (h *Switchboard) Switches() []*Switch {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Switch, 0, len(h.switches))
	for _, s := range h.switches {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// anyLocation is the location argument of lookup that does not restrict
// it. Configured location ids are positive.
const anyLocation = 0

// lookup resolves ids to switches, in the order given. A switch that is no
// longer configured (removed from the config after an installation selected
// it) is ENOTFOUND naming it; so is, when loc is not anyLocation, a switch
// that is no longer in location loc (a reload moved it, or removed the
// location): an installation's grant covers its location's switches only.
// The check and the resolution happen under one lock, so a reload cannot
// slip between them.
func (h *Switchboard) lookup(loc int64, ids []string) ([]*Switch, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]*Switch, 0, len(ids))
	var missing []string
	for _, id := range ids {
		s, ok := h.switches[id]
		if !ok || (loc != anyLocation && s.LocationID != loc) {
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
func (h *Switchboard) States(ids []string) ([]SwitchState, error) {
	return h.StatesIn(anyLocation, ids)
}

// StatesIn is States for switches that must be in location loc: one that
// is not (any more) is ENOTFOUND naming it, as a removed switch is.
func (h *Switchboard) StatesIn(loc int64, ids []string) ([]SwitchState, error) {
	sws, err := h.lookup(loc, ids)
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
// actuated. Then it counts the command against each switch's change cap
// (Switch.Limit); if one is used up, it returns ETOOMANY naming those
// switches, nothing was actuated and no cap was used. Then it fans out to all switches at once, each under its own
// deadline, so the call takes as long as the slowest switch. If any switch
// fails or times out it returns EDEVICE naming each failure; the others have
// run the command. A client that goes away does not abort the command half
// way: each switch runs to its own deadline. Whatever the outcome, a
// command with a sender leaves one audit record per switch (Persist).
func (h *Switchboard) Command(ctx context.Context, ids []string, cmd Command) error {
	return h.CommandIn(ctx, anyLocation, ids, cmd)
}

// CommandIn is Command for switches that must be in location loc: if one
// is not (any more), it returns ENOTFOUND naming it and actuates nothing,
// as for a removed switch.
func (h *Switchboard) CommandIn(ctx context.Context, loc int64, ids []string, cmd Command) error {
	if _, err := ParseCommand(string(cmd)); err != nil {
		return err
	}
	h.cmdMu.RLock()
	defer h.cmdMu.RUnlock()
	at := h.now()
	sws, err := h.lookup(loc, ids)
	if err != nil {
		h.refused(ctx, at, ids, cmd, err)
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
		err := &Error{
			Code:     ENOTIMPLEMENTED,
			Message:  fmt.Sprintf("command %q is not supported by every selected switch: %s", cmd, failureList(unsupported)),
			Failures: unsupported,
		}
		h.refused(ctx, at, ids, cmd, err)
		return err
	}
	// Every command sent counts, even one to a switch that seems to be in
	// that state already: the hub's idea of a plug's state can be stale,
	// and a client repeating a command floods the device all the same.
	if refused, wait := h.changes.take(sws, at); len(refused) > 0 {
		for _, s := range sws {
			if slices.ContainsFunc(refused, func(f Failure) bool { return f.SwitchID == s.ID }) {
				h.observe(s, cmd, FailRateLimited, 0)
			}
		}
		err := tooOften(cmd, refused, wait)
		h.refused(ctx, at, ids, cmd, err)
		return err
	}

	sender := SenderOf(ctx)
	if h.opts.Feed != nil {
		h.opts.Feed.commanding(sws, cmd.Value(), 1, sender.Installation)
		defer h.opts.Feed.commanding(sws, cmd.Value(), -1, sender.Installation)
	}

	timeout := h.opts.Timeout
	if timeout <= 0 {
		timeout = DefaultCommandTimeout
	}
	// One deadline serves every switch: they all start now with the same
	// timeout, and a context (with its timer) per switch was measurable
	// at 100 switches. Each switch's duration counts from the same start,
	// so one that timed out is recorded as having waited the whole
	// deadline, however late its goroutine was scheduled.
	start := time.Now()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	defer cancel()
	results := make([]*Failure, len(sws))
	confirmedAt := make([]time.Time, len(sws))
	took := make([]time.Duration, len(sws))
	var wg sync.WaitGroup
	for i, s := range sws {
		run := func() {
			err := s.Device.(Commander).Do(sctx, cmd)
			if err == nil && sctx.Err() != nil {
				// A driver that returns nil past its deadline did not confirm in time.
				err = sctx.Err()
			}
			d := time.Since(start)
			took[i] = d
			if err == nil {
				confirmedAt[i] = time.Now()
				h.observe(s, cmd, OutcomeOK, d)
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
	if h.opts.Feed != nil {
		for i, s := range sws {
			if results[i] == nil {
				h.opts.Feed.confirmed(s.ID, cmd.Value(), confirmedAt[i])
			}
		}
	}
	if h.opts.Persist != nil {
		confirmed := map[string]time.Time{}
		var recs []AuditRecord
		if sender.Installation != "" {
			recs = make([]AuditRecord, len(sws))
		}
		for i, s := range sws {
			outcome := OutcomeOK
			if results[i] == nil {
				confirmed[s.ID] = confirmedAt[i]
			} else {
				outcome = results[i].Reason
			}
			if recs != nil {
				recs[i] = sender.record(at, s.ID, cmd, outcome, took[i])
			}
		}
		if len(confirmed) > 0 || len(recs) > 0 {
			if err := h.opts.Persist(cmd.Value(), confirmed, recs); err != nil && len(confirmed) > 0 {
				// The devices did switch: say so (NotStored), and name the
				// ones that failed besides.
				e := Errorf(EUNAVAILABLE, "the switches were commanded, but the hub could not store their new state (%s); the command may be repeated",
					strings.Join(strings.Fields(err.Error()), " ")) // one line: a client shows it, a log line carries it
				for i, s := range sws {
					if results[i] == nil {
						e.NotStored = append(e.NotStored, s.ID)
					} else {
						e.Failures = append(e.Failures, *results[i])
					}
				}
				return e
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
		Message:  fmt.Sprintf("command %q failed on %d of %d switches: %s", cmd, len(failed), len(sws), failureList(failed)),
		Failures: failed,
	}
}

// Refused records a command its caller refused before handing it to the
// switchboard (the installation API refuses one to a see-only switch) as
// a refusal of the switchboard's own is recorded: one audit record per
// switch of ids, the switches err's failures name with their reason, the
// others OutcomeNotSent; in one call of Persist. Nothing is sent to any
// device. A command without a sender is not recorded.
func (h *Switchboard) Refused(ctx context.Context, ids []string, cmd Command, err error) {
	h.refused(ctx, h.now(), ids, cmd, err)
}

func (h *Switchboard) refused(ctx context.Context, at time.Time, ids []string, cmd Command, err error) {
	sender := SenderOf(ctx)
	if h.opts.Persist == nil || sender.Installation == "" {
		return
	}
	var named map[string]string
	var e *Error
	if errors.As(err, &e) && len(e.Failures) > 0 {
		named = make(map[string]string, len(e.Failures))
		for _, f := range e.Failures {
			named[f.SwitchID] = f.Reason
		}
	}
	recs := make([]AuditRecord, len(ids))
	for i, id := range ids {
		outcome, ok := named[id]
		if !ok {
			outcome = OutcomeNotSent
		}
		recs[i] = sender.record(at, id, cmd, outcome, 0)
	}
	// Its error does not change the refusal: nothing was switched, and
	// Persist logs the records it could not store.
	_ = h.opts.Persist(cmd.Value(), nil, recs)
}

// Sender is who sent a command: the installation (and its app and
// user) and the request's id. It rides in the command's context, so the
// feed can say whose command a change was and the audit record who sent it.
type Sender struct {
	Installation string
	App          string
	UserID       int64
	RequestID    string
}

type senderKey struct{}

// WithSender returns ctx carrying who sends the commands run under it.
func WithSender(ctx context.Context, s Sender) context.Context {
	return context.WithValue(ctx, senderKey{}, s)
}

// SenderOf is who sends the commands run under ctx; zero when unknown.
func SenderOf(ctx context.Context) Sender {
	s, _ := ctx.Value(senderKey{}).(Sender)
	return s
}

func (h *Switchboard) now() time.Time {
	if h.opts.Now != nil {
		return h.opts.Now()
	}
	return time.Now()
}

func (h *Switchboard) observe(s *Switch, cmd Command, outcome string, d time.Duration) {
	if h.opts.Observe != nil {
		h.opts.Observe(s, cmd, outcome, d)
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

// failureList is the failures for a message: each switch id with its
// reason. Ids, not names: an id is what the API and the log use.
func failureList(fs []Failure) string {
	parts := make([]string, len(fs))
	for i, f := range fs {
		parts[i] = fmt.Sprintf("%s (%s)", f.SwitchID, f.Reason)
	}
	return strings.Join(parts, ", ")
}

// Options is what the switchboard was built with: a switchboard over the
// same switches with other options starts from it.
func (h *Switchboard) Options() SwitchboardOptions { return h.opts }
