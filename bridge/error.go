package bridge

import (
	"errors"
	"fmt"
	"time"
)

// Error codes: transport-neutral, each mapped to one HTTP status in one place
// (bridge/hub/api). An error without a code is internal and is never shown to a
// client as is.
const (
	EINVALID        = "invalid"         // bad input from the caller
	EUNAUTHORIZED   = "unauthorized"    // missing, unknown or expired credentials
	EFORBIDDEN      = "forbidden"       // valid credentials, not for this resource
	ENOTFOUND       = "not_found"       // no such thing
	ECONFLICT       = "conflict"        // the thing exists already
	ENOTIMPLEMENTED = "not_implemented" // a switch cannot run the command
	EDEVICE         = "device"          // one or more devices failed or timed out
	EUNAVAILABLE    = "unavailable"     // the hub is shutting down or a dependency is gone
	ETOOMANY        = "too_many"        // a rate limit or a switch's change cap is used up
	EINTERNAL       = "internal"
)

// Error is a domain error with a code and a message fit for the client.
// Failures names the switches that failed a command, for EDEVICE,
// ENOTIMPLEMENTED and ETOOMANY.
type Error struct {
	Code     string
	Message  string
	Failures []Failure
	// NotStored names the switches a command did switch (their devices
	// confirmed) whose new state the hub then failed to store.
	NotStored []string
	// RetryAfter is, for ETOOMANY, how long until the same request can
	// succeed.
	RetryAfter time.Duration
}

// Failure is one switch that did not do what it was told.
type Failure struct {
	SwitchID string `json:"id"`
	Name     string `json:"name"`
	Reason   string `json:"reason"` // FailSeeOnly, FailUnsupported, FailRateLimited, FailTimeout, FailUnavailable or FailError
	Message  string `json:"message"`
}

// Failure reasons. They are bounded so they can label metrics.
const (
	FailSeeOnly     = "see_only" // the installation may see the switch, not switch it: nothing was sent
	FailUnsupported = "unsupported"
	FailRateLimited = "rate_limited" // the switch's change cap is used up: nothing was sent
	FailTimeout     = "timeout"
	FailUnavailable = "unavailable"
	FailError       = "failed"
)

// ErrUnavailable is what a driver returns (wrapped) when it knows the device
// cannot be reached right now: offline by its availability topic, or the
// broker connection is down.
var ErrUnavailable = errors.New("device unavailable")

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

// Errorf builds an *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of err's *Error, EINTERNAL for any other error
// and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the client-safe message of err: the message of its
// *Error, or "internal error" for anything else.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}
