package daemontest

// API calls: discovery and the installation API, with a bearer token.

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// Endpoints calls discovery with a token.
func (h *Harness) Endpoints(tb testing.TB, token string) []oauth.Endpoint {
	tb.Helper()
	resp := h.Call(tb, http.MethodGet, h.URL+"/api/apps/endpoints", token)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("discovery answered %d: %s", resp.StatusCode, resp.Body)
	}
	var eps []oauth.Endpoint
	if err := json.Unmarshal([]byte(resp.Body), &eps); err != nil {
		tb.Fatal(err)
	}
	return eps
}

// Call makes one API request with a bearer token ("" for none).
func (h *Harness) Call(tb testing.TB, method, u, token string) *Page {
	tb.Helper()
	if token != "" {
		token = "Bearer " + token
	}
	return h.CallAuth(tb, method, u, token)
}

// CallAuth makes one API request with an Authorization header ("" for
// none).
func (h *Harness) CallAuth(tb testing.TB, method, u, authorization string) *Page {
	tb.Helper()
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := h.Client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	return readPage(tb, resp)
}

// Switch is one entry of GET /switches.
type Switch struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Value     *string `json:"value"`
	Available bool    `json:"available"`
	// LastSeen is absent (nil) for a device the hub never heard from.
	LastSeen *time.Time `json:"last_seen"`
}

// List calls GET <uri>/switches and decodes it.
func (h *Harness) List(tb testing.TB, g Grant) []Switch {
	tb.Helper()
	p := h.Call(tb, http.MethodGet, g.URI+"/switches", g.Token.AccessToken)
	if p.StatusCode != http.StatusOK {
		tb.Fatalf("GET /switches answered %d: %s", p.StatusCode, p.Body)
	}
	var out []Switch
	if err := json.Unmarshal([]byte(p.Body), &out); err != nil {
		tb.Fatalf("GET /switches body %q: %v", p.Body, err)
	}
	return out
}

// Command calls PUT <uri>/switches/<cmd> and returns the answer.
func (h *Harness) Command(tb testing.TB, g Grant, cmd string) *Page {
	tb.Helper()
	return h.Call(tb, http.MethodPut, g.URI+"/switches/"+cmd, g.Token.AccessToken)
}
