package webhook

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/hub/api"
)

// Store is the webhooks' storage (bridge/hub/hubstore implements it).
type Store interface {
	AddWebhook(ctx context.Context, w *bridge.Webhook, max int) error
	Webhooks(ctx context.Context, installationID string) ([]*bridge.Webhook, error)
	Webhook(ctx context.Context, id string) (*bridge.Webhook, error)
	DeleteWebhook(ctx context.Context, installationID, id string) error
	DeleteWebhooksOf(ctx context.Context, installationID string) error
	RotateWebhookSecret(ctx context.Context, installationID, id, secret string, overlapUntil time.Time) error
	EnqueueWebhookDeliveries(ctx context.Context, ds []bridge.WebhookDelivery) error
	DueWebhookDeliveries(ctx context.Context, now time.Time, limit int) ([]bridge.WebhookDelivery, error)
	// NextWebhookDelivery is when the next delivery is due; zero when the
	// outbox is empty.
	NextWebhookDelivery(ctx context.Context) (time.Time, error)
	WebhookDelivered(ctx context.Context, d bridge.WebhookDelivery, at time.Time) error
	WebhookFailed(ctx context.Context, d bridge.WebhookDelivery, at, next time.Time, why string) (time.Time, error)
	DisableWebhook(ctx context.Context, id, reason string) error
	// DropWebhookDeliveries empties the outbox of an installation's
	// webhooks (its grant has no live token).
	DropWebhookDeliveries(ctx context.Context, installationID string) (int, error)
}

// Installations tells which switches an installation grants, and whether
// anyone still holds its grant.
type Installations interface {
	// Installation returns ENOTFOUND for one that is gone.
	Installation(ctx context.Context, id string) (*bridge.Installation, error)
	// GrantLive reports whether a token of the installation's grant is
	// live at now (neither revoked nor expired, nor spent for a refresh
	// token); false for one that is gone.
	GrantLive(ctx context.Context, installationID string, now time.Time) (bool, error)
}

// Delivery defaults.
const (
	// DefaultConcurrency is how many deliveries run at once, each to
	// another webhook, beyond one per installation (slots): a receiver
	// that never answers holds one of them, and no other installation's.
	DefaultConcurrency = 4
	// MaxFailing is how long a webhook may fail before it is disabled.
	MaxFailing = 24 * time.Hour
	// firstDelay and maxDelay bound the back-off between attempts.
	firstDelay = 5 * time.Second
	maxDelay   = time.Hour
	// feedBuffer is how many events the outbox writer may fall behind.
	feedBuffer = 4096
	// routesAge is how long the map from switches to webhooks is used
	// before it is read again (an uninstall, changed switches).
	routesAge = 2 * time.Second
)

// Service registers webhooks and delivers the feed's events to them.
type Service struct {
	store Store
	inst  Installations
	feed  *bridge.Feed
	// names are the switches' names, for the deliveries; Run sets them.
	names SwitchNames
	// observed, when set, hears the outcome of each delivery attempt: ok,
	// failed, gone (410, disabled), expired (failing too long, disabled).
	observed func(outcome string)
	// Client sends to receivers.
	Client *Client
	Logger *slog.Logger
	// Concurrency is how many deliveries run at once beyond one per
	// installation (slots); DefaultConcurrency when 0. Set it before Run.
	Concurrency int

	sub  *bridge.Subscription
	wake chan struct{}
	// clock, when set (SetClock), replaces time.Now.
	clock atomic.Pointer[func() time.Time]

	mu       sync.Mutex
	routes   map[string][]route // switch id → its webhooks
	routesAt time.Time
	// routesGen counts forgetRoutes: a map read from the store while a
	// webhook was registered (or deleted) is not kept, as it may not
	// know that webhook.
	routesGen uint64
	limits    Limits
	// suspended holds the installations whose webhooks routing last
	// found without a live grant, with their switches: a change of one
	// of those asks again at once (resumed), so a new authorization is
	// not left out of the routes for routesAge; and each suspension and
	// resumption is logged once.
	suspended map[string][]string
}

// Limits are how long deliveries wait between attempts and may fail; the
// zero Limits are the defaults (5 s doubling to an hour; a day).
type Limits struct {
	FirstDelay, MaxDelay, MaxFailing time.Duration
}

// SetLimits changes the back-off and the failing time, also while it runs
// (tests shorten them).
func (s *Service) SetLimits(l Limits) {
	s.mu.Lock()
	s.limits = l
	s.mu.Unlock()
}

func (s *Service) currentLimits() Limits {
	s.mu.Lock()
	l := s.limits
	s.mu.Unlock()
	if l.FirstDelay <= 0 {
		l.FirstDelay = firstDelay
	}
	if l.MaxDelay <= 0 {
		l.MaxDelay = maxDelay
	}
	if l.MaxFailing <= 0 {
		l.MaxFailing = MaxFailing
	}
	return l
}

// SwitchNames names the switches in deliveries; the switchboard is one.
type SwitchNames interface {
	Switch(id string) (*bridge.Switch, bool)
}

// New builds the service and subscribes it to the feed at once, so that
// the changes made while the hub starts (start-up policies) are delivered
// too; Run delivers. observe, when not nil, hears the outcome of each
// delivery attempt: ok, failed, gone (410, disabled), expired (failing too
// long, disabled).
func New(store Store, inst Installations, feed *bridge.Feed, client *Client, logger *slog.Logger, observe func(outcome string)) *Service {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{store: store, inst: inst, feed: feed, observed: observe, Client: client, Logger: logger, wake: make(chan struct{}, 1)}
	if client != nil {
		// What the client may not tell an app goes to the owner's log.
		client.logger = logger
	}
	s.sub, _, _ = feed.Subscribe(nil, feedBuffer, "")
	return s
}

// SetClock replaces the service's clock, also while it runs: tests move
// it past a token's expiry.
func (s *Service) SetClock(now func() time.Time) { s.clock.Store(&now) }

func (s *Service) now() time.Time {
	if c := s.clock.Load(); c != nil {
		return (*c)()
	}
	return time.Now()
}

func (s *Service) forgetRoutes() {
	s.mu.Lock()
	s.routes = nil
	s.routesGen++
	s.mu.Unlock()
}

// Register checks a URL, asks the receiver to confirm it (Timeout), and
// registers it for the grant's installation. The webhook returned carries
// its secret, which is shown only now.
func (s *Service) Register(ctx context.Context, g *bridge.Grant, raw string) (*bridge.Webhook, error) {
	u, err := s.Client.CheckURL(raw)
	if err != nil {
		return nil, err
	}
	have, err := s.store.Webhooks(ctx, g.InstallationID)
	if err != nil {
		return nil, err
	}
	for _, w := range have {
		if w.URL == u.String() {
			return nil, bridge.Errorf(bridge.ECONFLICT, "this installation already has a webhook for %s", w.URL)
		}
	}
	if len(have) >= MaxPerInstallation {
		return nil, bridge.Errorf(bridge.ETOOMANY, "this installation already has %d webhooks, the most it may have", len(have))
	}
	w := &bridge.Webhook{ID: "wh_" + rand.Text(), InstallationID: g.InstallationID, URL: u.String(), Secret: NewSecret()}
	cctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := s.Client.confirm(cctx, w, s.now()); err != nil {
		return nil, err
	}
	if err := s.store.AddWebhook(ctx, w, MaxPerInstallation); err != nil {
		return nil, err
	}
	s.forgetRoutes()
	s.Logger.Info("webhook registered", "installation", g.InstallationID, "webhook", w.ID)
	return w, nil
}

// List returns an installation's webhooks, each Suspended when no one
// holds a live token of its grant.
func (s *Service) List(ctx context.Context, installationID string) ([]*bridge.Webhook, error) {
	ws, err := s.store.Webhooks(ctx, installationID)
	if err != nil || len(ws) == 0 {
		return ws, err
	}
	live, err := s.inst.GrantLive(ctx, installationID, s.now())
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		w.Suspended = !live
	}
	return ws, nil
}

// Delete removes an installation's webhook.
func (s *Service) Delete(ctx context.Context, installationID, id string) error {
	if err := s.store.DeleteWebhook(ctx, installationID, id); err != nil {
		return err
	}
	s.forgetRoutes()
	return nil
}

// Rotate gives a webhook a new secret and returns it; the old one signs
// deliveries beside it for SecretOverlap.
func (s *Service) Rotate(ctx context.Context, installationID, id string) (string, error) {
	secret := NewSecret()
	if err := s.store.RotateWebhookSecret(ctx, installationID, id, secret, s.now().Add(SecretOverlap)); err != nil {
		return "", err
	}
	return secret, nil
}

// Run writes the feed's events to the outbox and delivers them until ctx
// ends; names (the switchboard, which exists once the drivers opened)
// names the switches in the deliveries.
func (s *Service) Run(ctx context.Context, names SwitchNames) {
	s.names = names
	var wg sync.WaitGroup
	wg.Go(func() { s.enqueue(ctx) })
	wg.Go(func() { s.deliver(ctx) })
	wg.Wait()
	s.sub.Close()
}

// enqueue writes each event to the outbox of every webhook whose
// installation grants its switch.
func (s *Service) enqueue(ctx context.Context) {
	for {
		var batch []bridge.Event
		select {
		case <-ctx.Done():
			return
		case e, ok := <-s.sub.Events():
			if !ok {
				// Fallen behind the feed, which never waits: start again
				// from now. What was missed is lost to the webhooks.
				s.Logger.Warn("webhooks: fell behind the switches' changes; some changes are not delivered")
				s.sub, _, _ = s.feed.Subscribe(nil, feedBuffer, "")
				continue
			}
			batch = append(batch, *e)
		}
	drain:
		for len(batch) < 256 {
			select {
			case e, ok := <-s.sub.Events():
				if !ok {
					break drain
				}
				batch = append(batch, *e)
			default:
				break drain
			}
		}
		n, err := s.queue(ctx, batch)
		if err != nil && ctx.Err() == nil {
			s.Logger.Warn("webhooks: queueing changes", "events", len(batch), "err", err)
		}
		if n == 0 {
			continue // no webhook wants these changes: nothing to deliver
		}
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// queue writes the batch's deliveries to the outbox and returns how many.
func (s *Service) queue(ctx context.Context, batch []bridge.Event) (int, error) {
	routes, err := s.routing(ctx)
	if err != nil {
		return 0, err
	}
	if s.resumed(ctx, batch) {
		s.forgetRoutes()
		if routes, err = s.routing(ctx); err != nil {
			return 0, err
		}
	}
	now := s.now()
	var ds []bridge.WebhookDelivery
	for _, e := range batch {
		hooks := routes[e.SwitchID]
		if len(hooks) == 0 {
			continue
		}
		name := e.SwitchID
		if s.names != nil {
			if sw, ok := s.names.Switch(e.SwitchID); ok {
				name = sw.Name
			}
		}
		// One body for every webhook the event is not own to; those of
		// the commanding installations (usually one) get their own.
		var body []byte
		for _, h := range hooks {
			payload := body
			if e.OwnedBy(h.installation) {
				payload = nil
			}
			if payload == nil {
				in := ""
				if e.OwnedBy(h.installation) {
					in = h.installation
				}
				b, err := json.Marshal(message{Type: "switch.changed", Timestamp: e.At.UTC(), Data: api.EventOf(e, name, in)})
				if err != nil {
					return 0, err
				}
				if payload = b; in == "" {
					body = b
				}
			}
			ds = append(ds, bridge.WebhookDelivery{WebhookID: h.id, SwitchID: e.SwitchID, MsgID: NewMsgID(), Payload: payload, QueuedAt: now, NextAt: now})
		}
	}
	return len(ds), s.store.EnqueueWebhookDeliveries(ctx, ds)
}

// routing returns which webhooks want each switch's changes, read again
// when older than routesAge. Webhooks of an installation that is gone are
// deleted; those of one whose grant has no live token get nothing, and
// their outbox is emptied (see suspend).
// route is a webhook a switch's changes go to, and its installation.
type route struct{ id, installation string }

func (s *Service) routing(ctx context.Context) (map[string][]route, error) {
	s.mu.Lock()
	r, at, gen := s.routes, s.routesAt, s.routesGen
	s.mu.Unlock()
	now := s.now()
	if r != nil && now.Sub(at) < routesAge && now.Sub(at) >= 0 {
		return r, nil
	}
	hooks, err := s.store.Webhooks(ctx, "")
	if err != nil {
		return nil, err
	}
	r = map[string][]route{}
	grants := map[string]*bridge.Installation{}
	suspended := map[string][]string{}
	pending := map[string]int{} // outbox of suspended installations
	for _, w := range hooks {
		if w.Disabled {
			continue
		}
		in, ok := grants[w.InstallationID]
		if !ok {
			in, err = s.inst.Installation(ctx, w.InstallationID)
			if bridge.ErrorCode(err) == bridge.ENOTFOUND {
				s.Logger.Info("webhooks: installation gone; its webhooks are deleted", "installation", w.InstallationID)
				if err := s.store.DeleteWebhooksOf(ctx, w.InstallationID); err != nil {
					return nil, err
				}
			} else if err != nil {
				return nil, err
			}
			if in != nil {
				live, err := s.inst.GrantLive(ctx, in.ID, now)
				if err != nil {
					return nil, err
				}
				if !live {
					suspended[in.ID] = in.SwitchIDs
					in = nil
				}
			}
			grants[w.InstallationID] = in
		}
		if _, ok := suspended[w.InstallationID]; ok {
			pending[w.InstallationID] += w.Pending
		}
		if in == nil {
			continue
		}
		for _, id := range in.SwitchIDs {
			r[id] = append(r[id], route{w.ID, w.InstallationID})
		}
	}
	for id, n := range pending {
		if n > 0 {
			s.suspend(ctx, id)
		}
	}
	s.mu.Lock()
	if s.routesGen == gen {
		s.routes, s.routesAt = r, now
	}
	was := s.suspended
	s.suspended = suspended
	s.mu.Unlock()
	for id := range suspended {
		if _, ok := was[id]; !ok {
			s.Logger.Info("webhooks suspended: no one holds a live token of the installation's grant", "installation", id)
		}
	}
	for id := range was {
		if grants[id] != nil { // still there, and live again
			s.Logger.Info("webhooks resumed: the installation was authorized again", "installation", id)
		}
	}
	return r, nil
}

// resumed reports whether an installation the routes hold suspended,
// whose switches the batch changes, has a live token again: a new
// authorization is then routed this batch, not up to routesAge later. It
// asks once per such installation, and only when its switches change.
func (s *Service) resumed(ctx context.Context, batch []bridge.Event) bool {
	s.mu.Lock()
	suspended := s.suspended
	s.mu.Unlock()
	if len(suspended) == 0 {
		return false
	}
	changed := map[string]bool{}
	for _, e := range batch {
		changed[e.SwitchID] = true
	}
	now := s.now()
	for id, switches := range suspended {
		if !slices.ContainsFunc(switches, func(sw string) bool { return changed[sw] }) {
			continue
		}
		if live, err := s.inst.GrantLive(ctx, id, now); err == nil && live {
			return true
		}
	}
	return false
}

// suspend empties the outbox of an installation whose grant has no live
// token. Nothing that waited is sent later, when a new authorization
// resumes its webhooks: the app behind them may be the one the grant was
// taken from (a reused refresh token is the sign of a stolen one), and a
// receiver that gets only what happens while its app is authorized learns
// nothing of the time no one was; the app reads the current state when it
// is authorized again.
func (s *Service) suspend(ctx context.Context, installationID string) {
	n, err := s.store.DropWebhookDeliveries(ctx, installationID)
	if err != nil {
		if ctx.Err() == nil {
			s.Logger.Warn("webhooks: dropping the deliveries of a suspended installation", "installation", installationID, "err", err)
		}
		return
	}
	if n > 0 {
		s.Logger.Info("webhooks: deliveries dropped: no one holds a live token of the installation's grant",
			"installation", installationID, "deliveries", n)
	}
}

// deliver sends what is due, one at a time per webhook, so each switch's
// changes arrive in order, and shares the Concurrency slots between
// installations (start).
func (s *Service) deliver(ctx context.Context) {
	n := s.Concurrency
	if n <= 0 {
		n = DefaultConcurrency
	}
	sl := newSlots(n)
	done := make(chan bridge.WebhookDelivery)
	var wg sync.WaitGroup
	defer wg.Wait()
	// The outbox is read when something may be due: a delivery queued
	// (wake), one finished (done), or the time of the next one. An idle
	// hub reads it once per idleLook, not in a loop.
	timer := time.NewTimer(idleLook)
	defer timer.Stop()
	for {
		// One row per webhook: those of busy webhooks, and of installations
		// at their share (at most MaxPerInstallation-1 more each), cannot
		// hide one that may start.
		due, err := s.store.DueWebhookDeliveries(ctx, s.now(), MaxPerInstallation*(sl.total+n))
		if err != nil && ctx.Err() == nil {
			s.Logger.Warn("webhooks: reading the outbox", "err", err)
		}
		for _, d := range sl.start(due) {
			wg.Go(func() {
				s.attempt(ctx, d)
				select {
				case done <- d:
				case <-ctx.Done():
				}
			})
		}
		timer.Reset(s.nextLook(ctx))
		select {
		case <-ctx.Done():
			return
		case d := <-done:
			sl.end(d)
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// slots are the deliveries running, per webhook and per installation. An
// installation with none running always starts one: no installation's
// deliveries wait for another's receivers, however many of those hang.
// Beyond that, a delivery starts while fewer than n run in all and its
// installation runs fewer than its share of n (n divided among the
// installations with deliveries running or due, rounded up). So at most
// n + (installations with webhooks) run at once, and an installation's
// hanging receivers hold at most its share once the others want theirs.
type slots struct {
	n       int
	total   int
	busy    map[string]bool // webhook id
	running map[string]int  // installation id → deliveries running
}

func newSlots(n int) *slots {
	return &slots{n: n, busy: map[string]bool{}, running: map[string]int{}}
}

// start picks which of the due deliveries (the outbox's order) start now
// and counts them as running.
func (sl *slots) start(due []bridge.WebhookDelivery) []bridge.WebhookDelivery {
	var wait []bridge.WebhookDelivery
	active := map[string]bool{}
	for inst := range sl.running {
		active[inst] = true
	}
	for _, d := range due {
		if !sl.busy[d.WebhookID] {
			wait = append(wait, d)
			active[d.InstallationID] = true
		}
	}
	share := (sl.n + len(active) - 1) / max(1, len(active)) // rounded up: no slot left idle
	var out []bridge.WebhookDelivery
	for len(wait) > 0 {
		// The installation running fewest goes next; among its equals, the
		// longest waiting.
		best := 0
		for i, d := range wait {
			if sl.running[d.InstallationID] < sl.running[wait[best].InstallationID] {
				best = i
			}
		}
		d := wait[best]
		if k := sl.running[d.InstallationID]; k > 0 && (sl.total >= sl.n || k >= share) {
			break // every other one waits too: its installation runs as many or more
		}
		wait = append(wait[:best], wait[best+1:]...)
		sl.busy[d.WebhookID] = true
		sl.running[d.InstallationID]++
		sl.total++
		out = append(out, d)
	}
	return out
}

// end counts a delivery as ended.
func (sl *slots) end(d bridge.WebhookDelivery) {
	delete(sl.busy, d.WebhookID)
	sl.total--
	if sl.running[d.InstallationID]--; sl.running[d.InstallationID] <= 0 {
		delete(sl.running, d.InstallationID)
	}
}

// idleLook is how often the outbox is read when nothing is known to be
// due; busyLook, how soon again when deliveries are due but none could
// start (more than one read returns).
const (
	idleLook = time.Minute
	busyLook = 250 * time.Millisecond
)

// nextLook is how long deliver may wait before it reads the outbox again:
// until the next delivery is due, or busyLook when one is due now. That
// one may be a busy webhook's, whose end wakes deliver, but it also hides
// when any other webhook's retry falls due: waiting for the busy one (a
// receiver that never answers holds it for the client's timeout) would
// hold those up as long.
func (s *Service) nextLook(ctx context.Context) time.Duration {
	next, err := s.store.NextWebhookDelivery(ctx)
	if err != nil || next.IsZero() {
		return idleLook
	}
	if d := next.Sub(s.now()); d > 0 {
		return min(d, idleLook)
	}
	return busyLook
}

// attempt makes one delivery and records its outcome.
func (s *Service) attempt(ctx context.Context, d bridge.WebhookDelivery) {
	w, err := s.store.Webhook(ctx, d.WebhookID)
	if err != nil {
		return // deleted meanwhile: its outbox went with it
	}
	// An installation removed since the change was queued sends nothing
	// more.
	if _, err := s.inst.Installation(ctx, w.InstallationID); bridge.ErrorCode(err) == bridge.ENOTFOUND {
		if err := s.store.DeleteWebhooksOf(ctx, w.InstallationID); err != nil {
			s.Logger.Warn("webhooks: deleting those of a removed installation", "err", err)
		}
		s.forgetRoutes()
		return
	}
	// Nor does one whose grant lost its last live token since: routing
	// may have queued for it up to routesAge after that.
	now := s.now()
	if live, err := s.inst.GrantLive(ctx, w.InstallationID, now); err != nil || !live {
		if err == nil {
			s.suspend(ctx, w.InstallationID)
			s.forgetRoutes()
		} else if ctx.Err() == nil {
			s.Logger.Warn("webhooks: checking the installation's grant", "installation", w.InstallationID, "err", err)
		}
		return
	}
	a, err := s.Client.post(ctx, w, d.MsgID, d.Payload, now)
	if ctx.Err() != nil {
		return // shutting down: the delivery stays in the outbox
	}
	at := s.now()
	switch {
	case err == nil && a.Status >= 200 && a.Status <= 299:
		if err := s.store.WebhookDelivered(ctx, d, at); err != nil {
			s.Logger.Warn("webhooks: recording a delivery", "webhook", w.ID, "err", err)
		}
		s.observe("ok")
		return
	case err == nil && a.Status == 410:
		s.disable(ctx, w, "the receiver answered 410 Gone", "gone")
		return
	}
	why := ""
	var wait time.Duration
	if err != nil {
		why = oneLine(err)
	} else {
		why = "answered " + strconv.Itoa(a.Status)
		wait = a.RetryAfter
	}
	wait = max(wait, s.backoff(d.Attempts))
	since, ferr := s.store.WebhookFailed(ctx, d, at, at.Add(wait), why)
	if ferr != nil {
		s.Logger.Warn("webhooks: recording a failed delivery", "webhook", w.ID, "err", ferr)
		return
	}
	s.observe("failed")
	if at.Sub(since) >= s.currentLimits().MaxFailing {
		s.disable(ctx, w, "failing since "+since.UTC().Format(time.RFC3339)+": "+why, "expired")
		return
	}
	s.Logger.Info("webhooks: delivery failed; will retry", "webhook", w.ID, "installation", w.InstallationID,
		"reason", why, "retry_in_seconds", wait.Seconds())
}

func (s *Service) disable(ctx context.Context, w *bridge.Webhook, reason, outcome string) {
	if err := s.store.DisableWebhook(ctx, w.ID, reason); err != nil {
		s.Logger.Warn("webhooks: disabling", "webhook", w.ID, "err", err)
		return
	}
	s.forgetRoutes()
	s.observe(outcome)
	s.Logger.Warn("webhook disabled", "webhook", w.ID, "installation", w.InstallationID, "reason", reason)
}

// backoff is the wait after a delivery's attempts failures: doubling from
// Limits.FirstDelay up to Limits.MaxDelay, each drawn between half and all of it so
// receivers coming back are not hit all at once.
func (s *Service) backoff(attempts int) time.Duration {
	l := s.currentLimits()
	most := l.MaxDelay
	d := l.FirstDelay
	for i := 0; i < attempts && d < most; i++ {
		d *= 2
	}
	d = min(d, most)
	return d/2 + mrand.N(d/2+1)
}

func (s *Service) observe(outcome string) {
	if s.observed != nil {
		s.observed(outcome)
	}
}
