// Package api is the hub role's installation API: the app paths below each
// installation's URI (GET /switches, GET /switches/:id, PUT
// /switches/:command, PUT /switches/:id/:command, the event stream GET
// /events and the webhooks below /webhooks), declared as a table of routes the way the spec's
// apps declare theirs, behind a bearer token check that it asks of a
// bridge.Authorizer. Its contract for machines, an OpenAPI 3.1 document of
// these paths and of the OAuth endpoints and discovery, is openapi.json,
// served at /api/openapi.json.
package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
	"github.com/switchbridge/switchbridge/bridge/wire/bearer"
)

// Call is what a handler gets: the request's context, the path variables,
// the grant of its token and the hub.
type Call struct {
	Ctx         context.Context
	Params      map[string]string
	Grant       *bridge.Grant
	Switchboard *bridge.Switchboard
	// Logger carries the installation id. The handler leaves it nil and
	// makes it at the first line that needs it (log): most calls write
	// only the command's line, which names the installation itself, and
	// a logger made with With for every request was a measurable part of
	// its cost.
	Logger *slog.Logger
	// Body is the request's body, for a route that takes one.
	Body []byte
	// Webhooks is the hub's webhooks; nil when it sends none.
	Webhooks WebhookService
	// RequestID is the request's id, as its X-Request-Id answer header
	// says: the command's log line and audit record carry it.
	RequestID string

	handler      *Handler
	installation string
	afterAnswer  []func()
}

// log is the call's logger, with the installation id.
func (c *Call) log() *slog.Logger {
	if c.Logger == nil {
		c.Logger = c.handler.logger.With("installation", c.installation)
	}
	return c.Logger
}

// AfterAnswer runs fn once the answer to the call has been sent (or, with
// a body, written), so that a client does not wait for what the handler
// does after its work is done: writing its log lines.
func (c *Call) AfterAnswer(fn func()) { c.afterAnswer = append(c.afterAnswer, fn) }

// answered runs what was left for after the answer.
func (c *Call) answered() {
	for _, fn := range c.afterAnswer {
		fn()
	}
	c.afterAnswer = nil
}

// SwitchesApp is the spec's example app, one row per route. A new app path
// is one more row here.
var SwitchesApp = []Route{
	{Method: http.MethodGet, Path: "/switches", Handle: listSwitches},
	{Method: http.MethodGet, Path: "/switches/:id", Handle: getSwitch},
	{Method: http.MethodPut, Path: "/switches/:command", Handle: commandSwitches},
	{Method: http.MethodPut, Path: "/switches/:id/:command", Handle: commandSwitch},
	{Method: http.MethodGet, Path: "/events", Stream: streamEvents},
	{Method: http.MethodPost, Path: "/webhooks", Handle: registerWebhook, Body: maxWebhookBody},
	{Method: http.MethodGet, Path: "/webhooks", Handle: listWebhooks},
	{Method: http.MethodDelete, Path: "/webhooks/:id", Handle: deleteWebhook},
	{Method: http.MethodPost, Path: "/webhooks/:id/rotate", Handle: rotateWebhook},
}

// SwitchValue is one switch as the app reports it: its config id, its
// name, its value (null while the hub does not know it yet), whether its
// device is reachable (false while the hub has not heard from it) and when
// the hub last heard from the device (absent when never). Clients written
// for the original {name, value} ignore the fields they do not know.
type SwitchValue struct {
	ID        string        `json:"id"`
	Name      string        `json:"name"`
	Value     *bridge.Value `json:"value"`
	Available bool          `json:"available"`
	LastSeen  *time.Time    `json:"last_seen,omitempty"`
	// Power (W) and Energy (kWh, the hub's running total, never
	// decreasing) are absent for a device that has not reported them
	// (a GPIO relay never does) and null while the reading is stale.
	Power  Measured `json:"power,omitzero"`
	Energy Measured `json:"energy,omitzero"`
}

func switchValue(s bridge.SwitchState) SwitchValue {
	sv := SwitchValue{ID: s.Switch.ID, Name: s.Switch.Name, Available: s.State.Available, LastSeen: lastSeen(s.State.LastSeen)}
	if v := s.State.Value; v != "" {
		sv.Value = &v
	}
	sv.Power, sv.Energy = measured(s.State.Reading, s.State.Stale(time.Now()))
	return sv
}

// Measured is a reading's field: absent when the device never reported
// it, null while stale, else its number.
type Measured struct {
	known bool
	v     *float64
}

// IsZero makes the field absent (omitzero) when it was never reported.
func (m Measured) IsZero() bool { return !m.known }

func (m Measured) MarshalJSON() ([]byte, error) {
	if m.v == nil {
		return []byte("null"), nil
	}
	return json.Marshal(*m.v)
}

// measured is the power and energy fields of a reading.
func measured(r *bridge.Reading, stale bool) (power, energy Measured) {
	if r == nil {
		return
	}
	field := func(q bridge.Quantities, v float64) Measured {
		if r.Has&q == 0 {
			return Measured{}
		}
		if stale {
			return Measured{known: true}
		}
		return Measured{known: true, v: &v}
	}
	return field(bridge.HasPower, r.Power), field(bridge.HasEnergy, r.Energy)
}

// lastSeen is a last_seen field: UTC, to the second's fraction the hub
// knows, and absent (nil) for a device never heard from.
func lastSeen(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Round(0) // no monotonic reading in an answer
	return &t
}

// listSwitches reports every switch the installation was granted, from the
// drivers' caches. A granted switch that is no longer in the installation's
// location (a reload moved it away) answers 404 naming it, as a removed one
// does.
func listSwitches(c *Call) (any, error) {
	states, err := c.Switchboard.StatesIn(c.Grant.LocationID, c.Grant.SwitchIDs)
	if err != nil {
		return nil, err
	}
	out := make([]SwitchValue, len(states))
	for i, s := range states {
		out[i] = switchValue(s)
	}
	return out, nil
}

// getSwitch reports one of the installation's switches by its id. A switch
// the installation was not granted is not found, whether or not the hub has
// it, so a client learns nothing of switches it may not see.
func getSwitch(c *Call) (any, error) {
	id := c.Params["id"]
	if !slices.Contains(c.Grant.SwitchIDs, id) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no selected switch %q in this installation", id)
	}
	states, err := c.Switchboard.StatesIn(c.Grant.LocationID, []string{id})
	if err != nil {
		return nil, err
	}
	return switchValue(states[0]), nil
}

// commandSwitches runs on or off on every granted switch.
func commandSwitches(c *Call) (any, error) {
	return command(c, c.Grant.SwitchIDs)
}

// commandSwitch runs on or off on one granted switch, under the rules of
// the group command: a command other than on or off is 400 first. A switch
// the installation was not granted is not found, as for GET /switches/:id.
func commandSwitch(c *Call) (any, error) {
	if _, err := bridge.ParseCommand(c.Params["command"]); err != nil {
		return nil, err
	}
	id := c.Params["id"]
	if !slices.Contains(c.Grant.SwitchIDs, id) {
		return nil, bridge.Errorf(bridge.ENOTFOUND, "no selected switch %q in this installation", id)
	}
	return command(c, []string{id})
}

// command runs the call's command on the switches ids, and logs it once
// answered. The switchboard keeps its audit records, one per switch of
// ids, whether it ran or was refused (see-only, unsupported, a change
// cap, a switch gone). What is refused before this point is no command
// and is not recorded: a request without a valid token (401) or over its
// installation's rate limit (429) costs its sender nothing, and must not
// make the hub write (anyone could wear its SD card or fill its disk at
// will); one with a command other than on or off (400), or to a switch
// the grant does not hold (404), commands nothing the installation may
// command.
func command(c *Call, ids []string) (any, error) {
	cmd, err := bridge.ParseCommand(c.Params["command"])
	if err != nil {
		return nil, err
	}
	start := time.Now()
	ctx := bridge.WithSender(c.Ctx, bridge.Sender{Installation: c.Grant.InstallationID, App: c.Grant.ClientID, UserID: c.Grant.UserID, RequestID: c.RequestID})
	if err = seeOnly(c, ids); err != nil {
		// Refused here, not by the switchboard: recorded all the same.
		c.Switchboard.Refused(ctx, ids, cmd, err)
	} else {
		err = c.Switchboard.CommandIn(ctx, c.Grant.LocationID, ids, cmd)
	}
	if c.handler != nil {
		c.handler.streamsCaughtUp(c.Grant.InstallationID)
	}
	d := time.Since(start)
	c.AfterAnswer(func() { logCommand(c, ids, cmd, err, d) })
	return nil, err
}

// seeOnly refuses a command that includes a switch the installation was
// granted to see but not to switch: 403 naming each such switch, and
// nothing is sent to any device, also not to the switchable ones of a
// group command. A group command is a promise about the whole group, as
// for 501: switching part of it would leave the client to read a body to
// learn that the lamps it asked for are in two states.
func seeOnly(c *Call, ids []string) error {
	var refused []string
	for _, id := range ids {
		if !c.Grant.MaySwitch(id) {
			refused = append(refused, id)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	// The names come from the same read a list answers from; a switch
	// gone from the location is 404, as for any command to it.
	states, err := c.Switchboard.StatesIn(c.Grant.LocationID, refused)
	if err != nil {
		return err
	}
	e := bridge.Errorf(bridge.EFORBIDDEN, "this installation may see but not switch: %s; nothing was switched", strings.Join(refused, ", "))
	for _, s := range states {
		e.Failures = append(e.Failures, bridge.Failure{SwitchID: s.Switch.ID, Name: s.Switch.Name, Reason: bridge.FailSeeOnly,
			Message: "granted see-only"})
	}
	return e
}

// logCommand writes one line per command: the switches it was for, its
// outcome and how long it took, with the installation id from the call's
// logger; then one warning per switch that failed, with its reason. One line
// per command rather than per switch keeps a command to a hundred plugs from
// writing a hundred lines, while every failure is still named.
//
// Outcomes: ok (every switch confirmed), failed (some did not: see the lines
// that follow), switched_not_stored (every switch confirmed but the hub
// could not store the new states, e.g. a full disk), not_sent (refused
// before any device was touched: a 501, a switch gone, a rate limit).
func logCommand(c *Call, switches []string, cmd bridge.Command, err error, d time.Duration) {
	ids := strings.Join(switches, ",")
	if err == nil {
		attrs := [...]slog.Attr{slog.String("installation", c.installation), slog.String("command", string(cmd)), slog.String("switches", ids),
			slog.String("outcome", "ok"), slog.Float64("duration_seconds", d.Seconds()), slog.String("request_id", c.RequestID)}
		if c.Logger == nil {
			// The line c.log() would write: a logger's own attributes
			// come before those of the line.
			logLine(c.handler.logger, slog.LevelInfo, "command", attrs[:]...)
		} else {
			logLine(c.Logger, slog.LevelInfo, "command", attrs[1:]...)
		}
		return
	}
	var e *bridge.Error
	errors.As(err, &e)
	switch {
	case e != nil && len(e.NotStored) > 0:
		c.log().Warn("command", "command", string(cmd), "switches", ids, "outcome", "switched_not_stored",
			"not_stored", strings.Join(e.NotStored, ","), "error", bridge.ErrorMessage(err), "duration_seconds", d.Seconds(), "request_id", c.RequestID)
	case e != nil && len(e.Failures) > 0 && bridge.ErrorCode(err) == bridge.EDEVICE:
		failed := make([]string, len(e.Failures))
		for i, f := range e.Failures {
			failed[i] = f.SwitchID
		}
		c.log().Warn("command", "command", string(cmd), "switches", ids, "outcome", "failed",
			"failed", strings.Join(failed, ","), "duration_seconds", d.Seconds(), "request_id", c.RequestID)
		for _, f := range e.Failures {
			c.log().Warn("switch command failed", "switch", f.SwitchID, "command", string(cmd), "reason", f.Reason, "error", f.Message)
		}
	case bridge.ErrorCode(err) == bridge.ENOTIMPLEMENTED || bridge.ErrorCode(err) == bridge.ETOOMANY || bridge.ErrorCode(err) == bridge.EFORBIDDEN:
		c.log().Info("command", "command", string(cmd), "switches", ids, "outcome", "not_sent", "error", bridge.ErrorMessage(err), "request_id", c.RequestID)
	default:
		c.log().Warn("command", "command", string(cmd), "switches", ids, "outcome", "not_sent", "error", bridge.ErrorMessage(err), "request_id", c.RequestID)
	}
}

// Handler serves the installation API.
type Handler struct {
	hub    *bridge.Switchboard
	auth   bridge.Authorizer
	router *Router
	logger *slog.Logger
	opts   Options

	limiter      rateLimiter
	streams      streams
	streamer     atomic.Pointer[streamer]
	streamerOnce sync.Once
}

// Options is what a Handler is built with; every field may be left zero.
type Options struct {
	// TokenFailed, when set, is told why a request's token was refused
	// ("missing", "invalid", "forbidden"), for metrics.
	TokenFailed func(reason string)
	// RateLimit caps each installation's requests; DefaultRateLimit when
	// nil, none when it points at a zero RateLimit. Only requests whose
	// token is valid for the installation count: anyone else could use up
	// its requests.
	RateLimit *RateLimit
	// Now is the rate limit's clock; time.Now when nil.
	Now func() time.Time

	// Webhooks is the hub's webhooks; without it the webhook paths are 404.
	Webhooks WebhookService
	// Feed is the hub's change feed, which GET /events streams; without
	// it that path is 404.
	Feed *bridge.Feed
	// StreamsPerInstallation caps each installation's open event streams;
	// DefaultStreamsPerInstallation when 0.
	StreamsPerInstallation int
	// Heartbeat is how often an idle stream sends a comment;
	// DefaultHeartbeat when 0.
	Heartbeat time.Duration
	// AccessGeneration, when set, is the counter that moves with every
	// change that takes access away (access.GrantSource): open streams
	// check their tokens again only when it moved. Without it they are
	// checked at every look.
	AccessGeneration func(ctx context.Context) (int64, error)
	// StreamsChanged and EventSent, when set, hear of streams opened (+1)
	// and closed (-1) and of each event sent on one, for metrics.
	StreamsChanged func(delta int)
	EventSent      func(kind string)
}

// New builds the API for the spec's switches app.
func New(hub *bridge.Switchboard, auth bridge.Authorizer, logger *slog.Logger, opts Options) *Handler {
	r, err := NewRouter(SwitchesApp)
	if err != nil {
		panic(err) // the table is a constant of this package
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.RateLimit == nil {
		d := DefaultRateLimit
		opts.RateLimit = &d
	}
	return &Handler{hub: hub, auth: auth, router: r, logger: logger, opts: opts}
}

// Register adds the installation routes to mux, under the spec's path and
// the original platform's legacy alias, and the API's OpenAPI document.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET "+OpenAPIPath, serveOpenAPI)
	for _, prefix := range []string{wire.InstallationsPrefix, wire.LegacyInstallationsPrefix} {
		mux.Handle(prefix+"{id}/{path...}", h)
		mux.Handle(prefix+"{id}", h)
	}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.PathValue("id")
	path := appPath(r)
	// The hub names every request itself: an X-Request-Id the client sent
	// is not taken, since an app could then give its commands the id of
	// another's, and the audit log would no longer tell them apart.
	rid := NewRequestID()
	w.Header()["X-Request-Id"] = []string{rid}
	status := h.serve(w, r, id, path, rid)
	logLine(h.logger, slog.LevelInfo, "api request", slog.String("method", bridge.Untrusted(r.Method).String()),
		slog.String("path", bridge.Untrusted(path).String()), slog.String("installation", bridge.Untrusted(id).String()), slog.Int("status", status), slog.Float64("duration_seconds", time.Since(start).Seconds()),
		slog.String("request_id", rid))
}

// NewRequestID is a new request id: 16 random bytes in hex, so that ids
// never repeat across runs or hubs.
func NewRequestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logLine is Logger.LogAttrs without the caller's program counter, which
// slog takes for every record with runtime.Callers (a fifth of the cost of
// a line) although no handler of the hub adds the source. For the lines
// written on every request.
func logLine(l *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	ctx := context.Background()
	if !l.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = l.Handler().Handle(ctx, r)
}

// noStore and noSniff are the values of two headers every answer has,
// shared: a header's value is only ever replaced (Header.Set) or appended
// to past its capacity (Header.Add), never written in place.
var (
	noStore = []string{"no-store"}
	noSniff = []string{"nosniff"}
)

// serve answers the request for installation id and app path path (still
// escaped), and returns the status it answered with.
func (h *Handler) serve(w http.ResponseWriter, r *http.Request, id, path, rid string) int {
	hd := w.Header()
	hd["Cache-Control"] = noStore
	// Every answer is JSON or empty; a browser must never sniff it into
	// something it would run.
	hd["X-Content-Type-Options"] = noSniff
	tok, inQuery, problem := bearer.Token(r)
	if problem != nil {
		h.tokenFailed("missing")
		problem.Write(w)
		return problem.Status
	}
	ctx := r.Context()
	if inQuery {
		if h.isStream(r.Method, path) {
			// A stream takes its token in the header only, a legacy
			// app's too: a token in a URL is written down by every
			// proxy and browser history on the way, and a stream's URL
			// lives on in an EventSource's reconnections. Refused
			// before the token is looked at, so the answer tells
			// nothing of the token and counts no use of the app.
			h.tokenFailed("missing")
			bearer.QueryRefused.Write(w)
			return bearer.QueryRefused.Status
		}
		ctx = bearer.FromQuery(ctx)
	}
	g, err := h.auth.Authorize(ctx, tok, id)
	switch bridge.ErrorCode(err) {
	case "":
	case bridge.EUNAUTHORIZED:
		h.tokenFailed("invalid")
		bearer.WriteError(w, http.StatusUnauthorized, "invalid_token", bridge.ErrorMessage(err))
		return http.StatusUnauthorized
	case bridge.EFORBIDDEN:
		h.tokenFailed("forbidden")
		bearer.WriteError(w, http.StatusForbidden, "insufficient_scope", bridge.ErrorMessage(err))
		return http.StatusForbidden
	default:
		return h.writeError(w, err)
	}
	if inQuery && !g.Legacy {
		h.tokenFailed("missing")
		bearer.QueryRefused.Write(w)
		return bearer.QueryRefused.Status
	}
	if err := h.limitRate(w, g.InstallationID); err != nil {
		return h.writeError(w, err)
	}

	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet // net/http drops the body of a HEAD answer
	}
	rt, params, allowed := h.router.Match(method, path)
	if rt == nil && len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		return wire.WriteError(w, http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on "+path, nil)
	}
	if rt == nil {
		return h.writeError(w, bridge.Errorf(bridge.ENOTFOUND, "no app path %s", path))
	}
	for k, v := range params {
		// Variables are matched escaped, so an encoded '/' cannot make one
		// segment look like two; their values are then decoded.
		if params[k], err = url.PathUnescape(v); err != nil {
			return h.writeError(w, bridge.Errorf(bridge.EINVALID, "malformed path segment %q", v))
		}
	}
	// Most routes take no body; do not read one, and do not wait for a
	// large one. The others read theirs, bounded, before they run.
	r.Body = http.MaxBytesReader(w, r.Body, rt.Body)
	var body []byte
	if rt.Body > 0 {
		if body, err = io.ReadAll(r.Body); err != nil {
			return h.writeError(w, bridge.Errorf(bridge.EINVALID, "the body could not be read or is over %d bytes", rt.Body))
		}
	}
	c := &Call{Ctx: r.Context(), Params: params, Grant: g, Switchboard: h.hub, Body: body, Webhooks: h.opts.Webhooks, RequestID: rid, handler: h, installation: id}
	if rt.Stream != nil {
		if r.Method == http.MethodHead {
			// A stream has no end for a HEAD to stop at.
			w.Header().Set("Allow", http.MethodGet)
			return wire.WriteError(w, http.StatusMethodNotAllowed, "a stream is read with GET", nil)
		}
		return h.serveStream(w, r, c, tok, rt.Stream)
	}
	out, err := rt.Handle(c)
	defer c.answered()
	if err != nil {
		return h.writeError(w, err)
	}
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		// Nothing follows a 204: send it now rather than once the log
		// lines are written, which the client need not wait for.
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
		return http.StatusNoContent
	}
	if a, ok := out.(Answer); ok {
		return wire.WriteJSON(w, a.Status, a.Body)
	}
	return wire.WriteJSON(w, http.StatusOK, out)
}

// isStream reports whether method and path name a streaming route (HEAD as
// GET).
func (h *Handler) isStream(method, path string) bool {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	rt, _, _ := h.router.Match(method, path)
	return rt != nil && rt.Stream != nil
}

// appPath is the request's path below the installation URI, still
// escaped: /api/(smart)apps/installations/<id>/<app path>.
func appPath(r *http.Request) string {
	// What follows the fifth '/', with that '/': a part of the path, not
	// a copy of it.
	p := r.URL.EscapedPath()
	at := -1
	for range 5 {
		i := strings.IndexByte(p[at+1:], '/')
		if i < 0 {
			return "/"
		}
		at += 1 + i
	}
	return p[at:]
}

func (h *Handler) tokenFailed(reason string) {
	if h.opts.TokenFailed != nil {
		h.opts.TokenFailed(reason)
	}
}

func (h *Handler) writeError(w http.ResponseWriter, err error) int {
	status := wire.StatusOf(err)
	if status == http.StatusInternalServerError {
		h.logger.Error("api internal error", "err", err)
	}
	var failures []bridge.Failure
	var e *bridge.Error
	if errors.As(err, &e) {
		failures = e.Failures
	}
	wire.SetRetryAfter(w.Header(), err)
	return wire.WriteError(w, status, bridge.ErrorMessage(err), failures)
}

// Options is what the handler was built with.
func (h *Handler) Options() Options { return h.opts }
