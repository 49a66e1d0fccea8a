package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// The console's hub pages over a gate and records of the tests' own: the
// webhooks page and its actions, the audit log page and its filters,
// and the checks every page and form gets (owner only, CSRF token, same
// origin, the headers). bridge/daemon's console tests run them against a
// real daemon and browser.

const (
	testOrigin = "http://hub.test"
	ownerCSRF  = "csrf-token-of-the-owners-session"
)

// testGate knows two sessions by cookie: an owner's and a user's who is
// not one.
type testGate struct {
	mu     sync.Mutex
	notice string
	ok     bool
}

var (
	olivia = &bridge.User{ID: 1, Name: "olivia", Owner: true}
	nico   = &bridge.User{ID: 2, Name: "nico"}
)

func (g *testGate) Visitor(r *http.Request) (*Visitor, error) {
	c, err := r.Cookie("sid")
	if err != nil {
		return nil, nil
	}
	switch c.Value {
	case "owner":
		return &Visitor{User: olivia, CSRF: ownerCSRF}, nil
	case "user":
		return &Visitor{User: nico, CSRF: "csrf-token-of-nicos-session"}, nil
	}
	return nil, nil
}

func (g *testGate) Login(w http.ResponseWriter, r *http.Request, next string, v *Visitor, msg string) {
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(`<form id="login" action="/oauth/login"><input name="next" value="` + next + `"></form>`))
}

func (g *testGate) SetNotice(w http.ResponseWriter, r *http.Request, msg string, notice bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.notice, g.ok = msg, notice
}

func (g *testGate) TakeNotice(w http.ResponseWriter, r *http.Request) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	msg, ok := g.notice, g.ok
	g.notice, g.ok = "", false
	return msg, ok
}

func (g *testGate) Logout(w http.ResponseWriter, r *http.Request, v *Visitor) error {
	http.SetCookie(w, &http.Cookie{Name: "sid", Value: "", MaxAge: -1})
	return nil
}

// testRecords are the hub's records in memory.
type testRecords struct {
	mu       sync.Mutex
	hooks    []*bridge.Webhook
	audit    []bridge.AuditRecord
	filters  []bridge.AuditFilter
	ins      map[string]*bridge.Installation
	live     map[string]bool
	apps     map[string]*bridge.App
	users    map[int64]*bridge.User
	disabled []string
}

func (r *testRecords) Audit(_ context.Context, f bridge.AuditFilter) ([]bridge.AuditRecord, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.filters = append(r.filters, f)
	var out []bridge.AuditRecord
	for _, a := range r.audit {
		if (f.ClientID == "" || a.ClientID == f.ClientID) && (f.SwitchID == "" || a.SwitchID == f.SwitchID) && !a.At.Before(f.Since) {
			out = append(out, a)
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[:f.Limit]
	}
	return out, nil
}

func (r *testRecords) Webhooks(_ context.Context, installationID string) ([]*bridge.Webhook, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*bridge.Webhook
	for _, w := range r.hooks {
		if installationID == "" || w.InstallationID == installationID {
			c := *w
			out = append(out, &c)
		}
	}
	return out, nil
}

func (r *testRecords) hook(id string) *bridge.Webhook {
	for _, w := range r.hooks {
		if w.ID == id {
			return w
		}
	}
	return nil
}

func (r *testRecords) DisableWebhook(_ context.Context, id, reason string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.hook(id); w != nil {
		w.Disabled, w.DisabledReason, w.Pending = true, reason, 0
	}
	r.disabled = append(r.disabled, id)
	return nil
}

func (r *testRecords) EnableWebhook(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.hook(id)
	switch {
	case w == nil:
		return bridge.Errorf(bridge.ENOTFOUND, "no webhook %q", id)
	case !w.Disabled:
		return bridge.Errorf(bridge.ECONFLICT, "webhook %s is not disabled", id)
	}
	w.Disabled, w.DisabledReason, w.FailingSince = false, "", time.Time{}
	return nil
}

func (r *testRecords) Installation(_ context.Context, id string) (*bridge.Installation, error) {
	if in, ok := r.ins[id]; ok {
		return in, nil
	}
	return nil, bridge.Errorf(bridge.ENOTFOUND, "no installation %q", id)
}

func (r *testRecords) GrantLive(_ context.Context, id string, _ time.Time) (bool, error) {
	return r.live[id], nil
}

func (r *testRecords) App(_ context.Context, clientID string) (*bridge.App, error) {
	if a, ok := r.apps[clientID]; ok {
		return a, nil
	}
	return nil, bridge.Errorf(bridge.ENOTFOUND, "no app %q", clientID)
}

func (r *testRecords) UserByID(_ context.Context, id int64) (*bridge.User, error) {
	if u, ok := r.users[id]; ok {
		return u, nil
	}
	return nil, bridge.Errorf(bridge.ENOTFOUND, "no user %d", id)
}

type stubDevice struct{}

func (stubDevice) State() bridge.State { return bridge.State{} }

// evil is markup in a name: every page must show it as text.
const evil = `<script>alert(1)</script>`

// now is the tests' clock.
var now = time.Date(2030, 5, 1, 12, 0, 0, 0, time.UTC)

type fixture struct {
	c        *Console
	mux      *http.ServeMux
	gate     *testGate
	rec      *testRecords
	observed []string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	sb, err := bridge.NewSwitchboard([]bridge.Location{{ID: 1, Name: "Home", Switches: []string{"kitchen", "hall"}}},
		[]*bridge.Switch{{ID: "kitchen", Name: "Kitchen " + evil, LocationID: 1, Device: stubDevice{}}, {ID: "hall", Name: "Hall lamp", LocationID: 1, Device: stubDevice{}}},
		bridge.SwitchboardOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{gate: &testGate{}, rec: &testRecords{
		ins: map[string]*bridge.Installation{
			"inst-1": {ID: "inst-1", ClientID: "app-1", UserID: 1, LocationID: 1},
			"inst-2": {ID: "inst-2", ClientID: "app-2", UserID: 2, LocationID: 1},
		},
		live:  map[string]bool{"inst-1": true},
		apps:  map[string]*bridge.App{"app-1": {ClientID: "app-1", Name: "Lights " + evil}},
		users: map[int64]*bridge.User{1: olivia, 3: {ID: 3, Name: "mallory" + evil}},
	}}
	f.c = New(Options{Gate: f.gate, PublicURL: testOrigin + "/", Now: func() time.Time { return now },
		Hub:     &Hub{Switchboard: sb, Records: f.rec},
		Observe: func(action, result string) { f.observed = append(f.observed, action+" "+result) }})
	f.mux = http.NewServeMux()
	f.c.Register(f.mux)
	return f
}

// get fetches a console path with a session: "owner", "user" or "" for
// none.
func (f *fixture) get(path, session string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, testOrigin+path, nil)
	if session != "" {
		r.AddCookie(&http.Cookie{Name: "sid", Value: session})
	}
	w := httptest.NewRecorder()
	f.mux.ServeHTTP(w, r)
	return w
}

// post sends a form as a page of origin would.
func (f *fixture) post(path, session, origin string, form url.Values) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, testOrigin+path, strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		r.Header.Set("Origin", origin)
	}
	if session != "" {
		r.AddCookie(&http.Cookie{Name: "sid", Value: session})
	}
	w := httptest.NewRecorder()
	f.mux.ServeHTTP(w, r)
	return w
}

// checkHeaders: the policy of every console answer.
func checkHeaders(t *testing.T, what string, w *httptest.ResponseRecorder) {
	t.Helper()
	csp := w.Header().Get("Content-Security-Policy")
	if strings.Contains(csp, "unsafe-") || !strings.Contains(csp, "frame-ancestors 'none'") || w.Header().Get("X-Frame-Options") != "DENY" {
		t.Errorf("%s: policy %q, X-Frame-Options %q", what, csp, w.Header().Get("X-Frame-Options"))
	}
}

// checkInert: markup in a name is text on the page.
func checkInert(t *testing.T, what, body string) {
	t.Helper()
	if strings.Contains(body, evil) {
		t.Errorf("%s holds the markup of a name as markup", what)
	}
}

func TestWebhooksPage(t *testing.T) {
	f := newFixture(t)
	failing := now.Add(-time.Hour)
	f.rec.hooks = []*bridge.Webhook{
		{ID: "wh_active", InstallationID: "inst-1", URL: "https://receiver.example/a", LastSuccessAt: now.Add(-time.Minute)},
		{ID: "wh_failing", InstallationID: "inst-1", URL: "https://receiver.example/b?k=" + evil, FailingSince: failing, LastFailureAt: now, LastError: "answered 500", Pending: 3},
		{ID: "wh_disabled", InstallationID: "inst-1", URL: "https://gone.example/c", Disabled: true, DisabledReason: "the receiver answered 410 Gone"},
		{ID: "wh_suspended", InstallationID: "inst-2", URL: "https://receiver.example/d", FailingSince: failing},
		{ID: "wh_orphan", InstallationID: "inst-gone", URL: "https://receiver.example/e"},
	}
	w := f.get("/console/webhooks", "owner")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /console/webhooks: %d\n%s", w.Code, w.Body)
	}
	checkHeaders(t, "the webhooks page", w)
	body := w.Body.String()
	checkInert(t, "the webhooks page", body)
	rows := map[string]string{}
	for _, part := range strings.Split(body, `<tr data-webhook="`)[1:] {
		id, rest, _ := strings.Cut(part, `"`)
		rows[id], _, _ = strings.Cut(rest, "</tr>")
	}
	for id, want := range map[string][]string{
		"wh_active":    {"<strong>active</strong>", "Lights &lt;script&gt;", "(app-1)", "https://receiver.example/a", `action="/console/webhooks/disable"`},
		"wh_failing":   {`class="problem">failing</strong>`, "since " + When(failing), "answered 500", ">3<", `action="/console/webhooks/disable"`},
		"wh_disabled":  {`>disabled</strong>`, "410 Gone", `action="/console/webhooks/enable"`},
		"wh_suspended": {`>suspended</strong>`, "no live token", ">app-2<", `action="/console/webhooks/disable"`}, // suspended before failing; an app without a name
		"wh_orphan":    {"installation gone"},
	} {
		row, ok := rows[id]
		if !ok {
			t.Errorf("no row for %s", id)
			continue
		}
		for _, s := range want {
			if !strings.Contains(row, s) {
				t.Errorf("%s's row lacks %q:\n%s", id, s, row)
			}
		}
	}
	if strings.Contains(rows["wh_disabled"], "webhooks/disable") || strings.Contains(rows["wh_active"], "webhooks/enable") {
		t.Error("a row offers the action its state does not take")
	}

	f.rec.hooks = nil
	if body := f.get("/console/webhooks", "owner").Body.String(); !strings.Contains(body, "No webhooks") {
		t.Errorf("without webhooks the page says:\n%s", body)
	}
}

func TestWebhookDisableAndEnable(t *testing.T) {
	f := newFixture(t)
	f.rec.hooks = []*bridge.Webhook{{ID: "wh_1", InstallationID: "inst-1", URL: "https://receiver.example/secret-path", Pending: 2}}
	form := func(id string) url.Values { return url.Values{"csrf": {ownerCSRF}, "id": {id}} }
	state := func() *bridge.Webhook { return f.rec.hook("wh_1") }

	w := f.post("/console/webhooks/disable", "owner", testOrigin, form("wh_1"))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console/webhooks" {
		t.Fatalf("disable: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if s := state(); !s.Disabled || s.DisabledReason != OwnerDisabledReason {
		t.Fatalf("after disable: %+v", s)
	}
	if !f.gate.ok || !strings.Contains(f.gate.notice, "receiver.example") || strings.Contains(f.gate.notice, "secret-path") {
		t.Errorf("disable's notice: %q (ok %v); want the host, never the path", f.gate.notice, f.gate.ok)
	}
	f.gate.TakeNotice(nil, nil)

	// Again: refused, the reason kept.
	f.post("/console/webhooks/disable", "owner", testOrigin, form("wh_1"))
	if f.gate.ok || !strings.Contains(f.gate.notice, "disabled already") || len(f.rec.disabled) != 1 {
		t.Errorf("disabling twice: notice %q (ok %v), %d disables", f.gate.notice, f.gate.ok, len(f.rec.disabled))
	}
	f.post("/console/webhooks/disable", "owner", testOrigin, form("wh_none"))
	if f.gate.ok || !strings.Contains(f.gate.notice, "no webhook wh_none") {
		t.Errorf("disabling none: notice %q (ok %v)", f.gate.notice, f.gate.ok)
	}

	w = f.post("/console/webhooks/enable", "owner", testOrigin, form("wh_1"))
	if w.Code != http.StatusSeeOther || state().Disabled || !f.gate.ok {
		t.Fatalf("enable: %d, %+v, notice %q", w.Code, state(), f.gate.notice)
	}
	f.post("/console/webhooks/enable", "owner", testOrigin, form("wh_1"))
	if f.gate.ok || !strings.Contains(f.gate.notice, "not disabled") {
		t.Errorf("enabling an enabled webhook: notice %q (ok %v)", f.gate.notice, f.gate.ok)
	}
	want := []string{"webhook_disable ok", "webhook_disable refused", "webhook_disable refused", "webhook_enable ok", "webhook_enable refused"}
	if !slices.Equal(f.observed, want) {
		t.Errorf("counted %q, want %q", f.observed, want)
	}

	// Refused before anything is read: no CSRF token, a wrong one,
	// another origin, a user who is not an owner, no session.
	f.observed = nil
	for _, c := range []struct {
		what, session, origin string
		form                  url.Values
	}{
		{"no token", "owner", testOrigin, url.Values{"id": {"wh_1"}}},
		{"a wrong token", "owner", testOrigin, url.Values{"id": {"wh_1"}, "csrf": {ownerCSRF + "x"}}},
		{"another session's token", "owner", testOrigin, url.Values{"id": {"wh_1"}, "csrf": {"csrf-token-of-nicos-session"}}},
		{"another origin", "owner", "http://evil.example", form("wh_1")},
		{"origin null", "owner", "null", form("wh_1")},
		{"not an owner", "user", testOrigin, url.Values{"id": {"wh_1"}, "csrf": {"csrf-token-of-nicos-session"}}},
		{"no session", "", testOrigin, form("wh_1")},
	} {
		w := f.post("/console/webhooks/disable", c.session, c.origin, c.form)
		if w.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", c.what, w.Code)
		}
		checkHeaders(t, c.what, w)
		if state().Disabled || len(f.rec.disabled) != 1 {
			t.Fatalf("%s: the webhook was disabled", c.what)
		}
	}
	if len(f.observed) != 7 || slices.ContainsFunc(f.observed, func(s string) bool { return s != "console refused" }) {
		t.Errorf("the refusals were counted as %q", f.observed)
	}
}

func TestAuditPage(t *testing.T) {
	f := newFixture(t)
	at := now.Add(-time.Minute)
	f.rec.audit = []bridge.AuditRecord{
		{At: at, InstallationID: "console", UserID: 1, SwitchID: "kitchen", Command: "on", Outcome: bridge.OutcomeOK, Latency: 300 * time.Microsecond, RequestID: "req-console"},
		{At: at.Add(-time.Second), InstallationID: "inst-1", ClientID: "app-1", UserID: 3, SwitchID: "hall", Command: "off", Outcome: bridge.FailTimeout, Latency: 5 * time.Second, RequestID: "req-timeout"},
		{At: at.Add(-2 * time.Second), InstallationID: "inst-9", ClientID: "app-gone" + evil, UserID: 99, SwitchID: "gone-switch", Command: "on", Outcome: bridge.OutcomeNotSent, RequestID: "req-notsent"},
	}
	w := f.get("/console/audit", "owner")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /console/audit: %d\n%s", w.Code, w.Body)
	}
	checkHeaders(t, "the audit page", w)
	body := w.Body.String()
	checkInert(t, "the audit page", body)
	for _, s := range []string{
		"console (user olivia)", "req-console", "&lt;1ms", "done",
		"Lights &lt;script&gt;alert(1)&lt;/script&gt; (app-1)", "mallory&lt;script&gt;", "Hall lamp (hall)", "no answer from the device", "5s",
		"user 99", "gone-switch", "not sent (refused for another switch)", `data-label="Latency">-<`,
		`href="/console/audit?switch=hall"`, `href="/console/audit?app=app-1"`, `<option value="kitchen">Home: Kitchen &lt;script&gt;`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("the audit page lacks %q", s)
		}
	}
	if i, j, k := strings.Index(body, "req-console"), strings.Index(body, "req-timeout"), strings.Index(body, "req-notsent"); i < 0 || i > j || j > k {
		t.Error("the records are not newest first")
	}
	if f.rec.filters[0] != (bridge.AuditFilter{Limit: DefaultAuditLimit + 1}) {
		t.Errorf("unfiltered, the page asked for %+v", f.rec.filters[0])
	}
	if strings.Contains(body, `rel="next"`) {
		t.Error("a More link with all records shown")
	}

	// Filtered as switchbridge audit filters: exact ids, a duration of
	// the past.
	f.rec.filters = nil
	body = f.get("/console/audit?app=app-1&switch=hall&since=24h", "owner").Body.String()
	want := bridge.AuditFilter{ClientID: "app-1", SwitchID: "hall", Since: now.Add(-24 * time.Hour), Limit: DefaultAuditLimit + 1}
	if got := f.rec.filters[0]; got != want {
		t.Errorf("filtered, the page asked for %+v, want %+v", got, want)
	}
	if strings.Contains(body, "req-console") || !strings.Contains(body, "req-timeout") || !strings.Contains(body, `<option value="24h" selected>`) ||
		!strings.Contains(body, `value="app-1"`) || !strings.Contains(body, `<option value="hall" selected>`) {
		t.Errorf("the filtered page:\n%s", body)
	}
	// A link keeps the other filters.
	if !strings.Contains(body, `href="/console/audit?app=app-1&amp;since=24h&amp;switch=hall"`) {
		t.Errorf("the switch link of a filtered page does not keep its filters:\n%s", body)
	}

	for _, q := range []string{"since=-1h", "since=yesterday", "limit=0", "limit=x"} {
		w := f.get("/console/audit?"+q, "owner")
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), `class="error"`) || !strings.Contains(w.Body.String(), `action="/console/audit"`) ||
			strings.Contains(w.Body.String(), "<table") {
			t.Errorf("?%s: %d, want 400 with the form and what is wrong, and no records", q, w.Code)
		}
	}
	body = f.get("/console/audit?since=90m&switch=removed", "owner").Body.String()
	if !strings.Contains(body, `<option value="90m" selected>the last 90m`) || !strings.Contains(body, `<option value="removed" selected>`) {
		t.Errorf("a time or switch the form does not offer is not kept selected:\n%s", body)
	}
}

func TestAuditMore(t *testing.T) {
	f := newFixture(t)
	for i := range 250 {
		f.rec.audit = append(f.rec.audit, bridge.AuditRecord{At: now.Add(-time.Duration(i) * time.Second), InstallationID: "inst-1", ClientID: "app-1",
			SwitchID: "kitchen", Command: "on", Outcome: "ok", RequestID: "r" + strings.Repeat("x", i%3)})
	}
	count := func(body string) int { return strings.Count(body, `<td data-label="Time">`) }
	body := f.get("/console/audit?switch=kitchen", "owner").Body.String()
	if n := count(body); n != DefaultAuditLimit {
		t.Fatalf("%d records shown, want %d", n, DefaultAuditLimit)
	}
	if !strings.Contains(body, `href="/console/audit?limit=200&amp;switch=kitchen" rel="next">More: up to 100 older records`) {
		t.Fatalf("no More link to 200 records with the filter:\n%s", body)
	}
	body = f.get("/console/audit?limit=200&switch=kitchen", "owner").Body.String()
	if n := count(body); n != 200 || !strings.Contains(body, "limit=400") {
		t.Errorf("the More page: %d records, More link %v", n, strings.Contains(body, "limit=400"))
	}
	body = f.get("/console/audit?limit=400", "owner").Body.String()
	if n := count(body); n != 250 || strings.Contains(body, `rel="next"`) {
		t.Errorf("all records: %d, a More link %v", n, strings.Contains(body, `rel="next"`))
	}
	f.rec.filters = nil
	body = f.get("/console/audit?limit=5000", "owner").Body.String()
	if f.rec.filters[0].Limit != MaxAuditLimit+1 || strings.Contains(body, `rel="next"`) {
		t.Errorf("a limit above the most: asked for %d, More %v", f.rec.filters[0].Limit, strings.Contains(body, `rel="next"`))
	}
	f.rec.audit = append(f.rec.audit, make([]bridge.AuditRecord, MaxAuditLimit)...)
	body = f.get("/console/audit?limit=5000", "owner").Body.String()
	if count(body) != MaxAuditLimit || strings.Contains(body, `rel="next"`) || !strings.Contains(body, "switchbridge audit --limit 0") {
		t.Errorf("at the most: %d records, a More link %v", count(body), strings.Contains(body, `rel="next"`))
	}
}

// TestHubPagesOwnersOnly: the hub pages answer the login form to no one
// logged in and 403 to a user who is not an owner, with the console's
// headers.
func TestHubPagesOwnersOnly(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"/console/webhooks", "/console/audit", "/console/audit?app=app-1"} {
		w := f.get(p, "")
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `id="login"`) || !strings.Contains(w.Body.String(), `value="`+p+`"`) {
			t.Errorf("GET %s without a login: %d\n%s", p, w.Code, w.Body)
		}
		checkHeaders(t, p+" without a login", w)
		w = f.get(p, "user")
		if w.Code != http.StatusForbidden || strings.Contains(w.Body.String(), "<table") {
			t.Errorf("GET %s as a user who is not an owner: %d", p, w.Code)
		}
		checkHeaders(t, p+" as a user who is not an owner", w)
	}
	if len(f.rec.filters) != 0 {
		t.Error("the audit log was read for someone who is not an owner")
	}
}
