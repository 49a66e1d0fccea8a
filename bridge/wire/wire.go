// Package wire is the part of the installation API's contract that both
// roles put on the wire: where an installation lives below base_url, and
// the error body its clients parse. The hub role (bridge/api) serves them;
// the platform role (bridge/oauth) advertises the path in discovery and
// answers discovery's errors with the same body. It also holds the
// security headers of every HTML page the daemon serves (PageHeaders), the
// login pages' and the demo client's alike.
package wire

import (
	"encoding/json"
	"net/http"

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
