package wire_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

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
