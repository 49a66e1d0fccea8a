package daemon_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/bridge/hub/webhook"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
)

// delivery is one request a receiver got.
type delivery struct {
	Header http.Header
	Body   []byte
	Msg    struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
}

func (d delivery) event(t *testing.T) switchEvent {
	t.Helper()
	var e switchEvent
	if err := json.Unmarshal(d.Msg.Data, &e); err != nil {
		t.Fatalf("delivery data %s: %v", d.Msg.Data, err)
	}
	return e
}

// receiver is a webhook receiver on loopback whose answers a test sets:
// "ok" (echo the confirmation's challenge, 204 to events), "down" (503),
// "gone" (410), "hang" (never answer), "refuse" (a confirmation without
// the challenge), "redirect" (302 to another receiver).
type receiver struct {
	URL  string
	t    *testing.T
	stop chan struct{}

	mu   sync.Mutex
	mode string
	got  []delivery
	more chan struct{}
}

func startReceiver(t *testing.T, mode string) *receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{URL: "http://" + ln.Addr().String() + "/hook", t: t, mode: mode, stop: make(chan struct{}), more: make(chan struct{}, 1)}
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		close(r.stop)
		srv.Close()
	})
	return r
}

func (r *receiver) set(mode string) {
	r.mu.Lock()
	r.mode = mode
	r.mu.Unlock()
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	d := delivery{Header: req.Header.Clone(), Body: body}
	json.Unmarshal(body, &d.Msg)
	r.mu.Lock()
	mode := r.mode
	if d.Msg.Type != "webhook.confirm" && (mode == "ok" || mode == "refuse") {
		r.got = append(r.got, d)
		select {
		case r.more <- struct{}{}:
		default:
		}
	}
	r.mu.Unlock()
	switch mode {
	case "down":
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(http.StatusServiceUnavailable)
	case "gone":
		w.WriteHeader(http.StatusGone)
	case "hang":
		select {
		case <-r.stop:
		case <-req.Context().Done():
		}
	case "redirect":
		http.Redirect(w, req, "http://127.0.0.1:9/elsewhere", http.StatusFound)
	case "refuse":
		w.Write([]byte("no"))
	default:
		if d.Msg.Type == "webhook.confirm" {
			var c struct {
				Challenge string `json:"challenge"`
			}
			json.Unmarshal(d.Msg.Data, &c)
			json.NewEncoder(w).Encode(map[string]string{"challenge": c.Challenge})
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// deliveries returns what the receiver got so far.
func (r *receiver) deliveries() []delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]delivery(nil), r.got...)
}

// waitFor waits until the receiver has n deliveries, failing after d.
func (r *receiver) waitFor(n int, d time.Duration) []delivery {
	r.t.Helper()
	deadline := time.After(d)
	for {
		if got := r.deliveries(); len(got) >= n {
			return got
		}
		select {
		case <-r.more:
		case <-deadline:
			r.t.Fatalf("receiver got %d deliveries in %s, want %d", len(r.deliveries()), d, n)
		}
	}
}

// registered is a webhook as POST /webhooks answers it.
type registered struct {
	ID, URL, Secret, State string
	Pending                int
	DisabledReason         string `json:"disabled_reason"`
}

func registerWebhook(t *testing.T, h *daemontest.Harness, g daemontest.Grant, body string) (*registered, *daemontest.Page) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, g.URI+"/webhooks", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+g.Token.AccessToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := &daemontest.Page{Response: resp, Body: string(b)}
	if resp.StatusCode != http.StatusCreated {
		return nil, p
	}
	var w registered
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("POST /webhooks body %s: %v", b, err)
	}
	return &w, p
}

func mustRegister(t *testing.T, h *daemontest.Harness, g daemontest.Grant, url string) *registered {
	t.Helper()
	w, p := registerWebhook(t, h, g, `{"url":"`+url+`"}`)
	if w == nil {
		t.Fatalf("POST /webhooks %s = %d %s", url, p.StatusCode, p.Body)
	}
	return w
}

// hookState is a webhook as the store has it, for polling without using
// up the installation's rate limit.
func hookState(t *testing.T, h *daemontest.Harness, url string) *bridge.Webhook {
	t.Helper()
	ws, err := h.HubStore.Webhooks(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.URL == url {
			return w
		}
	}
	t.Fatalf("no webhook for %s", url)
	return nil
}

func listHooks(t *testing.T, h *daemontest.Harness, g daemontest.Grant) []registered {
	t.Helper()
	p := h.Call(t, http.MethodGet, g.URI+"/webhooks", g.Token.AccessToken)
	if p.StatusCode != http.StatusOK {
		t.Fatalf("GET /webhooks = %d %s", p.StatusCode, p.Body)
	}
	var out []registered
	json.Unmarshal([]byte(p.Body), &out)
	return out
}

// verifier checks signatures with the Standard Webhooks reference library
// from npm.
type verifier struct {
	dir string
}

func newVerifier(t *testing.T) *verifier {
	return &verifier{dir: npmInstall(t, []string{"standardwebhooks@1"}, "standardwebhooks-verify.mjs")}
}

// verify returns the library's verdict on each delivery under secret.
func (v *verifier) verify(t *testing.T, secret string, ds []delivery) []string {
	t.Helper()
	var in bytes.Buffer
	for _, d := range ds {
		line, _ := json.Marshal(map[string]any{"secret": secret, "body": string(d.Body), "headers": map[string]string{
			"webhook-id": d.Header.Get("webhook-id"), "webhook-timestamp": d.Header.Get("webhook-timestamp"),
			"webhook-signature": d.Header.Get("webhook-signature")}})
		in.Write(line)
		in.WriteByte('\n')
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "standardwebhooks-verify.mjs")
	cmd.Dir = v.dir
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("verifier: %v", err)
	}
	var verdicts []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		verdicts = append(verdicts, sc.Text())
	}
	return verdicts
}

// TestWebhooks: a receiver registered (after confirming) gets each change,
// signed so that the Standard Webhooks reference library verifies it; a
// rotated secret and the one before it both verify during the overlap;
// the list shows the webhook without its secret; DELETE ends deliveries.
func TestWebhooks(t *testing.T) {
	v := newVerifier(t)
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen", "hall")
	r := startReceiver(t, "ok")

	w := mustRegister(t, h, g, r.URL)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(w.Secret, "whsec_"))
	if !strings.HasPrefix(w.Secret, "whsec_") || err != nil || len(key) < 24 || w.State != "active" || w.URL != r.URL {
		t.Fatalf("registered %+v: want an active webhook with a whsec_ secret of at least 24 bytes", w)
	}
	if l := listHooks(t, h, g); len(l) != 1 || l[0].ID != w.ID || l[0].Secret != "" {
		t.Errorf("list = %+v, want the webhook without its secret", l)
	}

	h.Command(t, g, "on") // kitchen goes on; hall is on already
	got := r.waitFor(1, 10*time.Second)
	if d := got[0]; d.Msg.Type != "switch.changed" || d.Header.Get("Content-Type") != "application/json" {
		t.Errorf("delivery %s %s", d.Header.Get("Content-Type"), d.Body)
	}
	if e := got[0].event(t); e.ID != "kitchen" || str(e.Value) != "on" || str(e.Previous) != "off" || e.Cause != "api" || e.Name != "Kitchen light" {
		t.Errorf("kitchen's delivery %+v", e)
	}
	for i, verdict := range v.verify(t, w.Secret, got) {
		if verdict != "OK" {
			t.Errorf("delivery %d: the reference library says %s", i, verdict)
		}
	}
	// Tampered: the library refuses it (it does check).
	bad := got[0]
	bad.Body = bytes.Replace(bad.Body, []byte(`"on"`), []byte(`"off"`), 1)
	if verdicts := v.verify(t, w.Secret, []delivery{bad}); verdicts[0] == "OK" {
		t.Error("the reference library accepted a changed body")
	}

	// Rotation: the next deliveries verify with the new secret and, during
	// the overlap, with the old one.
	p := h.Call(t, http.MethodPost, g.URI+"/webhooks/"+w.ID+"/rotate", g.Token.AccessToken)
	var rot struct{ Secret string }
	json.Unmarshal([]byte(p.Body), &rot)
	if p.StatusCode != http.StatusOK || !strings.HasPrefix(rot.Secret, "whsec_") || rot.Secret == w.Secret {
		t.Fatalf("rotate = %d %s", p.StatusCode, p.Body)
	}
	h.Call(t, http.MethodPut, g.URI+"/switches/hall/off", g.Token.AccessToken)
	got = r.waitFor(2, 10*time.Second)
	last := got[1:]
	for _, secret := range []string{rot.Secret, w.Secret} {
		if verdicts := v.verify(t, secret, last); verdicts[0] != "OK" {
			t.Errorf("after rotation, a delivery under %s…: %s", secret[:10], verdicts[0])
		}
	}

	// Deleted: nothing more is sent.
	if p := h.Call(t, http.MethodDelete, g.URI+"/webhooks/"+w.ID, g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %d %s", p.StatusCode, p.Body)
	}
	if p := h.Call(t, http.MethodDelete, g.URI+"/webhooks/"+w.ID, g.Token.AccessToken); p.StatusCode != http.StatusNotFound {
		t.Errorf("DELETE again = %d", p.StatusCode)
	}
	h.Command(t, g, "off")
	time.Sleep(time.Second)
	if n := len(r.deliveries()); n != 2 {
		t.Errorf("%d deliveries after DELETE, want none more than 2", n)
	}
}

// TestWebhookRegistrationRefusals: bad bodies and URLs, a receiver that
// does not confirm, redirects, never answers or is the hub itself: each a
// clear 400, nothing registered, nothing sent.
func TestWebhookRegistrationRefusals(t *testing.T) {
	f := newFixture(t)
	h := f.hub
	g := h.Authorize(t, f.app, "alice", "alice-pw", 1, "kitchen")
	refuse, redirect, hang := startReceiver(t, "refuse"), startReceiver(t, "redirect"), startReceiver(t, "hang")
	for _, c := range []struct{ name, body, want string }{
		{"not JSON", `url=http://x`, "the body must be"},
		{"no url", `{}`, "the body must be"},
		{"unknown field", `{"url":"http://127.0.0.1:9/","x":1}`, "the body must be"},
		{"huge", `{"url":"http://127.0.0.1/` + strings.Repeat("a", 20<<10) + `"}`, "over 8192 bytes"},
		{"long URL", `{"url":"http://127.0.0.1/` + strings.Repeat("a", 3000) + `"}`, "longer than"},
		{"ftp", `{"url":"ftp://127.0.0.1/"}`, "http or https"},
		{"user information", `{"url":"http://u:p@127.0.0.1:9/"}`, "user information"},
		{"no confirmation", `{"url":"` + refuse.URL + `"}`, "the webhook URL did not confirm"},
		{"redirect", `{"url":"` + redirect.URL + `"}`, "the webhook URL did not confirm"},
		{"the hub itself", `{"url":"` + h.URL + `/hook"}`, "the webhook URL is not allowed"},
		{"never answers", `{"url":"` + hang.URL + `"}`, "the webhook URL did not confirm"},
	} {
		if c.name == "never answers" && testing.Short() {
			continue // -short: waits out webhook.Timeout (10 s)
		}
		start := time.Now()
		w, p := registerWebhook(t, h, g, c.body)
		if w != nil || p.StatusCode != http.StatusBadRequest || !strings.Contains(p.Body, c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.name, p.StatusCode, p.Body, c.want)
			continue
		}
		assertErrorBody(t, p, http.StatusBadRequest)
		if d := time.Since(start); d > webhook.Timeout+5*time.Second {
			t.Errorf("%s: answered after %s", c.name, d)
		}
	}
	if l := listHooks(t, h, g); len(l) != 0 {
		t.Errorf("registered after refusals: %+v", l)
	}
	h.Command(t, g, "on")
	time.Sleep(500 * time.Millisecond)
	if n := len(refuse.deliveries()); n != 0 {
		t.Errorf("a receiver that did not confirm got %d deliveries", n)
	}
	// Bounded per installation; the same URL once.
	var ok []*receiver
	for i := range webhook.MaxPerInstallation {
		ok = append(ok, startReceiver(t, "ok"))
		mustRegister(t, h, g, ok[i].URL)
	}
	if _, p := registerWebhook(t, h, g, `{"url":"`+ok[0].URL+`"}`); p.StatusCode != http.StatusConflict {
		t.Errorf("the same URL again: %d %s", p.StatusCode, p.Body)
	}
	if _, p := registerWebhook(t, h, g, `{"url":"`+startReceiver(t, "ok").URL+`"}`); p.StatusCode != http.StatusTooManyRequests {
		t.Errorf("one webhook too many: %d %s", p.StatusCode, p.Body)
	}
}

// withAllow is hubConfig with another webhooks.allow list.
func withAllow(list string) string {
	return strings.Replace(hubConfig, "allow: [public, 127.0.0.1]", "allow: ["+list+"]", 1)
}

// TestWebhookAllowList: webhooks.allow restricts where webhooks may point;
// a set list means exactly its entries (here not even public addresses).
func TestWebhookAllowList(t *testing.T) {
	logs := &logtest.Buffer{}
	h := daemontest.StartWith(t, daemontest.Options{Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Config: withAllow("192.0.2.0/24, receiver.example")})
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")
	r := startReceiver(t, "ok")
	if w, p := registerWebhook(t, h, g, `{"url":"`+r.URL+`"}`); w != nil || !strings.Contains(p.Body, "the webhook URL is not allowed") || strings.Contains(p.Body, "127.0.0.1") {
		t.Errorf("a URL outside webhooks.allow: %d %s", p.StatusCode, p.Body)
	}
	// A name that is not listed is checked by the address it resolves to,
	// when connecting; the client learns only that it did not confirm
	// (naming the address would tell what the name resolves to).
	if w, p := registerWebhook(t, h, g, `{"url":"`+strings.Replace(r.URL, "127.0.0.1", "localhost", 1)+`"}`); w != nil || !strings.Contains(p.Body, "did not confirm") || strings.Contains(p.Body, "127.0.0.1") {
		t.Errorf("a name resolving outside webhooks.allow: %d %s", p.StatusCode, p.Body)
	}
	if n := len(r.deliveries()); n != 0 {
		t.Errorf("the receiver got %d requests", n)
	}
	if !strings.Contains(logs.String(), "refused to connect to a webhook's address") || !strings.Contains(logs.String(), "loopback; not in webhooks.allow") {
		t.Errorf("the hub's log does not say why:\n%s", logs)
	}
}

// TestWebhookDelivery: a receiver down for a while gets, once up, the
// latest state of each switch once (coalesced); a receiver that never
// answers holds up neither commands nor other receivers; 410 disables; a
// receiver that fails for longer than the limit is disabled; the metrics
// count it all.
func TestWebhookDelivery(t *testing.T) {
	h := daemontest.StartWith(t, daemontest.Options{Metrics: true, Config: hubConfig})
	alice := h.AddUser(t, "alice", "alice-pw", 1, 2)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen", "hall")
	h.Webhooks.SetLimits(webhook.Limits{FirstDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond})

	down := startReceiver(t, "ok")
	mustRegister(t, h, g, down.URL)
	hang := startReceiver(t, "ok")
	mustRegister(t, h, g, hang.URL)
	down.set("down")
	hang.set("hang")

	// Flapping while the receiver is down: kitchen on, off, on; hall off.
	for _, c := range []string{"/switches/kitchen/on", "/switches/kitchen/off", "/switches/kitchen/on", "/switches/hall/off"} {
		start := time.Now()
		if p := h.Call(t, http.MethodPut, g.URI+c, g.Token.AccessToken); p.StatusCode != http.StatusNoContent {
			t.Fatalf("PUT %s = %d", c, p.StatusCode)
		}
		// Waiting on the receiver would take webhook.Timeout (10 s); half
		// of it leaves room for a loaded machine.
		if d := time.Since(start); d > webhook.Timeout/2 {
			t.Errorf("PUT %s took %s with a receiver that never answers", c, d)
		}
	}
	waitFor(t, 10*time.Second, "failed attempts", func() bool {
		return sample(scrape(t, h), `switchbridge_webhook_deliveries_total{outcome="failed"}`) >= 2
	})
	if m := scrape(t, h); sample(m, "switchbridge_webhook_outbox_depth") < 2 || sample(m, "switchbridge_webhook_outbox_oldest_age_seconds") <= 0 {
		t.Errorf("outbox metrics:\n%s", grepLines(m, "switchbridge_webhook_outbox"))
	}
	down.set("ok")
	down.waitFor(2, 10*time.Second)
	time.Sleep(500 * time.Millisecond) // nothing more must come
	got := down.deliveries()
	if len(got) != 2 {
		t.Fatalf("%d deliveries after the receiver came back, want 2 (one per switch)", len(got))
	}
	latest := map[string]string{}
	for _, d := range got {
		e := d.event(t)
		latest[e.ID] = str(e.Value)
	}
	if latest["kitchen"] != "on" || latest["hall"] != "off" {
		t.Errorf("coalesced deliveries %v, want kitchen on and hall off", latest)
	}
	// Two webhooks made in one millisecond list in either order: find it.
	l := listHooks(t, h, g)
	if i := slices.IndexFunc(l, func(w registered) bool { return w.URL == down.URL }); i < 0 || l[i].Pending != 0 || l[i].State != "active" {
		t.Errorf("after delivery: %+v", l)
	}

	// 410: disabled, and told so in the list.
	down.set("gone")
	h.Call(t, http.MethodPut, g.URI+"/switches/kitchen/off", g.Token.AccessToken)
	waitFor(t, 10*time.Second, "410 disables", func() bool {
		w := hookState(t, h, down.URL)
		return w.Disabled && strings.Contains(w.DisabledReason, "410")
	})
	for _, w := range listHooks(t, h, g) {
		if w.URL == down.URL && (w.State != "disabled" || !strings.Contains(w.DisabledReason, "410")) {
			t.Errorf("the list shows %+v, want disabled by 410", w)
		}
	}
	// And so does the user's connected apps page, beside the one that
	// still answers.
	page := h.NewBrowser().ConnectedApps(t, "alice", "alice-pw")
	for _, want := range []string{
		`<dd class="webhooks">`, `<span class="url">` + down.URL + `</span>: <span class="status">disabled: `,
		`<span class="url">` + hang.URL + `</span>: <span class="status">`,
	} {
		if !strings.Contains(page.Body, want) {
			t.Errorf("the connected apps page lacks %s:\n%s", want, page.Body)
		}
	}
	// Failing longer than allowed: the hanging receiver is disabled.
	if testing.Short() {
		t.Skip("-short: the rest waits out the hanging receiver's webhook.Timeout (10 s)")
	}
	h.Webhooks.SetLimits(webhook.Limits{FirstDelay: 50 * time.Millisecond, MaxDelay: 200 * time.Millisecond, MaxFailing: time.Millisecond})
	h.Call(t, http.MethodPut, g.URI+"/switches/hall/on", g.Token.AccessToken)
	waitFor(t, 30*time.Second, "failing too long disables", func() bool { return hookState(t, h, hang.URL).Disabled })
	m := scrape(t, h)
	for _, o := range []string{"ok", "gone", "expired"} {
		if sample(m, `switchbridge_webhook_deliveries_total{outcome="`+o+`"}`) < 1 {
			t.Errorf("deliveries_total{outcome=%q} not counted:\n%s", o, grepLines(m, "switchbridge_webhook"))
		}
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestWebhookOutboxSurvivesRestart: deliveries queued while the receiver
// is down are delivered after the hub restarts.
func TestWebhookOutboxSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	h := daemontest.StartWith(t, daemontest.Options{DataDir: dir, Config: hubConfig})
	alice := h.AddUser(t, "alice", "alice-pw", 2)
	app := h.AddApp(t, alice, true, redirect)
	// garage-light has no start-up policy: it comes back as it was.
	g := h.Authorize(t, app, "alice", "alice-pw", 2, "garage-light")
	r := startReceiver(t, "ok")
	mustRegister(t, h, g, r.URL)
	r.set("down")
	h.Command(t, g, "on")
	waitFor(t, 10*time.Second, "queued and tried", func() bool { w := hookState(t, h, r.URL); return w.Pending == 1 && !w.LastFailureAt.IsZero() })
	h.Stop()

	r.set("ok")
	h = daemontest.StartWith(t, daemontest.Options{DataDir: dir, Config: hubConfig})
	got := r.waitFor(1, 30*time.Second)
	if e := got[0].event(t); e.ID != "garage-light" || str(e.Value) != "on" || e.Cause != "api" {
		t.Errorf("delivered after the restart: %s", got[0].Body)
	}
}

// TestWebhooksEndWithTheirInstallation: a change queued for an
// installation that is then removed is never sent, and its webhooks go.
func TestWebhooksEndWithTheirInstallation(t *testing.T) {
	h := daemontest.Start(t, hubConfig)
	alice := h.AddUser(t, "alice", "alice-pw", 1)
	app := h.AddApp(t, alice, true, redirect)
	g := h.Authorize(t, app, "alice", "alice-pw", 1, "kitchen")
	r := startReceiver(t, "ok")
	mustRegister(t, h, g, r.URL)
	r.set("down")
	h.Command(t, g, "on")
	waitFor(t, 10*time.Second, "tried", func() bool { return !hookState(t, h, r.URL).LastFailureAt.IsZero() })
	if err := h.Accounts.Uninstall(context.Background(), g.InstallationID()); err != nil {
		t.Fatal(err)
	}
	r.set("ok")
	waitFor(t, 20*time.Second, "the webhook deleted", func() bool {
		ws, _ := h.HubStore.Webhooks(context.Background(), "")
		return len(ws) == 0
	})
	if n := len(r.deliveries()); n != 0 {
		t.Errorf("%d deliveries for a removed installation", n)
	}
}
