// Built without the race detector, as browser_test.go is (chromedp races
// internally); make test runs the TestBrowser tests in a step of their own.

//go:build !race

package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
)

// The console in Chromium where a browser is what is tested: a page of
// another origin that frames the console gets nothing of it; names with
// markup are text in a real page, and run nothing; the webhooks and
// audit log pages, their actions checked in the store and through the
// app's API, checked with axe-core and screenshots.

// TestBrowserConsoleFramed: a page on another loopback origin (same
// site: the owner's cookie goes along) frames the console, its first page
// and its webhooks page. The console answers each framed request with its
// page, and the browser refuses to show it: the frame holds Chromium's
// error page, not the console's document. A frame of a page that allows framing, beside it, shows its
// document, so the check tells the two apart.
func TestBrowserConsoleFramed(t *testing.T) {
	exe := findBrowser(t)
	h := startSecHub(t)
	browser := startBrowserFor(t, exe, consoleTestTimeout)
	p := &consolePage{page: newPage(t, browser), base: h.URL}
	p.openConsole("/console/webhooks", "olivia", secOwnerPW)
	p.noteSecrets()
	if n := p.count("tr[data-webhook]"); n != 2 {
		p.fatalf("the owner's webhooks page shows %d webhooks, want 2", n)
	}

	// The console's first page and its webhooks page, each in a frame,
	// beside a page that may be framed.
	framed := map[string]string{"overview": h.URL + "/console/", "webhooks": h.URL + "/console/webhooks"}
	framer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		if r.URL.Path == "/inner" {
			fmt.Fprint(w, `<!doctype html><title>inner</title><p id="marker">a page that may be framed</p>`)
			return
		}
		fmt.Fprintf(w, `<!doctype html><title>framer</title><iframe id="overview" src=%q></iframe><iframe id="webhooks" src=%q></iframe>`+
			`<iframe id="control" src="/inner"></iframe>`, framed["overview"], framed["webhooks"])
	}))
	t.Cleanup(framer.Close)
	if strings.HasPrefix(framer.URL, h.URL) || !strings.HasPrefix(framer.URL, "http://127.0.0.1:") {
		t.Fatalf("the framing page %s is not another loopback origin than %s", framer.URL, h.URL)
	}

	// What the console answered the frames' requests, by address.
	var mu sync.Mutex
	answered := map[string]*network.Response{}
	if err := chromedp.Listen(p.ctx, func(ev any) {
		if e, ok := ev.(*network.EventResponseReceived); ok && e.Response != nil && e.Type == network.ResourceTypeDocument {
			mu.Lock()
			answered[e.Response.URL] = e.Response
			mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	p.open(framer.URL + "/")

	// The frames have settled once the control shows its marker and the
	// console's frames have left about:blank.
	var frames map[string]*cdp.Frame
	deadline := time.Now().Add(browserStepTimeout)
	for {
		frames = p.childFrames()
		settled := frames["control"] != nil && strings.Contains(p.frameHTML(frames["control"].ID), "a page that may be framed")
		for name := range framed {
			settled = settled && frames[name] != nil && frames[name].URL != "about:blank" && frames[name].URL != ""
		}
		if settled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the frames did not settle: %+v", frames)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for name, u := range framed {
		mu.Lock()
		resp := answered[u]
		mu.Unlock()
		if resp == nil || resp.Status != http.StatusOK {
			t.Fatalf("the console's answer to the framed request for %s: %+v; want its page, 200 (the owner's cookie went along)", u, resp)
		}
		if xfo := fmt.Sprint(resp.Headers["X-Frame-Options"], resp.Headers["x-frame-options"]); !strings.Contains(xfo, "DENY") {
			t.Errorf("the framed answer's X-Frame-Options: %s", xfo)
		}
		f := frames[name]
		if f.URL == u {
			t.Errorf("the frame shows the console (%s)", f.URL)
		}
		if doc := p.frameHTML(f.ID); strings.Contains(doc, "Log out olivia") || strings.Contains(doc, "data-webhook") || strings.Contains(doc, "<h1>Overview") {
			t.Errorf("the console's document is in the frame of %s:\n%.2000s", u, doc)
		}
		t.Logf("the frame of %s holds %s (could not load: %s)", u, f.URL, f.UnreachableURL)
	}
}

// noteSecrets notes the tab's cookies and the CSRF token of its page for
// the scan of the hub's log (logtest), as the HTTP clients of the tests
// note theirs as they pass.
func (p *consolePage) noteSecrets() {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	cookies, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		p.fatalf("the tab's cookies: %v", err)
	}
	for _, c := range cookies.Cookies {
		logtest.NoteSecret(c.Value)
	}
	logtest.NoteSecret(evaluate[string](p.page, `document.querySelector('input[name=csrf]')?.value ?? ""`))
}

// childFrames are the tab's frames below its page, by their element's
// name or id.
func (p *consolePage) childFrames() map[string]*cdp.Frame {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	tree, err := chromedp.Call(ctx, cdppage.GetFrameTree, cdp.Empty{})
	if err != nil {
		p.fatalf("the frame tree: %v", err)
	}
	out := map[string]*cdp.Frame{}
	for _, c := range tree.FrameTree.ChildFrames {
		// The test's frames are told apart by their elements' ids.
		owner, err := chromedp.Call(ctx, dom.GetFrameOwner, dom.GetFrameOwnerParams{FrameID: c.Frame.ID})
		if err != nil {
			continue // gone meanwhile
		}
		node, err := chromedp.Call(ctx, dom.DescribeNode, dom.DescribeNodeParams{BackendNodeID: owner.BackendNodeID})
		if err != nil || node.Node == nil {
			continue
		}
		id := ""
		for i := 0; i+1 < len(node.Node.Attributes); i += 2 {
			if node.Node.Attributes[i] == "id" {
				id = node.Node.Attributes[i+1]
			}
		}
		out[id] = c.Frame
	}
	return out
}

// frameHTML is the document a frame holds, read in a world of the test's
// own in that frame; "" when none can be read.
func (p *consolePage) frameHTML(id cdp.FrameID) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	world, err := chromedp.Call(ctx, cdppage.CreateIsolatedWorld, cdppage.CreateIsolatedWorldParams{FrameID: id, WorldName: "test"})
	if err != nil {
		return ""
	}
	yes := true
	res, err := chromedp.Call(ctx, runtime.Evaluate, runtime.EvaluateParams{Expression: `document.documentElement ? document.documentElement.outerHTML : ""`,
		ContextID: world.ExecutionContextID, ReturnByValue: &yes})
	if err != nil || res.Result == nil {
		return ""
	}
	var s string
	json.Unmarshal(res.Result.Value, &s)
	return s
}

// TestBrowserConsoleHubPages: the webhooks and audit log pages as an
// owner uses them, with names that are markup (a switch's, a user's, an
// app's) shown as text and run nowhere; Disable and Enable checked in the
// store and in the app's API; the audit log filtered by its form and its
// links; every page checked with axe-core, and screenshots.
func TestBrowserConsoleHubPages(t *testing.T) {
	exe := findBrowser(t)
	h := startSecHub(t)
	browser := startBrowserFor(t, exe, consoleTestTimeout)
	ctx := context.Background()
	p := &consolePage{page: newPage(t, browser), base: h.URL}
	dl := p.answerDialogs() // an injected alert() fails the test
	inert := func(where string, names ...string) {
		t.Helper()
		if n := p.count("main script"); n != 0 {
			p.fatalf("%s holds %d script elements", where, n)
		}
		text := p.text("main")
		for _, n := range names {
			if !strings.Contains(text, n) {
				p.fatalf("%s does not show %q as text", where, n)
			}
		}
	}
	apiState := func() string {
		t.Helper()
		a := h.Call(t, http.MethodGet, h.grant.URI+"/webhooks", h.grant.Token.AccessToken)
		var hooks []struct{ ID, State string }
		if err := json.Unmarshal([]byte(a.Body), &hooks); err != nil {
			t.Fatalf("the app's webhooks: %s", a.Body)
		}
		for _, w := range hooks {
			if w.ID == h.hooks[0] {
				return w.State
			}
		}
		return "none"
	}

	p.openConsole("/console/webhooks", "olivia", secOwnerPW)
	p.noteSecrets()
	p.checkPage("webhooks")
	inert("the webhooks page", evilApp, "https://receiver.example/hooks/a")
	row := fmt.Sprintf(`tr[data-webhook=%q]`, h.hooks[0])
	if got := p.text(row + ` [data-field="state"]`); !strings.HasPrefix(got, "active") {
		p.fatalf("the webhook's state reads %q, want active", got)
	}
	if got := p.text(fmt.Sprintf(`tr[data-webhook=%q] [data-field="state"]`, h.hooks[1])); !strings.Contains(got, "disabled") || !strings.Contains(got, "410") {
		p.fatalf("the disabled webhook's state reads %q", got)
	}

	notice, problem := p.submit("disable the webhook", row+` form[action="/console/webhooks/disable"] button`)
	if problem != "" || !strings.Contains(notice, "receiver.example") {
		p.fatalf("disable: notice %q, error %q", notice, problem)
	}
	if w, err := h.HubStore.Webhook(ctx, h.hooks[0]); err != nil || w.DisabledReason != console.OwnerDisabledReason {
		t.Fatalf("after Disable the store has %+v, %v", w, err)
	}
	if got := apiState(); got != "disabled" {
		t.Errorf("after Disable the app's API says %q", got)
	}
	if got := dl.confirmations(); len(got) != 1 || !strings.Contains(got[0], "Disable the webhook to receiver.example") {
		t.Errorf("Disable asked %q, want one confirmation naming the receiver", got)
	}
	if got := p.text(row + ` [data-field="state"]`); !strings.Contains(got, "disabled") || !strings.Contains(got, console.OwnerDisabledReason) {
		p.fatalf("after Disable the page says %q", got)
	}
	p.checkPage("webhooks-disabled")

	notice, problem = p.submit("enable the webhook", row+` form[action="/console/webhooks/enable"] button`)
	if problem != "" || !strings.Contains(notice, "Enabled") {
		p.fatalf("enable: notice %q, error %q", notice, problem)
	}
	if w, err := h.HubStore.Webhook(ctx, h.hooks[0]); err != nil || w.Disabled {
		t.Fatalf("after Enable the store has %+v, %v", w, err)
	}
	if got := apiState(); got != "active" {
		t.Errorf("after Enable the app's API says %q", got)
	}

	p.openConsole("/console/audit", "olivia", secOwnerPW)
	p.checkPage("audit")
	inert("the audit log", evilSwitch, evilUser, evilApp, "console (user olivia)", "console-request-1")
	if n := p.count("main tbody tr"); n != 3 {
		p.fatalf("the audit log shows %d records, want 3", n)
	}
	// Filtered by its form: the hall lamp's commands, the console's.
	p.do("choose the hall lamp", chromedp.SetValue(chromedp.ID("f-switch"), "hall"))
	u := p.follow("show", chromedp.Click(chromedp.CSS(`form.filters button[type=submit]`)))
	if u.Query().Get("switch") != "hall" {
		p.fatalf("the filter form led to %s", u)
	}
	if n, text := p.count("main tbody tr"), p.text("main tbody"); n != 2 || !strings.Contains(text, "console (user olivia)") || strings.Contains(text, "Kitchen") {
		p.fatalf("filtered by the hall lamp, %d records:\n%s", n, text)
	}
	// By an app, through the link of its name: its record alone.
	u = p.follow("click the app", chromedp.Click(chromedp.CSS(`main tbody td[data-label="App"] a`)))
	if u.Query().Get("app") != h.app.ClientID || u.Query().Get("switch") != "hall" {
		p.fatalf("the app's link led to %s", u)
	}
	if n := p.count("main tbody tr"); n != 1 || !strings.Contains(p.text("main tbody"), evilApp) {
		p.fatalf("filtered by the app, %d records:\n%s", n, p.text("main tbody"))
	}
	p.checkPage("audit-filtered")
}
