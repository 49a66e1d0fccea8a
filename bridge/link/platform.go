package link

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/oauth"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// PlatformStore is what the platform's side of the link reads and writes;
// bridge/store implements it (a PostgreSQL one may, for platforms that
// outgrow one machine).
type PlatformStore interface {
	// Hub returns ENOTFOUND for an unknown hub.
	Hub(ctx context.Context, id string) (*bridge.RemoteHub, error)
	Hubs(ctx context.Context) ([]*bridge.RemoteHub, error)
	// SetInventory returns ECONFLICT, naming the location, when another
	// hub holds one of locs or reserved says it is the platform's.
	SetInventory(ctx context.Context, hubID, version string, locs []bridge.RemoteLocation, reserved func(int64) bool) error
	TouchHub(ctx context.Context, id string, cursor int64, at time.Time) error
	// Changes returns bridge.ErrCursorGone for a cursor it cannot resume.
	Changes(ctx context.Context, hubID string, cursor int64) (*bridge.ChangeBatch, error)
	// CheckCursor returns bridge.ErrCursorGone unless the change log
	// holds the entry a hub's cursor and its tag name.
	CheckCursor(ctx context.Context, cursor int64, tag string) error
	Snapshot(ctx context.Context, hubID string) (*bridge.ChangeBatch, error)
	ChangeSeq(ctx context.Context) (int64, error)
	ChangedLocations(ctx context.Context, after, upto int64) ([]int64, error)
	HubLocationIDs(ctx context.Context, hubID string) ([]int64, error)
	// RemovedHubSecret returns the secret hash of a removed hub;
	// ENOTFOUND when none with that id was removed.
	RemovedHubSecret(ctx context.Context, id string) ([]byte, error)
	// CursorFromElsewhere reports whether a hub's cursor names a point
	// the change log never held (a platform restored from an older backup).
	CursorFromElsewhere(ctx context.Context, seq int64, tag string) (bool, error)
	// SetHubConflict records a second process refused with the hub's
	// credentials, for hub list.
	SetHubConflict(ctx context.Context, id, why string, at time.Time) error
}

// maxCursorTag bounds the tag a hub sends with its cursor.
const maxCursorTag = 64

// Defaults of the platform's side.
const (
	DefaultPollTimeout  = 25 * time.Second
	DefaultWakeInterval = 200 * time.Millisecond
	// OnlineWithin is how recently a hub must have called to count as
	// online: a poll renews it every PollTimeout.
	OnlineWithin = DefaultPollTimeout + 15*time.Second
)

// Platform serves the platform's side of the link.
type Platform struct {
	// PollTimeout is how long a long poll waits for a change.
	PollTimeout time.Duration
	// WakeInterval is how often waiting polls look for changes made by
	// other processes.
	WakeInterval time.Duration
	// Own reports whether a location is the platform's own (configured
	// here): no hub may claim it. Nil: none.
	Own func(id int64) bool
	// TrustedProxies are the peers whose forwarding headers name the
	// client, for throttling wrong hub logins (server.trusted_proxies).
	TrustedProxies []netip.Prefix

	store    PlatformStore
	logger   *slog.Logger
	watch    *watcher
	fails    *failures
	sessions *sessions
	now      func() time.Time

	closing   chan struct{} // closed by Shutdown
	closeOnce sync.Once

	conflictMu  sync.Mutex
	conflictLog map[string]time.Time // when each hub's conflict was last logged
}

// NewPlatform returns the platform's side of the link over st.
func NewPlatform(st PlatformStore, logger *slog.Logger) *Platform {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Platform{PollTimeout: DefaultPollTimeout, WakeInterval: DefaultWakeInterval, store: st, logger: logger, fails: newFailures(),
		sessions: newSessions(), now: time.Now, closing: make(chan struct{}), conflictLog: map[string]time.Time{}}
	p.watch = &watcher{p: p, ch: make(chan struct{})}
	return p
}

// Shutdown ends every long poll at once with 503 and Retry-After: 1, and
// answers every later link request so: the platform is stopping (to be
// started again, as a rule), and its hubs should call again within a
// second or so rather than after their back-off. Call it before the HTTP
// server's own Shutdown, which would otherwise wait out the long polls.
func (p *Platform) Shutdown() {
	p.closeOnce.Do(func() { close(p.closing) })
}

func (p *Platform) shuttingDown() bool {
	select {
	case <-p.closing:
		return true
	default:
		return false
	}
}

// answerShuttingDown is the answer to a hub while the platform stops.
func answerShuttingDown(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Connection", "close")
	wire.WriteError(w, http.StatusServiceUnavailable, "the platform is shutting down: call again in a second", nil)
}

// Register adds the link's routes to mux.
func (p *Platform) Register(mux *http.ServeMux) {
	mux.HandleFunc("PUT "+InventoryPath, p.handleInventory)
	mux.HandleFunc("GET "+ChangesPath, p.handleChanges)
	mux.HandleFunc("GET "+SnapshotPath, p.handleSnapshot)
	mux.HandleFunc("PUT "+UsagePath, p.handleUsage)
}

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

// RemovedHeader marks the answer to a hub that was removed (hub remove):
// 410 Gone with this header set. A 410 without it is a cursor the change
// log cannot resume.
const RemovedHeader = "Switchbridge-Hub-Removed"

// authenticate checks the request's HTTP Basic hub credentials and
// returns the hub, or answers the request and returns nil: 401 for wrong
// credentials (throttled), 410 with RemovedHeader for the credentials of a
// removed hub, so that hub stops serving.
func (p *Platform) authenticate(w http.ResponseWriter, r *http.Request) *bridge.RemoteHub {
	w.Header().Set("Cache-Control", "no-store")
	if p.shuttingDown() {
		answerShuttingDown(w)
		return nil
	}
	addr := oauth.ClientKey(r, p.TrustedProxies)
	id, secret, ok := r.BasicAuth()
	if wait := p.fails.wait(id, addr, p.now()); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait/time.Second)+1))
		wire.WriteError(w, http.StatusTooManyRequests, "too many failed hub logins from this address; wait", nil)
		return nil
	}
	if !ok || len(id) > 64 || len(secret) > 256 {
		p.refuse(w, addr, id, "missing or malformed hub credentials")
		return nil
	}
	h, err := p.store.Hub(r.Context(), id)
	switch {
	case bridge.ErrorCode(err) == bridge.ENOTFOUND:
		hash, rerr := p.store.RemovedHubSecret(r.Context(), id)
		if rerr != nil {
			hash = dummyHash // same work as a known hub
		}
		if oauth.SecretMatches(secret, hash) && rerr == nil {
			p.logger.Warn("hub link: a removed hub called; told it was removed", "hub", bridge.Untrusted(id), "peer", addr)
			w.Header().Set(RemovedHeader, "1")
			wire.WriteError(w, http.StatusGone, "this hub was removed from the platform (hub remove): it must serve no installation of the platform; hub add registers it anew", nil)
			return nil
		}
		p.refuseRestored(w, r, addr, id, false)
		return nil
	case err != nil && r.Context().Err() != nil:
		// The hub went away mid-authentication: nothing to answer, and
		// nothing wrong here.
		p.logger.Debug("hub link: a hub's request ended while reading the hub registry", "hub", id, "err", err)
		return nil
	case err != nil:
		p.logger.Error("hub link: reading the hub registry", "err", err)
		wire.WriteError(w, http.StatusInternalServerError, "internal error", nil)
		return nil
	case !oauth.SecretMatches(secret, h.SecretHash):
		p.refuseRestored(w, r, addr, id, true)
		return nil
	}
	p.fails.succeed(id, addr)
	return h
}

var dummyHash = oauth.Hash("no such hub")

// refuseRestored refuses a hub's credentials; when the hub's replica
// cursor names a point this change log never held, the platform was
// restored from a backup older than what the hub followed, its secret (or
// its registration) included, and the answer says so (RekeyHeader): the
// hub then empties its replica rather than serve, for ever, tokens this
// platform never issued.
func (p *Platform) refuseRestored(w http.ResponseWriter, r *http.Request, addr, id string, known bool) {
	if seq, tag, ok := cursorOf(r); ok {
		if elsewhere, err := p.store.CursorFromElsewhere(r.Context(), seq, tag); err == nil && elsewhere {
			p.fails.fail(id, addr, p.now())
			how := "hub rotate-secret " + id + " prints a new secret for it"
			if !known {
				how = "hub add registers it anew"
			}
			p.logger.Warn("hub link: refused a hub that followed a later history of this platform (restored from an older backup?): told it to empty its replica until it is given new credentials",
				"hub", id, "peer", addr, "cursor", seq)
			w.Header().Set(RekeyHeader, "1")
			w.Header().Set("WWW-Authenticate", `Basic realm="switchbridge hubs"`)
			wire.WriteError(w, http.StatusUnauthorized, "the platform does not know this hub's credentials, and its change log never held the replica's cursor: "+
				"it was restored from a backup older than them; the hub must serve nothing until it has new credentials ("+how+")", nil)
			return
		}
	}
	p.refuse(w, addr, id, "unknown hub id or wrong secret")
}

// cursorOf is the replica cursor a hub's request names: the query of a
// changes request, else CursorHeader.
func cursorOf(r *http.Request) (int64, string, bool) {
	q := r.URL.Query()
	c, tag := q.Get("cursor"), q.Get("tag")
	if c == "" {
		c, tag, _ = strings.Cut(r.Header.Get(CursorHeader), " ")
	}
	seq, err := strconv.ParseInt(c, 10, 64)
	if err != nil || seq < 0 || len(tag) > maxCursorTag {
		return 0, "", false
	}
	return seq, tag, true
}

// admit lets a request of an authenticated hub in, unless another process
// with the hub's credentials (another instance) holds its link now: then
// it answers 409, says why, and records it for hub list. The newcomer is
// refused, not the instance serving: a copied config must not take a
// working hub's locations away. done must be called when the request ends.
func (p *Platform) admit(w http.ResponseWriter, r *http.Request, h *bridge.RemoteHub) (done func(answered bool), ok bool) {
	inst := r.Header.Get(InstanceHeader)
	if len(inst) > 64 {
		inst = inst[:64]
	}
	done, holder, ok := p.sessions.enter(h.ID, inst, p.now())
	if ok {
		return done, true
	}
	addr := oauth.ClientKey(r, p.TrustedProxies)
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
	if len(p.conflictLog) > maxTracked {
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

func locationIDs(locs []bridge.RemoteLocation) []int64 {
	ids := make([]int64, len(locs))
	for i, l := range locs {
		ids[i] = l.ID
	}
	return ids
}

// setLocations tells a hub which of its locations the platform accepts
// (LocationsHeader).
func setLocations(w http.ResponseWriter, ids []int64) {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	w.Header().Set(LocationsHeader, strings.Join(parts, ","))
}

func (p *Platform) refuse(w http.ResponseWriter, addr, id, why string) {
	p.fails.fail(id, addr, p.now())
	p.logger.Warn("hub link: refused a hub's credentials", "hub", bridge.Untrusted(id), "peer", addr, "reason", why)
	w.Header().Set("WWW-Authenticate", `Basic realm="switchbridge hubs"`)
	wire.WriteError(w, http.StatusUnauthorized, "the hub's credentials were refused: "+why+" (hub rotate-secret prints a new one)", nil)
}

func (p *Platform) handleInventory(w http.ResponseWriter, r *http.Request) {
	h := p.authenticate(w, r)
	if h == nil {
		return
	}
	done, ok := p.admit(w, r, h)
	if !ok {
		return
	}
	defer func() { done(r.Context().Err() == nil) }()
	w.Header().Set(HeartbeatHeader, HeartbeatInterval.String())
	setLocations(w, locationIDs(h.Locations))
	var inv Inventory
	if err := decodeOne(http.MaxBytesReader(w, r.Body, MaxInventoryBytes), &inv); err != nil {
		p.logger.Warn("hub link: unreadable inventory", "hub", h.ID, "err", bridge.Untrusted(err.Error()))
		wire.WriteError(w, http.StatusBadRequest, "unreadable inventory: "+err.Error(), nil)
		return
	}
	if err := CheckInventory(&inv); err != nil {
		p.logger.Warn("hub link: inventory refused", "hub", h.ID, "name", h.Name, "err", bridge.Untrusted(err.Error()))
		wire.WriteError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	err := p.store.SetInventory(r.Context(), h.ID, inv.Version, inv.Locations, p.Own)
	switch bridge.ErrorCode(err) {
	case "":
	case bridge.ECONFLICT:
		var held *bridge.LocationHeldError
		holder := ""
		if errors.As(err, &held) {
			holder = held.Holder
		}
		p.logger.Error("hub link: refused the inventory of hub "+h.Name+": "+bridge.ErrorMessage(err), "hub", h.ID, "holder", holder)
		wire.WriteError(w, http.StatusConflict, bridge.ErrorMessage(err), nil)
		return
	default:
		if r.Context().Err() != nil {
			return // the hub went away: nothing to answer, nothing wrong here
		}
		p.logger.Error("hub link: storing an inventory", "hub", h.ID, "err", err)
		wire.WriteError(w, http.StatusInternalServerError, "internal error", nil)
		return
	}
	setLocations(w, locationIDs(inv.Locations))
	p.logger.Info("hub link: inventory", "hub", h.ID, "name", h.Name, "version", bridge.Untrusted(inv.Version), "locations", len(inv.Locations))
	if v := Version(); inv.Version != v {
		p.logger.Info("hub link: the hub runs another version than the platform; the link works across versions, but upgrade both when you can",
			"hub", h.ID, "hub_version", bridge.Untrusted(inv.Version), "platform_version", v)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (p *Platform) handleSnapshot(w http.ResponseWriter, r *http.Request) {
	h := p.authenticate(w, r)
	if h == nil {
		return
	}
	done, ok := p.admit(w, r, h)
	if !ok {
		return
	}
	defer func() { done(r.Context().Err() == nil) }()
	setLocations(w, locationIDs(h.Locations))
	b, err := p.store.Snapshot(r.Context(), h.ID)
	if err != nil {
		if r.Context().Err() != nil {
			return // the hub went away: nothing to answer, nothing wrong here
		}
		p.logger.Error("hub link: snapshot", "hub", h.ID, "err", err)
		wire.WriteError(w, http.StatusInternalServerError, "internal error", nil)
		return
	}
	if err := p.store.TouchHub(r.Context(), h.ID, h.Cursor, p.now()); err != nil {
		p.logger.Warn("hub link: recording a hub's call", "hub", h.ID, "err", err)
	}
	p.logger.Info("hub link: snapshot sent", "hub", h.ID, "name", h.Name, "installations", len(b.Installations), "tokens", len(b.Tokens), "cursor", b.Cursor)
	wire.WriteJSON(w, http.StatusOK, b)
}

func (p *Platform) handleChanges(w http.ResponseWriter, r *http.Request) {
	h := p.authenticate(w, r)
	if h == nil {
		return
	}
	done, ok := p.admit(w, r, h)
	if !ok {
		return
	}
	defer func() { done(r.Context().Err() == nil) }()
	cursor, err := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64)
	if err != nil || cursor < 0 {
		wire.WriteError(w, http.StatusBadRequest, "cursor must be a change sequence (a number ≥ 0)", nil)
		return
	}
	tag := r.URL.Query().Get("tag")
	if len(tag) > maxCursorTag {
		wire.WriteError(w, http.StatusBadRequest, "tag: too long", nil)
		return
	}
	switch err := p.store.CheckCursor(r.Context(), cursor, tag); {
	case errors.Is(err, bridge.ErrCursorGone):
		wire.WriteError(w, http.StatusGone, fmt.Sprintf("cursor %d: %v", cursor, err), nil)
		return
	case err != nil:
		if r.Context().Err() != nil {
			return // the hub went away: nothing to answer, nothing wrong here
		}
		p.logger.Error("hub link: checking a cursor", "hub", h.ID, "err", err)
		wire.WriteError(w, http.StatusInternalServerError, "internal error", nil)
		return
	}
	// The cursor asked for is what the hub has stored: its acknowledgement.
	if err := p.store.TouchHub(r.Context(), h.ID, cursor, p.now()); err != nil {
		p.logger.Warn("hub link: recording a hub's call", "hub", h.ID, "err", err)
	}
	var b *bridge.ChangeBatch
	if r.URL.Query().Get("wait") == "0" {
		// The hub missed a token or an installation: what is there now,
		// without waiting.
		b, err = p.store.Changes(r.Context(), h.ID, cursor)
	} else {
		var stop bool
		b, stop, err = p.longPoll(w, r, h.ID, cursor, tag)
		if stop {
			return
		}
	}
	switch {
	case errors.Is(err, errHubChanged):
		if p.authenticate(w, r) != nil { // unchanged after all: nothing new
			wire.WriteJSON(w, http.StatusOK, &bridge.ChangeBatch{Cursor: cursor, CursorTag: tag})
		}
		return
	case errors.Is(err, bridge.ErrCursorGone):
		wire.WriteError(w, http.StatusGone, fmt.Sprintf("cursor %d: %v", cursor, err), nil)
		return
	case err != nil && r.Context().Err() != nil:
		return // the hub went away
	case err != nil:
		p.logger.Error("hub link: changes", "hub", h.ID, "err", err)
		wire.WriteError(w, http.StatusInternalServerError, "internal error", nil)
		return
	}
	if locs, err := p.store.HubLocationIDs(r.Context(), h.ID); err == nil {
		setLocations(w, locs)
	}
	wire.WriteJSON(w, http.StatusOK, b)
}

// longPoll runs Poll for a hub's request. While it waits it sends the hub
// 102 Processing every HeartbeatInterval when the hub asked for it, so a
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
	if r.Header.Get(HeartbeatHeader) != "" {
		t := time.NewTicker(HeartbeatInterval)
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

// CheckInventory applies the limits on what a hub may report: counts,
// lengths, ids as the config allows them, each location and switch once,
// known commands.
func CheckInventory(inv *Inventory) error {
	if len(inv.Version) > MaxVersionLen {
		return fmt.Errorf("version is longer than %d bytes", MaxVersionLen)
	}
	if len(inv.Locations) > MaxLocations {
		return fmt.Errorf("%d locations: at most %d", len(inv.Locations), MaxLocations)
	}
	locs := map[int64]bool{}
	sws := map[string]bool{}
	for _, l := range inv.Locations {
		switch {
		case l.ID <= 0:
			return fmt.Errorf("location id %d: ids are positive", l.ID)
		case locs[l.ID]:
			return fmt.Errorf("location %d is listed twice", l.ID)
		case l.Name == "" || len(l.Name) > MaxNameLen:
			return fmt.Errorf("location %d: a name of 1-%d bytes is required", l.ID, MaxNameLen)
		}
		locs[l.ID] = true
		for _, s := range l.Switches {
			switch {
			case !config.SwitchIDPattern.MatchString(s.ID):
				return fmt.Errorf("location %d: switch id %.70q is not a valid id", l.ID, s.ID)
			case sws[s.ID]:
				return fmt.Errorf("switch %q is listed twice", s.ID)
			case s.Name == "" || len(s.Name) > MaxNameLen:
				return fmt.Errorf("switch %q: a name of 1-%d bytes is required", s.ID, MaxNameLen)
			case len(s.Commands) > len(bridge.Commands):
				return fmt.Errorf("switch %q: too many commands", s.ID)
			}
			for _, c := range s.Commands {
				if _, err := bridge.ParseCommand(string(c)); err != nil {
					return fmt.Errorf("switch %q: unknown command %.20q", s.ID, c)
				}
			}
			sws[s.ID] = true
			if len(sws) > MaxSwitches {
				return fmt.Errorf("more than %d switches", MaxSwitches)
			}
		}
	}
	return nil
}

// watcher wakes long polls when the change log grows, whoever wrote it: it
// reads the newest sequence every WakeInterval while any poll waits, and
// stops when none does.
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

func (w *watcher) run() {
	t := time.NewTicker(w.p.WakeInterval)
	defer t.Stop()
	ctx := context.Background()
	for range t.C {
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

// failures throttles wrong hub logins. Failures count against two keys:
// the (hub id, address) pair, which waits after pairFree failures a
// minute, and the address alone, which waits only after addrFree, so one
// hub's wrong secret cannot lock out the other hubs behind the same
// address, while one address cannot try ids without end. An address is
// the client's behind server.trusted_proxies, IPv6 by its /64
// (oauth.ClientKey). The table is bounded: when full, the entries whose
// last failure is oldest go first, so a flood of new keys cannot wipe out
// the count of a key being throttled.
type failures struct {
	mu sync.Mutex
	m  map[string]*failed
}

type failed struct {
	n     int
	until time.Time
	last  time.Time
}

const (
	pairFree   = 5
	addrFree   = 50
	maxTracked = 4096
)

func newFailures() *failures { return &failures{m: map[string]*failed{}} }

func pairKey(id, addr string) string { return "pair:" + id + "\x00" + addr }
func addrOnly(addr string) string    { return "addr:" + addr }

func (f *failures) wait(id, addr string, now time.Time) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	var longest time.Duration
	for _, k := range []string{pairKey(id, addr), addrOnly(addr)} {
		if e := f.m[k]; e != nil && now.Before(e.until) {
			longest = max(longest, e.until.Sub(now))
		}
	}
	return longest
}

func (f *failures) fail(id, addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range []struct {
		key  string
		free int
	}{{pairKey(id, addr), pairFree}, {addrOnly(addr), addrFree}} {
		e := f.m[c.key]
		if e == nil || now.Sub(e.last) > time.Minute {
			if e == nil && len(f.m) >= maxTracked {
				f.evictLocked(now)
			}
			e = &failed{}
			f.m[c.key] = e
		}
		e.n++
		e.last = now
		if e.n > c.free {
			e.until = now.Add(min(time.Duration(e.n-c.free)*time.Second, 30*time.Second))
		}
	}
}

// evictLocked drops a quarter of the entries: those not making anyone
// wait first, then those whose last failure is oldest, so a flood of new
// keys cannot free a key that is being throttled.
func (f *failures) evictLocked(now time.Time) {
	type aged struct {
		key      string
		blocking bool
		last     time.Time
	}
	all := make([]aged, 0, len(f.m))
	for k, e := range f.m {
		all = append(all, aged{k, now.Before(e.until), e.last})
	}
	slices.SortFunc(all, func(a, b aged) int {
		if a.blocking != b.blocking {
			if a.blocking {
				return 1
			}
			return -1
		}
		return a.last.Compare(b.last)
	})
	for _, a := range all[:max(len(all)/4, 1)] {
		delete(f.m, a.key)
	}
}

// succeed forgets the pair's failures; the address keeps its count.
func (f *failures) succeed(id, addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.m, pairKey(id, addr))
}

// size is how many keys the table tracks, for tests.
func (f *failures) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.m)
}
