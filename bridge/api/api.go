// Package api is the hub role's installation API: the app paths below each
// installation's URI (GET /switches, PUT /switches/:command), declared as a
// table of mappings the way the spec's apps declare theirs, behind a bearer
// token check that it asks of a bridge.Authorizer.
package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/bearer"
)

// Call is what a handler gets: the request's context, the path variables,
// the grant of its token and the hub.
type Call struct {
	Ctx    context.Context
	Params map[string]string
	Grant  *bridge.Grant
	Hub    *bridge.Hub
	Logger *slog.Logger // carries the installation id
}

// SwitchesApp is the spec's example app: two rows.
var SwitchesApp = []Mapping{
	{Path: "/switches", Methods: map[string]AppHandler{http.MethodGet: listSwitches}},
	{Path: "/switches/:command", Methods: map[string]AppHandler{http.MethodPut: commandSwitches}},
}

// listSwitches reports {name, value} of every switch the installation was
// granted, from the drivers' caches. A value not known yet is null.
func listSwitches(c *Call) ([]map[string]any, error) {
	states, err := c.Hub.States(c.Grant.SwitchIDs)
	if err != nil {
		return nil, err
	}
	out := make([]map[string]any, 0, len(states))
	for _, s := range states {
		var v any
		if s.State.Value != "" {
			v = string(s.State.Value)
		}
		out = append(out, map[string]any{"name": s.Switch.Name, "value": v})
	}
	return out, nil
}

// commandSwitches runs on or off on every granted switch.
func commandSwitches(c *Call) ([]map[string]any, error) {
	cmd, err := bridge.ParseCommand(c.Params["command"])
	if err != nil {
		return nil, err
	}
	start := time.Now()
	err = c.Hub.Command(c.Ctx, c.Grant.SwitchIDs, cmd)
	logCommand(c, cmd, err, time.Since(start))
	return nil, err
}

// logCommand writes one line per switch a command reached (or was refused
// for), with the installation id from the call's logger.
func logCommand(c *Call, cmd bridge.Command, err error, d time.Duration) {
	failed := map[string]bridge.Failure{}
	var e *bridge.Error
	if errors.As(err, &e) {
		for _, f := range e.Failures {
			failed[f.SwitchID] = f
		}
	}
	for _, id := range c.Grant.SwitchIDs {
		f, bad := failed[id]
		switch {
		case bad:
			c.Logger.Warn("device command", "switch", id, "command", string(cmd), "outcome", f.Reason, "error", f.Message, "duration_seconds", d.Seconds())
		case err != nil && bridge.ErrorCode(err) == bridge.ENOTIMPLEMENTED:
			c.Logger.Info("device command", "switch", id, "command", string(cmd), "outcome", "not_sent", "duration_seconds", d.Seconds())
		case err != nil && bridge.ErrorCode(err) != bridge.EDEVICE:
			c.Logger.Warn("device command", "switch", id, "command", string(cmd), "outcome", "not_sent", "error", bridge.ErrorMessage(err))
		default:
			c.Logger.Info("device command", "switch", id, "command", string(cmd), "outcome", "ok", "duration_seconds", d.Seconds())
		}
	}
}

// Handler serves the installation API.
type Handler struct {
	hub    *bridge.Hub
	auth   bridge.Authorizer
	router *Router
	logger *slog.Logger
	// TokenFailed, when set, is told why a request's token was refused
	// ("missing", "invalid", "forbidden"), for metrics.
	TokenFailed func(reason string)
}

// New builds the API for the spec's switches app.
func New(hub *bridge.Hub, auth bridge.Authorizer, logger *slog.Logger) *Handler {
	r, err := NewRouter(SwitchesApp)
	if err != nil {
		panic(err) // the table is a constant of this package
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{hub: hub, auth: auth, router: r, logger: logger}
}

// Register adds the installation routes to mux, under the spec's path and
// the original platform's legacy alias.
func (h *Handler) Register(mux *http.ServeMux) {
	for _, prefix := range []string{"/api/apps/installations/", "/api/smartapps/installations/"} {
		mux.Handle(prefix+"{id}/{path...}", h)
		mux.Handle(prefix+"{id}", h)
	}
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	id := r.PathValue("id")
	status := h.serve(w, r, id)
	h.logger.Info("api request", "method", r.Method, "path", appPath(r), "installation", id,
		"status", status, "duration_seconds", time.Since(start).Seconds())
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, id string) int {
	w.Header().Set("Cache-Control", "no-store")
	tok, problem := bearer.Token(r)
	if tok == "" {
		h.tokenFailed("missing")
		bearer.WriteError(w, http.StatusUnauthorized, bearer.MissingCode(r), problem)
		return http.StatusUnauthorized
	}
	g, err := h.auth.Authorize(r.Context(), tok, id)
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

	path := appPath(r)
	m, params, ok := h.router.Match(path)
	if !ok {
		return h.writeError(w, bridge.Errorf(bridge.ENOTFOUND, "no app path %s", path))
	}
	for k, v := range params {
		// Variables are matched escaped, so an encoded '/' cannot make one
		// segment look like two; their values are then decoded.
		if params[k], err = url.PathUnescape(v); err != nil {
			return h.writeError(w, bridge.Errorf(bridge.EINVALID, "malformed path segment %q", v))
		}
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet // net/http drops the body of a HEAD answer
	}
	handler, ok := m.Methods[method]
	if !ok {
		w.Header().Set("Allow", m.Allowed())
		return writeJSON(w, http.StatusMethodNotAllowed, appError(http.StatusMethodNotAllowed, "method "+r.Method+" is not allowed on "+m.Path, nil))
	}
	// Commands take no body; do not read one, and do not wait for a large one.
	r.Body = http.MaxBytesReader(w, r.Body, 0)
	out, err := handler(&Call{Ctx: r.Context(), Params: params, Grant: g, Hub: h.hub, Logger: h.logger.With("installation", id)})
	if err != nil {
		return h.writeError(w, err)
	}
	if out == nil {
		w.WriteHeader(http.StatusNoContent)
		return http.StatusNoContent
	}
	return writeJSON(w, http.StatusOK, out)
}

// appPath is the request's path below the installation URI, still
// escaped: /api/(smart)apps/installations/<id>/<app path>.
func appPath(r *http.Request) string {
	parts := strings.SplitN(r.URL.EscapedPath(), "/", 6)
	if len(parts) < 6 {
		return "/"
	}
	return "/" + parts[5]
}

func (h *Handler) tokenFailed(reason string) {
	if h.TokenFailed != nil {
		h.TokenFailed(reason)
	}
}

// statusOf is the one table from domain error codes to HTTP statuses.
var statusOf = map[string]int{
	bridge.EINVALID:        http.StatusBadRequest,
	bridge.EUNAUTHORIZED:   http.StatusUnauthorized,
	bridge.EFORBIDDEN:      http.StatusForbidden,
	bridge.ENOTFOUND:       http.StatusNotFound,
	bridge.ECONFLICT:       http.StatusConflict,
	bridge.ENOTIMPLEMENTED: http.StatusNotImplemented,
	bridge.EDEVICE:         http.StatusBadGateway,
	bridge.EUNAVAILABLE:    http.StatusServiceUnavailable,
}

// StatusOf maps an error to its HTTP status; unknown errors are 500.
func StatusOf(err error) int {
	if s, ok := statusOf[bridge.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ErrorBody is the JSON body of every app error: the original platform's
// shape, plus the failed switches when a command did not reach them all.
type ErrorBody struct {
	Error    bool             `json:"error"`
	Type     string           `json:"type"`
	Message  string           `json:"message"`
	Status   int              `json:"status"`
	Failures []bridge.Failure `json:"failures,omitempty"`
}

func appError(status int, msg string, failures []bridge.Failure) ErrorBody {
	return ErrorBody{Error: true, Type: "SmartAppException", Message: msg, Status: status, Failures: failures}
}

func (h *Handler) writeError(w http.ResponseWriter, err error) int {
	status := StatusOf(err)
	if status == http.StatusInternalServerError {
		h.logger.Error("api internal error", "err", err)
	}
	var failures []bridge.Failure
	var e *bridge.Error
	if errors.As(err, &e) {
		failures = e.Failures
	}
	return writeJSON(w, status, appError(status, bridge.ErrorMessage(err), failures))
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
	return status
}
