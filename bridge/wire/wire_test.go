package wire_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

func TestInstallationPath(t *testing.T) {
	if got, want := wire.InstallationPath("abc"), "/api/apps/installations/abc"; got != want {
		t.Errorf("InstallationPath = %q, want %q (the spec's url)", got, want)
	}
	if !strings.HasPrefix(wire.InstallationPath("abc"), wire.InstallationsPrefix) {
		t.Error("the path is not below the prefix the API is served under")
	}
}

// TestErrorBody pins the original platform's error shape, which clients
// parse, for both the API and discovery.
func TestErrorBody(t *testing.T) {
	for _, c := range []struct {
		status   int
		msg      string
		failures []bridge.Failure
		want     string
	}{
		{http.StatusNotFound, "no such thing", nil,
			`{"error":true,"type":"SmartAppException","message":"no such thing","status":404}`},
		{http.StatusBadGateway, "one failed", []bridge.Failure{{SwitchID: "lamp", Name: "Lamp", Reason: bridge.FailTimeout, Message: "late"}},
			`{"error":true,"type":"SmartAppException","message":"one failed","status":502,"failures":[{"id":"lamp","name":"Lamp","reason":"timeout","message":"late"}]}`},
	} {
		rec := httptest.NewRecorder()
		if got := wire.WriteError(rec, c.status, c.msg, c.failures); got != c.status {
			t.Errorf("WriteError returned %d, want %d", got, c.status)
		}
		if rec.Code != c.status || rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
		}
		if got := strings.TrimSpace(rec.Body.String()); got != c.want {
			t.Errorf("body\n got %s\nwant %s", got, c.want)
		}
	}
}

// Every answer's status comes from one table: an error's code, found
// through wrapping; an error without one is 500 and says nothing more.
// Retry-After comes with an error that says when to call again, in whole
// seconds rounded up.
func TestWriteErrorOf(t *testing.T) {
	for _, c := range []struct {
		err        error
		status     int
		retryAfter string
		msg        string
	}{
		{errors.New("disk on fire"), 500, "", "internal error"},
		{bridge.Errorf(bridge.ENOTFOUND, "no such thing"), 404, "", "no such thing"},
		{fmt.Errorf("reading: %w", &bridge.Error{Code: bridge.EUNAVAILABLE, Message: "the database is away", RetryAfter: 1500 * time.Millisecond}),
			503, "2", "the database is away"},
		{&bridge.Error{Code: bridge.ETOOMANY, Message: "slow down", RetryAfter: time.Millisecond}, 429, "1", "slow down"},
	} {
		w := httptest.NewRecorder()
		if got := wire.WriteErrorOf(w, c.err); got != c.status || w.Code != c.status {
			t.Errorf("%v: status %d (returned %d), want %d", c.err, w.Code, got, c.status)
		}
		if got := w.Header().Get("Retry-After"); got != c.retryAfter {
			t.Errorf("%v: Retry-After %q, want %q", c.err, got, c.retryAfter)
		}
		if !strings.Contains(w.Body.String(), `"message":"`+c.msg+`"`) {
			t.Errorf("%v: body %s, want the message %q", c.err, w.Body, c.msg)
		}
	}
}
