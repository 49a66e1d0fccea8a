// Package wire is the part of the installation API's contract that both
// roles put on the wire: where an installation lives below base_url, and
// the error body its clients parse. The hub role (bridge/hub/api) serves them;
// the platform role (bridge/platform/oauth) advertises the path in discovery and
// answers discovery's errors with the same body. It also holds the
// security headers of every HTML page the daemon serves (PageHeaders), the
// login pages' and the demo client's alike.
package wire

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// InstallationsPrefix is the path below base_url where installations live,
// and LegacyInstallationsPrefix the original platform's alias for it.
const (
	InstallationsPrefix       = "/api/apps/installations/"
	LegacyInstallationsPrefix = "/api/smartapps/installations/"
)

// InstallationPath is the path of an installation below base_url.
func InstallationPath(id string) string { return InstallationsPrefix + id }

// ErrorBody is the JSON body of every error the installation API and
// discovery answer with: the original platform's shape, plus the failed
// switches when a command did not reach them all.
type ErrorBody struct {
	Error    bool             `json:"error"`
	Type     string           `json:"type"`
	Message  string           `json:"message"`
	Status   int              `json:"status"`
	Failures []bridge.Failure `json:"failures,omitempty"`
}

// Error is the body of an error with an HTTP status and a message fit for
// the client.
func Error(status int, msg string, failures []bridge.Failure) ErrorBody {
	return ErrorBody{Error: true, Type: "SmartAppException", Message: msg, Status: status, Failures: failures}
}

// WriteJSON answers with v as JSON and returns the status, for logging.
func WriteJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
	return status
}

// WriteError answers with Error(status, msg, failures).
func WriteError(w http.ResponseWriter, status int, msg string, failures []bridge.Failure) int {
	return WriteJSON(w, status, Error(status, msg, failures))
}

// statusOf is the one table from the domain's error codes to HTTP
// statuses, for every answer the daemon gives: the installation API's,
// discovery's, the OAuth endpoints' and pages', and the hub link's.
var statusOf = map[string]int{
	bridge.EINVALID:        http.StatusBadRequest,
	bridge.EUNAUTHORIZED:   http.StatusUnauthorized,
	bridge.EFORBIDDEN:      http.StatusForbidden,
	bridge.ENOTFOUND:       http.StatusNotFound,
	bridge.ECONFLICT:       http.StatusConflict,
	bridge.ENOTIMPLEMENTED: http.StatusNotImplemented,
	bridge.EDEVICE:         http.StatusBadGateway,
	bridge.EUNAVAILABLE:    http.StatusServiceUnavailable,
	bridge.ETOOMANY:        http.StatusTooManyRequests,
}

// StatusOf maps an error to its HTTP status; an error without a code is
// internal: 500.
func StatusOf(err error) int {
	if s, ok := statusOf[bridge.ErrorCode(err)]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// SetRetryAfter sets Retry-After, in whole seconds rounded up, when err
// says how long until the same request can succeed: a rate limit used up,
// a database that cannot be reached for the moment.
func SetRetryAfter(h http.Header, err error) {
	var e *bridge.Error
	if errors.As(err, &e) && e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(max(int64((e.RetryAfter+time.Second-1)/time.Second), 1), 10))
	}
}

// WriteErrorOf answers with err: its status by StatusOf, Retry-After when
// it says when to call again, and its client-safe message (an internal
// error's is "internal error"; the caller logs the error itself).
func WriteErrorOf(w http.ResponseWriter, err error) int {
	SetRetryAfter(w.Header(), err)
	return WriteError(w, StatusOf(err), bridge.ErrorMessage(err), nil)
}
