package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// relay is a device that takes commands.
type relay struct {
	mu sync.Mutex
	v  bridge.Value
}

func (r *relay) State() bridge.State {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bridge.State{Value: r.v, Available: true}
}

func (r *relay) Do(_ context.Context, cmd bridge.Command) error {
	r.mu.Lock()
	r.v = cmd.Value()
	r.mu.Unlock()
	return nil
}

// TestCommand: a switch's button sends its command through the
// switchboard as the console's, under the owner's key of the API's rate
// limit; a refusal of the limit switches nothing.
func TestCommand(t *testing.T) {
	var (
		mu     sync.Mutex
		audit  []bridge.AuditRecord
		keys   []string
		refuse bool
	)
	r := &relay{v: bridge.Off}
	sb, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"pump"}}},
		[]*bridge.Switch{{ID: "pump", Name: "Pump", LocationID: 1, Device: r, Confirm: true}},
		bridge.SwitchboardOptions{Persist: func(_ bridge.Value, _ map[string]time.Time, recs []bridge.AuditRecord) error {
			mu.Lock()
			audit = append(audit, recs...)
			mu.Unlock()
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	limit := func(key string) error {
		mu.Lock()
		defer mu.Unlock()
		keys = append(keys, key)
		if refuse {
			return bridge.Errorf(bridge.ETOOMANY, "rate limit exceeded")
		}
		return nil
	}
	gate := &ownerGate{}
	gate.owner.Store(true)
	c := New(Options{Gate: gate, PublicURL: "http://hub.test", Hub: &Hub{Switchboard: sb, Limit: limit}})
	mux := http.NewServeMux()
	c.Register(mux)
	send := func(path string, confirmed bool) *httptest.ResponseRecorder {
		f := url.Values{"csrf": {"token"}}
		if confirmed {
			f.Set("confirmed", "yes")
		}
		req, _ := http.NewRequest(http.MethodPost, "http://hub.test"+path, strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://hub.test")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w
	}
	post := func(path string) int { return send(path, true).Code }

	// The pump asks first (confirm: true): the page's script asks and
	// says so in the form; without it, the hub asks on a page of its own
	// and switches nothing yet.
	if w := send("/console/switches/pump/on", false); w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Switch Pump on?") ||
		!strings.Contains(w.Body.String(), `name="confirmed" value="yes"`) || r.State().Value != bridge.Off {
		t.Fatalf("an unconfirmed command to a confirm: true switch: %d, pump %s, page:\n%s", w.Code, r.State().Value, w.Body)
	}
	if len(audit) != 0 || len(keys) != 0 {
		t.Errorf("asking counted against the limit (%q) or reached the audit log (%+v)", keys, audit)
	}

	if got := post("/console/switches/pump/on"); got != http.StatusSeeOther {
		t.Fatalf("POST on = %d, want 303 back to the page", got)
	}
	if r.State().Value != bridge.On {
		t.Error("the pump is not on")
	}
	if len(audit) != 1 || audit[0].InstallationID != ConsoleInstallation || audit[0].UserID != 1 || audit[0].Command != bridge.CommandOn || audit[0].RequestID == "" {
		t.Errorf("audit records %+v, want one of the console's, by user 1", audit)
	}
	refuse = true
	post("/console/switches/pump/off")
	if r.State().Value != bridge.On {
		t.Error("a command refused by the rate limit switched the pump")
	}
	if len(keys) != 2 || keys[0] != "console:1" || keys[1] != "console:1" {
		t.Errorf("rate limit keys %q, want the owner's, twice", keys)
	}
	if len(audit) != 1 {
		t.Errorf("a command the rate limit refused is in the audit log: %+v", audit)
	}
	for _, path := range []string{"/console/switches/pump/toggle", "/console/switches/nope/on"} {
		if got := post(path); got != http.StatusSeeOther || r.State().Value != bridge.On {
			t.Errorf("POST %s = %d, pump %s; want 303 with a refusal, nothing switched", path, got, r.State().Value)
		}
	}
}
