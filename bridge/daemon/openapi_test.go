package daemon_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// The running hub serves the repository's OpenAPI document without a
// token, and the harness's validator saw the answers of the calls made
// through it.
func TestOpenAPIDocumentServed(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	file, err := os.ReadFile("../hub/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	p := h.Call(t, http.MethodGet, h.URL+"/api/openapi.json", "")
	if p.StatusCode != http.StatusOK || !bytes.Equal([]byte(p.Body), file) {
		t.Fatalf("GET /api/openapi.json = %d with %d bytes, want 200 and bridge/hub/api/openapi.json (%d bytes)", p.StatusCode, len(p.Body), len(file))
	}
	if ct, cc := p.Header.Get("Content-Type"), p.Header.Get("Cache-Control"); ct != "application/json" || !strings.Contains(cc, "max-age=") {
		t.Errorf("Content-Type %q, Cache-Control %q", ct, cc)
	}
	owner := h.AddUser(t, "ann", "ann-pw", 1)
	app := h.AddApp(t, owner, true, redirect)
	g := h.Authorize(t, app, "ann", "ann-pw", 1, "kitchen")
	before := h.Contract.Checked()
	h.List(t, g)
	h.Command(t, g, "on")
	if got := h.Contract.Checked() - before; got != 2 {
		t.Errorf("the validator checked %d answers of 2 API calls", got)
	}
}

// The validator fails what the document does not describe: an unknown
// status, a missing field, a field of the wrong type or not documented,
// an error body of another shape, an event of the stream. A hub stands in that answers each of them.
func TestOpenAPIContractCatchesWrongAnswers(t *testing.T) {
	answers := map[string]struct {
		status int
		body   string
	}{
		"/api/apps/installations/i1/switches":         {http.StatusOK, `[{"id":"k","name":"K","value":"on","available":true}]`}, // conforms
		"/api/apps/installations/i1/switches/k":       {http.StatusOK, `{"id":"k","name":"K","value":"dim","available":true}`},
		"/api/apps/installations/i1/switches/m":       {http.StatusOK, `{"id":"m","name":"M","value":"on"}`},
		"/api/apps/installations/i1/switches/n":       {http.StatusTeapot, `{"error":true,"type":"SmartAppException","message":"x","status":418}`},
		"/api/apps/installations/i1/switches/o":       {http.StatusNotFound, `{"message":"no such switch"}`},
		"/api/apps/installations/i1/webhooks":         {http.StatusOK, `[{"id":"w","url":"https://x.example","state":"broken","created_at":"2026-01-01T00:00:00Z","last_success_at":null,"last_failure_at":null,"pending":0}]`},
		"/api/apps/installations/i1/switches/p":       {http.StatusOK, `{"id":"p","name":"P","value":null,"available":true,"power":"12W"}`},
		"/api/apps/installations/i1/switches/q":       {http.StatusOK, `{"id":"q","name":"Q","value":"on","available":true,"owner":"bob"}`},
		"/api/apps/installations/i1/switches/on/then": {http.StatusOK, `{}`}, // not a documented path: not checked
		// A conforming snapshot, then a change with a cause the document
		// does not know.
		"/api/apps/installations/i1/events": {http.StatusOK, "retry: 2000\n\nid: 1\nevent: snapshot\ndata: [{\"id\":\"k\",\"name\":\"K\",\"value\":null,\"available\":false}]\n\n: heartbeat\n\n" +
			"id: 2\nevent: switch\ndata: {\"id\":\"k\",\"name\":\"K\",\"value\":\"on\",\"previous\":null,\"available\":true,\"at\":\"2026-01-01T00:00:00Z\",\"cause\":\"magic\"}\n\n"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/events") {
			w.Header().Set("Content-Type", "text/event-stream")
		} else {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(a.status)
		w.Write([]byte(a.body))
	}))
	defer srv.Close()
	c, err := daemontest.NewContract(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: c.Transport(nil)}
	wrong := 0
	for path := range answers {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer t")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	problems := c.Problems()
	for _, bad := range []string{"/switches/k:", "/switches/m:", "/switches/n:", "/switches/o:", "/webhooks:", "/switches/p:", "/switches/q:", "/events: a switch event"} {
		found := false
		for _, p := range problems {
			if strings.Contains(p, bad) {
				found = true
			}
		}
		if !found {
			t.Errorf("the answer to %s passed: %q", bad, problems)
		} else {
			wrong++
		}
	}
	for _, p := range problems {
		if strings.Contains(p, "/switches:") || strings.Contains(p, "/then") {
			t.Errorf("a conforming or undocumented answer failed: %s", p)
		}
	}
	if len(problems) != wrong {
		t.Errorf("%d problems for %d wrong answers: %q", len(problems), wrong, problems)
	}
	if c.Checked() != len(answers)-1 {
		t.Errorf("checked %d answers, want %d", c.Checked(), len(answers)-1)
	}
}

// redoclyCLI is the linter the document is checked with, pinned.
const redoclyCLI = "@redocly/cli@2.77.0"

// Redocly's linter, with its strict rules (every warning an error), passes
// the document: a linter not ours, so the document is not judged only by
// the library the tests validate with. operation-4xx-response is skipped:
// the metadata and this document are always there, and a 4xx documented
// for them would be one the hub never answers.
func TestOpenAPIRedoclyLint(t *testing.T) {
	dir := npmInstall(t, []string{redoclyCLI})
	doc, err := filepath.Abs("../hub/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "node_modules", ".bin", "redocly"), "lint",
		"--extends=recommended-strict", "--skip-rule=operation-4xx-response", doc)
	cmd.Dir = dir
	// No telemetry, no update check: the test stays on loopback.
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redocly lint: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "valid") {
		t.Fatalf("redocly lint said nothing of the document:\n%s", out)
	}
}
