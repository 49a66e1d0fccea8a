package linkserver

// The Platform, its endpoints, and the authentication of hubs. Long polls
// are in watch.go, the throttle of wrong secrets in throttle.go, the one
// process per hub in sessions.go, usage reports in usage.go.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/infra/clientaddr"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// PlatformStore is what the platform's side of the link reads and writes;
// bridge/platform/accounts implements it (a PostgreSQL one may, for platforms that
// outgrow one machine).
type PlatformStore interface {
	// Hub returns ENOTFOUND for an unknown hub.
	Hub(ctx context.Context, id string) (*bridge.RegisteredHub, error)
	Hubs(ctx context.Context) ([]*bridge.RegisteredHub, error)
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

// Defaults of the platform's side (its long polls wait
// link.DefaultPollTimeout).
const (
	DefaultWakeInterval = 200 * time.Millisecond
	// OnlineWithin is how recently a hub must have called to count as
	// online: a poll renews it every PollTimeout.
	OnlineWithin = link.DefaultPollTimeout + 15*time.Second
)

// Platform serves the platform's side of the link.
type Platform struct {
	// PollTimeout is how long a long poll waits for a change.
	PollTimeout time.Duration
	// WakeInterval is how often waiting polls look for changes made by
	// other processes.
	WakeInterval time.Duration

	opts     Options
	store    PlatformStore
	logger   *slog.Logger
	watch    *watcher
	fails    loginThrottle
	sessions *sessions
	now      func() time.Time

	closing   chan struct{} // closed by Shutdown
	closeOnce sync.Once

	conflictMu  sync.Mutex
	conflictLog map[string]time.Time // when each hub's conflict was last logged
}

// Options is what the platform's side of the link is built with.
type Options struct {
	// Own reports whether a location is the platform's own (configured
	// here): no hub may claim it. Nil: none.
	Own func(id int64) bool
	// TrustedProxies are the peers whose forwarding headers name the
	// client, for throttling wrong hub logins (server.trusted_proxies).
	TrustedProxies []netip.Prefix
	// SignIns redeems the codes hubs' consoles sign their owners in with
	// (the platform's *oauth.Server); nil refuses every one.
	SignIns SignIns
}

// SignIns redeems console sign-in codes for a hub.
type SignIns interface {
	RedeemConsoleSignIn(ctx context.Context, hubID, code string) (*bridge.User, time.Time, error)
}

// NewPlatform returns the platform's side of the link over st.
func NewPlatform(st PlatformStore, logger *slog.Logger, opts Options) *Platform {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Platform{opts: opts, PollTimeout: link.DefaultPollTimeout, WakeInterval: DefaultWakeInterval, store: st, logger: logger, fails: newLoginThrottle(),
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
	mux.HandleFunc("PUT "+link.InventoryPath, p.handleInventory)
	mux.HandleFunc("GET "+link.ChangesPath, p.handleChanges)
	mux.HandleFunc("GET "+link.SnapshotPath, p.handleSnapshot)
	mux.HandleFunc("PUT "+link.UsagePath, p.handleUsage)
	mux.HandleFunc("POST "+link.ConsoleSignInPath, p.handleConsoleSignIn)
}

// authenticate checks the request's HTTP Basic hub credentials and
// returns the hub, or answers the request and returns nil: 401 for wrong
// credentials (throttled), 410 with link.RemovedHeader for the credentials
// of a removed hub, so that hub stops serving.
func (p *Platform) authenticate(w http.ResponseWriter, r *http.Request) *bridge.RegisteredHub {
	w.Header().Set("Cache-Control", "no-store")
	if p.shuttingDown() {
		answerShuttingDown(w)
		return nil
	}
	addr := clientaddr.Key(r, p.opts.TrustedProxies)
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
			w.Header().Set(link.RemovedHeader, "1")
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
		wire.WriteErrorOf(w, err)
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
// its registration) included, and the answer says so (link.RekeyHeader): the
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
			w.Header().Set(link.RekeyHeader, "1")
			w.Header().Set("WWW-Authenticate", `Basic realm="switchbridge hubs"`)
			wire.WriteError(w, http.StatusUnauthorized, "the platform does not know this hub's credentials, and its change log never held the replica's cursor: "+
				"it was restored from a backup older than them; the hub must serve nothing until it has new credentials ("+how+")", nil)
			return
		}
	}
	p.refuse(w, addr, id, "unknown hub id or wrong secret")
}

// cursorOf is the replica cursor a hub's request names: the query of a
// changes request, else link.CursorHeader.
func cursorOf(r *http.Request) (int64, string, bool) {
	q := r.URL.Query()
	c, tag := q.Get("cursor"), q.Get("tag")
	if c == "" {
		c, tag, _ = strings.Cut(r.Header.Get(link.CursorHeader), " ")
	}
	seq, err := strconv.ParseInt(c, 10, 64)
	if err != nil || seq < 0 || len(tag) > maxCursorTag {
		return 0, "", false
	}
	return seq, tag, true
}

func locationIDs(locs []bridge.RemoteLocation) []int64 {
	ids := make([]int64, len(locs))
	for i, l := range locs {
		ids[i] = l.ID
	}
	return ids
}

// setLocations tells a hub which of its locations the platform accepts
// (link.LocationsHeader).
func setLocations(w http.ResponseWriter, ids []int64) {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	w.Header().Set(link.LocationsHeader, strings.Join(parts, ","))
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
	w.Header().Set(link.HeartbeatHeader, link.HeartbeatInterval.String()+" "+link.HeartbeatAtOnce)
	setLocations(w, locationIDs(h.Locations))
	var inv link.Inventory
	if err := link.DecodeOne(http.MaxBytesReader(w, r.Body, link.MaxInventoryBytes), &inv); err != nil {
		p.logger.Warn("hub link: unreadable inventory", "hub", h.ID, "err", bridge.Untrusted(err.Error()))
		wire.WriteError(w, http.StatusBadRequest, "unreadable inventory: "+err.Error(), nil)
		return
	}
	if err := link.CheckInventory(&inv); err != nil {
		p.logger.Warn("hub link: inventory refused", "hub", h.ID, "name", h.Name, "err", bridge.Untrusted(err.Error()))
		wire.WriteError(w, http.StatusBadRequest, err.Error(), nil)
		return
	}
	err := p.store.SetInventory(r.Context(), h.ID, inv.Version, inv.Locations, p.opts.Own)
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
		wire.WriteErrorOf(w, err)
		return
	}
	setLocations(w, locationIDs(inv.Locations))
	p.logger.Info("hub link: inventory", "hub", h.ID, "name", h.Name, "version", bridge.Untrusted(inv.Version), "locations", len(inv.Locations))
	if v := link.Version(); inv.Version != v {
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
		wire.WriteErrorOf(w, err)
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
		wire.WriteErrorOf(w, err)
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
		wire.WriteErrorOf(w, err)
		return
	}
	if locs, err := p.store.HubLocationIDs(r.Context(), h.ID); err == nil {
		setLocations(w, locs)
	}
	wire.WriteJSON(w, http.StatusOK, b)
}
