package daemon_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// tsclientPackages are the generator, the client and the compiler of the
// generated client, pinned. openapi-typescript 7 asks for TypeScript 5
// (npm's latest typescript, 7, is another compiler).
var tsclientPackages = []string{"openapi-typescript@7.13.0", "openapi-fetch@0.17.0", "typescript@5.9.3"}

// tscFlags compile the client for Node 20 as an ES module, strictly; its
// types are the generated ones, the DOM's fetch and ES2022 (no
// @types/node: the script declares the little of process it reads).
var tscFlags = []string{"--strict", "--target", "es2022", "--module", "nodenext", "--moduleResolution", "nodenext", "--lib", "es2022,dom"}

// tsclientConfig is hubConfig with the hall lamp allowed one change an
// hour, for a 429 of a switch's change cap.
var tsclientConfig = strings.Replace(hubConfig, "{id: hall, name: Hall lamp, driver: virtual, initial: on}",
	"{id: hall, name: Hall lamp, driver: virtual, initial: on, max_changes: {burst: 1, per: 1h}}", 1)

// tsclientLimit is the installation's rate limit of the test's hub: room
// for the script's calls before it lists until refused.
const tsclientLimit = 12

// tsRead is a single read of a switch by the script: the status, the
// value ("absent" when the answer had no body) and the requests left.
type tsRead struct {
	Status    int     `json:"status"`
	Value     *string `json:"value"`
	Available *bool   `json:"available"`
	Remaining *int    `json:"remaining"`
}

func (r tsRead) String() string {
	return fmt.Sprintf("{status %d, value %v, available %v, remaining %v}", r.Status, deref(r.Value), deref(r.Available), deref(r.Remaining))
}

// tsErrorBody is the script's view of an error body through the
// generated Error type; Other is a body that was not one.
type tsErrorBody struct {
	Error    *bool  `json:"error"`
	Type     string `json:"type"`
	Status   int    `json:"status"`
	Message  string `json:"message"`
	Failures []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		Reason string `json:"reason"`
	} `json:"failures"`
	Other any `json:"other"`
}

// tsRefusal is a refused answer: its status, rate-limit headers and body.
type tsRefusal struct {
	Status     *int        `json:"status"`
	RetryAfter *int        `json:"retryAfter"`
	Limit      *int        `json:"limit"`
	Remaining  *int        `json:"remaining"`
	Body       tsErrorBody `json:"body"`
}

// tsResult is the RESULT line of testdata/interop/tsclient.mts.
type tsResult struct {
	Endpoint struct {
		URL      string `json:"url"`
		BaseURL  string `json:"base_url"`
		URI      string `json:"uri"`
		Location int64  `json:"location"`
		ClientID string `json:"clientId"`
	} `json:"endpoint"`
	Listed []struct {
		ID        string  `json:"id"`
		Name      string  `json:"name"`
		Value     *string `json:"value"`
		Available bool    `json:"available"`
	} `json:"listed"`
	Command struct {
		Status    int    `json:"status"`
		RequestID string `json:"requestId"`
		ReadBack  tsRead `json:"readBack"`
	} `json:"command"`
	NotImplemented struct {
		First  int         `json:"first"`
		Status int         `json:"status"`
		Body   tsErrorBody `json:"body"`
		Before tsRead      `json:"before"`
		After  tsRead      `json:"after"`
	} `json:"notImplemented"`
	ChangeCap struct {
		First int `json:"first"`
		tsRefusal
		After tsRead `json:"after"`
	} `json:"changeCap"`
	RateLimit struct {
		RemainingBefore *int `json:"remainingBefore"`
		Accepted        int  `json:"accepted"`
		tsRefusal
	} `json:"rateLimit"`
}

// A client developer's client, generated from the live hub's document:
// openapi-typescript writes the types from {base_url}/api/openapi.json,
// tsc --strict checks our openapi-fetch script against them (so the
// document and a client's use of it cannot drift apart unseen), and the
// compiled script discovers, lists, commands one switch, reads it back and
// follows a 501 and both kinds of 429 on the hub. The token comes from the
// harness's x/oauth2 flow (the npm interop test covers an npm client's
// own flow).
func TestTSClientGenerated(t *testing.T) {
	dir := npmInstall(t, tsclientPackages, "tsclient.mts")
	h := daemontest.StartWith(t, daemontest.Options{Config: tsclientConfig,
		Server: fmt.Sprintf("  rate_limit: {requests: %d, per: 1h}\n", tsclientLimit)})
	owner := h.AddUser(t, "ann", "ann-pw", 1)
	app := h.AddApp(t, owner, true, redirect)
	g := h.Authorize(t, app, "ann", "ann-pw", 1, "kitchen", "hall", "doorbell")

	generateTypes(t, dir, h.URL+"/api/openapi.json")
	types, err := os.ReadFile(filepath.Join(dir, "openapi.d.ts"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(types), `"/api/apps/installations/{installationId}/switches/{switchId}/{command}"`) {
		t.Fatalf("the generated types have no per-switch command path:\n%.2000s", types)
	}
	if out, err := tsc(t, dir, "--noEmit"); err != nil {
		t.Fatalf("tsc --noEmit --strict: the script does not match the document: %v\n%s", err, out)
	}
	// Checked above; now only written out as tsclient.mjs.
	if out, err := tsc(t, dir, "--noCheck"); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
	r := runTSClient(t, dir, h.URL, g.Token.AccessToken)
	checkTSClient(t, h, g, app, r)

	t.Run("a drifted document fails the type check", func(t *testing.T) {
		// The document as served, without Switch.value: the script reads
		// it, so tsc must refuse the script.
		p := h.Call(t, http.MethodGet, h.URL+"/api/openapi.json", "")
		var doc map[string]any
		if err := json.Unmarshal([]byte(p.Body), &doc); err != nil {
			t.Fatal(err)
		}
		sw := doc["components"].(map[string]any)["schemas"].(map[string]any)["Switch"].(map[string]any)
		delete(sw["properties"].(map[string]any), "value")
		var required []any
		for _, f := range sw["required"].([]any) {
			if f != "value" {
				required = append(required, f)
			}
		}
		sw["required"] = required
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		drifted := filepath.Join(dir, "drifted.json")
		if err := os.WriteFile(drifted, b, 0o600); err != nil {
			t.Fatal(err)
		}
		generateTypes(t, dir, drifted)
		out, err := tsc(t, dir, "--noEmit")
		if err == nil || !strings.Contains(out, "Property 'value' does not exist") {
			t.Errorf("tsc passed the script against a document without Switch.value: %v\n%s", err, out)
		}
	})
}

// checkTSClient checks the script's RESULT field by field against what
// the hub was set up with and what it holds after the script.
func checkTSClient(t *testing.T, h *daemontest.Harness, g daemontest.Grant, app daemontest.App, r tsResult) {
	t.Helper()
	on, off := "on", "off"
	e := r.Endpoint
	if e.URL != "/api/apps/installations/"+g.InstallationID() || e.BaseURL != h.URL || e.URI != g.URI || e.Location != 1 || e.ClientID != app.ClientID {
		t.Errorf("discovery = %+v, want the installation %s at %s, location 1, client %s", e, g.InstallationID(), h.URL, app.ClientID)
	}
	listed := map[string]string{}
	for _, s := range r.Listed {
		listed[s.ID] = fmt.Sprintf("%s=%v available=%v", s.Name, deref(s.Value), s.Available)
	}
	wantListed := map[string]string{
		"kitchen":  "Kitchen light=off available=true",
		"hall":     "Hall lamp=on available=true",
		"doorbell": "Doorbell chime=off available=true",
	}
	if !reflect.DeepEqual(listed, wantListed) || len(r.Listed) != len(wantListed) {
		t.Errorf("listed %v, want %v", listed, wantListed)
	}

	c := r.Command
	if c.Status != http.StatusNoContent || !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(c.RequestID) {
		t.Errorf("PUT kitchen/on = %d with X-Request-Id %q, want 204 and 32 hex digits", c.Status, c.RequestID)
	}
	if c.ReadBack.Status != http.StatusOK || deref(c.ReadBack.Value) != on || c.ReadBack.Available == nil || !*c.ReadBack.Available {
		t.Errorf("kitchen read back = %+v, want 200, on, available", c.ReadBack)
	}
	if v := mustSwitch(t, h, "kitchen").Device.State().Value; v != bridge.On {
		t.Errorf("the kitchen device is %s after the client's on", v)
	}

	n := r.NotImplemented
	if n.First != http.StatusNoContent || n.Status != http.StatusNotImplemented {
		t.Errorf("PUT doorbell/on, doorbell/off = %d, %d, want 204, 501", n.First, n.Status)
	}
	checkErrorBody(t, "the 501", n.Body, http.StatusNotImplemented, "doorbell", "Doorbell chime", "unsupported")
	if n.Before.Status != http.StatusOK || n.After.Status != http.StatusOK || deref(n.Before.Value) != on || deref(n.After.Value) != on {
		t.Errorf("the doorbell before the 501 %+v, after %+v, want both 200 and on", n.Before, n.After)
	}

	cc := r.ChangeCap
	if cc.First != http.StatusNoContent || deref(cc.Status) != http.StatusTooManyRequests {
		t.Errorf("PUT hall/off, hall/on = %d, %v, want 204, 429", cc.First, deref(cc.Status))
	}
	checkRetryAfter(t, "the change cap's 429", cc.RetryAfter)
	checkErrorBody(t, "the change cap's 429", cc.Body, http.StatusTooManyRequests, "hall", "Hall lamp", "rate_limited")
	if cc.After.Status != http.StatusOK || deref(cc.After.Value) != off {
		t.Errorf("the hall lamp after the refused on = %+v, want 200 and off", cc.After)
	}
	if v := mustSwitch(t, h, "hall").Device.State().Value; v != bridge.Off {
		t.Errorf("the hall device is %s after a refused on", v)
	}

	rl := r.RateLimit
	if rl.RemainingBefore == nil || *rl.RemainingBefore < 1 || rl.Accepted != *rl.RemainingBefore {
		t.Errorf("%d lists accepted after X-RateLimit-Remaining %v, want as many as it said (at least one)", rl.Accepted, deref(rl.RemainingBefore))
	}
	if deref(rl.Status) != http.StatusTooManyRequests || deref(rl.Remaining) != 0 || deref(rl.Limit) != tsclientLimit {
		t.Errorf("the list past the limit = %v with X-RateLimit-Remaining %v, Limit %v; want 429, 0, %d", deref(rl.Status), deref(rl.Remaining), deref(rl.Limit), tsclientLimit)
	}
	checkRetryAfter(t, "the rate limit's 429", rl.RetryAfter)
	checkErrorBody(t, "the rate limit's 429", rl.Body, http.StatusTooManyRequests, "", "", "")
}

// checkErrorBody checks an error body read through the generated Error
// type: the original platform's fields, and the one switch it names (none
// when id is empty).
func checkErrorBody(t *testing.T, what string, b tsErrorBody, code int, id, name, reason string) {
	t.Helper()
	if b.Other != nil || b.Error == nil || !*b.Error || b.Type != "SmartAppException" || b.Status != code || b.Message == "" {
		t.Errorf("%s: body %+v, want a SmartAppException with status %d and a message", what, b, code)
	}
	want := 0
	if id != "" {
		want = 1
	}
	if len(b.Failures) != want || want == 1 && (b.Failures[0].ID != id || b.Failures[0].Name != name || b.Failures[0].Reason != reason) {
		t.Errorf("%s: failures %+v, want %d naming %s (%s, %s)", what, b.Failures, want, id, name, reason)
	}
}

// checkRetryAfter checks a Retry-After of the hour-long windows: the
// seconds left of the hour.
func checkRetryAfter(t *testing.T, what string, ra *int) {
	t.Helper()
	if ra == nil || *ra < 3000 || *ra > 3600 {
		t.Errorf("%s: Retry-After %v, want the seconds left of the hour", what, deref(ra))
	}
}

// deref is *p, or the zero value for nil ("<nil>" for a string, to tell
// a null value from an empty one).
func deref[T any](p *T) any {
	if p == nil {
		return "<nil>"
	}
	return *p
}

// generateTypes runs openapi-typescript on the document at src (a URL or
// a file) into dir/openapi.d.ts.
func generateTypes(t *testing.T, dir, src string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "openapi-typescript"), src, "--output", "openapi.d.ts")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("openapi-typescript %s: %v\n%s", src, err, out)
	}
	t.Logf("openapi-typescript: %s", strings.TrimSpace(string(out)))
}

// tsc runs the TypeScript compiler on the script with tscFlags and more,
// and returns its output.
func tsc(t *testing.T, dir string, more ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := append(append(append([]string{}, tscFlags...), more...), "tsclient.mts")
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "tsc"), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// runTSClient runs the compiled script against the hub with a token and
// returns its RESULT.
func runTSClient(t *testing.T, dir, hub, token string) tsResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "tsclient.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HUB="+hub, "TOKEN="+token)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var (
		r     tsResult
		found bool
	)
	lines := bufio.NewScanner(io.LimitReader(stdout, 1<<20))
	for lines.Scan() {
		line := lines.Text()
		if rest, ok := strings.CutPrefix(line, "RESULT "); ok {
			d := json.NewDecoder(strings.NewReader(rest))
			d.DisallowUnknownFields()
			if err := d.Decode(&r); err != nil {
				t.Fatalf("tsclient: %v in %s", err, line)
			}
			found = true
			t.Logf("tsclient: %s", line)
		} else {
			t.Logf("tsclient: %s", line)
		}
	}
	if err := cmd.Wait(); err != nil || !found {
		t.Fatalf("tsclient: %v, RESULT found: %v\n%s", err, found, stderr.String())
	}
	return r
}
