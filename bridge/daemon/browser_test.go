// chromedp has data races of its own between SendKeys and its DOM event
// handling, so this test is built without the race detector; make test runs
// it in a separate step without -race.

//go:build !race

package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/drivers/builtin"
)

// This file drives the hub's login and consent pages and the demo client in
// a real headless Chromium, as a person would: it opens the demo client,
// clicks, types, ticks boxes, and then checks both what the pages say and
// what the hub's switches really did.
//
// It needs a Chromium or Chrome binary on PATH (Debian: apt-get install
// chromium). Without one it skips, except under CI=true, where a missing
// browser is a failure: CI must not pass by testing less.
//
// Set SWITCHBRIDGE_SCREENSHOT_DIR to a directory to keep the screenshots it
// takes (consent.png, demo.png) for a look by eye.

const (
	browserTestTimeout = 60 * time.Second // the whole test, browser start included
	browserStepTimeout = 15 * time.Second // one click, one page load, one wait
)

// browserNames are the executables tried, in order, with exec.LookPath.
var browserNames = []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

const browserTestConfig = `
server:
  listen: 127.0.0.1:0
  metrics_listen: "off"
data_dir: %q
demo:
  user: demo
  password: demo-secret
locations:
  - id: 1
    name: Home
    switches:
      - {id: kitchen, name: Kitchen light, driver: virtual, initial: off}
      - {id: hall, name: Hall lamp, driver: virtual, initial: on}
      - {id: fan, name: Desk fan, driver: virtual, initial: off, delay: 50ms}
      - {id: doorbell, name: Doorbell chime, driver: virtual, initial: off, commands: [on]}
  - id: 2
    name: Garage
    switches:
      - {id: garage-light, name: Garage light, driver: virtual, initial: on}
`

func TestBrowserDemoClient(t *testing.T) {
	exe := findBrowser(t)
	d := startBrowserTestHub(t)
	browser := startBrowser(t, exe)

	t.Run("WrongPasswordThenDeny", func(t *testing.T) {
		p := newPage(t, browser)

		p.open(d.DemoURL)
		u := p.follow("click Connect", chromedp.Click(chromedp.ID("connect")))
		if u.Path != "/oauth/authorize" {
			p.fatalf("Connect led to %s, want the hub's /oauth/authorize", u)
		}
		p.logIn("demo", "not-the-password")

		u = p.location()
		if u.Path != "/oauth/authorize" {
			p.fatalf("after a wrong password the browser is at %s, want the login page at /oauth/authorize", u)
		}
		p.waitVisible(`main .error[role="alert"]`)
		if got := p.text(`main .error[role="alert"]`); got != "Unknown user or wrong password." {
			p.fatalf("login error says %q, want %q", got, "Unknown user or wrong password.")
		}
		p.waitVisible("#username", "#password", "#login")
		if p.count(`[id^="authorize-"]`) != 0 {
			p.fatalf("a wrong password showed the consent page")
		}
		if v := p.value("#password"); v != "" {
			p.fatalf("the password field was filled in again with %q", v)
		}

		// The person tries again with the right password, then changes
		// their mind: Deny takes them back to the app with access_denied.
		p.logIn("demo", "demo-secret")
		p.waitVisible("#authorize-1", "#deny")
		u = p.follow("click Deny", chromedp.Click(chromedp.ID("deny")))
		if u.Path != "/demo/" {
			p.fatalf("Deny led to %s, want the demo client at /demo/", u)
		}
		p.waitVisible("#error", "#connect")
		if got := p.text("#error"); !strings.Contains(got, "access_denied") {
			p.fatalf("after Deny the demo client says %q, want it to mention access_denied", got)
		}
		if p.count("#switches") != 0 {
			p.fatalf("after Deny the demo client shows a switch table")
		}
	})

	t.Run("ConnectAndCommand", func(t *testing.T) {
		// The switches start as configured, so that "unchanged" below
		// means something for each of them.
		before := hubValues(t, d)
		initial := map[string]bridge.Value{"kitchen": bridge.Off, "hall": bridge.On, "fan": bridge.Off, "doorbell": bridge.Off, "garage-light": bridge.On}
		if !maps.Equal(before, initial) {
			t.Fatalf("the hub starts with %v, want %v", before, initial)
		}
		p := newPage(t, browser)

		p.open(d.DemoURL)
		u := p.follow("click Connect", chromedp.Click(chromedp.ID("connect")))
		if u.Path != "/oauth/authorize" {
			p.fatalf("Connect led to %s, want the hub's /oauth/authorize", u)
		}
		p.logIn("demo", "demo-secret")

		// Consent: both of the user's locations are offered with their
		// switches.
		p.waitVisible("#authorize-1", "#authorize-2", "#deny")
		for _, id := range []string{"sw-1-kitchen", "sw-1-hall", "sw-1-fan", "sw-1-doorbell", "sw-2-garage-light"} {
			if p.count("#"+id) != 1 {
				p.fatalf("the consent page has no checkbox #%s", id)
			}
		}
		if got := p.text("main h1"); got != "Allow Demo client?" {
			p.fatalf("consent heading is %q", got)
		}

		// Authorize with nothing ticked: the hub asks for a switch and
		// stays on the consent page.
		u = p.follow("click Authorize with nothing ticked", chromedp.Click(chromedp.ID("authorize-1")))
		if u.Path != "/oauth/authorize" {
			p.fatalf("Authorize with nothing ticked led to %s, want the consent page again", u)
		}
		p.waitVisible(`main .error[role="alert"]`, "#authorize-1")
		if got, want := p.text(`main .error[role="alert"]`), "Select at least one switch the app may control."; got != want {
			p.fatalf("consent error says %q, want %q", got, want)
		}

		// Tick two switches of Home by their labels, as a person would.
		p.do("tick Kitchen light and Hall lamp",
			chromedp.WaitVisible(chromedp.CSS(`label[for="sw-1-kitchen"]`)),
			chromedp.Click(chromedp.CSS(`label[for="sw-1-kitchen"]`)),
			chromedp.Click(chromedp.CSS(`label[for="sw-1-hall"]`)),
		)
		checked := p.checkedBoxes()
		if !slices.Equal(checked, []string{"sw-1-kitchen", "sw-1-hall"}) {
			p.fatalf("ticked boxes are %q, want exactly sw-1-kitchen and sw-1-hall", checked)
		}
		p.screenshot("consent.png")

		u = p.follow("click Authorize for Home", chromedp.Click(chromedp.ID("authorize-1")))
		if u.Path != "/demo/" || u.RawQuery != "" {
			p.fatalf("Authorize ended at %s, want the demo client at /demo/ with no error", u)
		}

		// The demo client shows exactly the granted switches, as they were.
		p.waitVisible("#switches", "#all-on", "#all-off")
		if p.count("#error") != 0 {
			p.fatalf("the demo client shows an error: %q", p.text("#error"))
		}
		p.wantTable("after Authorize", []switchRow{
			{Name: "Kitchen light", Value: "off"},
			{Name: "Hall lamp", Value: "on"},
		})

		u = p.follow("click Turn all on", chromedp.Click(chromedp.ID("all-on")))
		if u.Path != "/demo/" {
			p.fatalf("Turn all on ended at %s", u)
		}
		p.waitVisible("#flash")
		if got := p.text("#flash"); got != "All switches are on." {
			p.fatalf("flash after Turn all on says %q", got)
		}
		p.wantTable("after Turn all on", []switchRow{
			{Name: "Kitchen light", Value: "on"},
			{Name: "Hall lamp", Value: "on"},
		})
		p.screenshot("demo.png")
		wantHub(t, d, before, map[string]bridge.Value{"kitchen": bridge.On, "hall": bridge.On})

		u = p.follow("click Turn all off", chromedp.Click(chromedp.ID("all-off")))
		if u.Path != "/demo/" {
			p.fatalf("Turn all off ended at %s", u)
		}
		p.waitVisible("#flash")
		if got := p.text("#flash"); got != "All switches are off." {
			p.fatalf("flash after Turn all off says %q", got)
		}
		p.wantTable("after Turn all off", []switchRow{
			{Name: "Kitchen light", Value: "off"},
			{Name: "Hall lamp", Value: "off"},
		})
		wantHub(t, d, before, map[string]bridge.Value{"kitchen": bridge.Off, "hall": bridge.Off})

		// Switched elsewhere (another app, the hub itself): the page,
		// following the event stream, shows it without a reload.
		if err := d.Switchboard.Command(context.Background(), []string{"kitchen"}, bridge.CommandOn); err != nil {
			t.Fatal(err)
		}
		p.waitVisible(`td[data-id="kitchen"].on`)
		p.wantTable("after kitchen was switched elsewhere", []switchRow{
			{Name: "Kitchen light", Value: "on"},
			{Name: "Hall lamp", Value: "off"},
		})
	})

	t.Run("SeeOnly", func(t *testing.T) {
		before := hubValues(t, d)
		p := newPage(t, browser)
		p.open(d.DemoURL)
		p.follow("click Connect", chromedp.Click(chromedp.ID("connect")))
		p.logIn("demo", "demo-secret")
		p.waitVisible("#authorize-1")
		// After ConnectAndCommand the page ticks the app's kitchen and
		// hall already; run alone, nothing is ticked.
		for _, id := range []string{"sw-1-kitchen", "sw-1-hall"} {
			if !slices.Contains(p.checkedBoxes(), id) {
				p.do("tick "+id, chromedp.Click(chromedp.CSS(`label[for="`+id+`"]`)))
			}
		}
		p.do("mark Hall lamp see only", chromedp.Click(chromedp.CSS(`label[for="see-1-hall"]`)))
		if got := p.checkedBoxes(); !slices.Equal(got, []string{"sw-1-kitchen", "sw-1-hall", "see-1-hall"}) {
			p.fatalf("ticked boxes are %q, want sw-1-kitchen, sw-1-hall and see-1-hall", got)
		}
		u := p.follow("click Authorize for Home", chromedp.Click(chromedp.ID("authorize-1")))
		if u.Path != "/demo/" || u.RawQuery != "" {
			p.fatalf("Authorize ended at %s, want the demo client at /demo/ with no error", u)
		}
		// Seen: both listed. Not switched: the group command is refused
		// naming hall, and the hub switched nothing.
		p.waitVisible("#switches", "#all-off")
		p.wantTable("after Authorize with hall see-only", []switchRow{
			{Name: "Kitchen light", Value: string(before["kitchen"])},
			{Name: "Hall lamp", Value: string(before["hall"])},
		})
		p.follow("click Turn all off", chromedp.Click(chromedp.ID("all-off")))
		p.waitVisible("#flash")
		if got := p.text("#flash"); !strings.Contains(got, "may see but not switch: hall") {
			p.fatalf("flash after Turn all off says %q, want the hub's refusal naming hall", got)
		}
		wantHub(t, d, before, nil)
	})
}

// findBrowser returns the path of a Chromium or Chrome, or skips the test
// (fails it under CI=true) when there is none.
func findBrowser(t *testing.T) string {
	t.Helper()
	// make test sets this for its qemu-user runs of the Pi targets: the
	// browser checks pages and scripts, which are the same on every CPU,
	// and would only slow the emulated run down.
	if e := os.Getenv("SWITCHBRIDGE_TEST_EMULATED"); e != "" {
		t.Skipf("the browser test does not run under %s", e)
	}
	if testing.Short() {
		t.Skip("-short: starts a browser (make test runs it)")
	}
	for _, name := range browserNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("no headless browser found on PATH (looked for %s); install one, e.g. apt-get install chromium",
		strings.Join(browserNames, ", "))
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: the browser test must run in CI)")
	}
	t.Skip(msg)
	return ""
}

// startBrowserTestHub runs a demo hub on a loopback port until the test ends.
func startBrowserTestHub(t *testing.T) *daemon.Daemon {
	t.Helper()
	cfg, err := config.Load("browser_test.yaml", config.Text(fmt.Sprintf(browserTestConfig, t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	// Scanned for the tests' secrets (the demo user's password among them)
	// once the Cleanup below stopped the hub.
	logtest.NoteSecret("demo-secret")
	d, _ := serveForBrowser(t, cfg, "the browser test's hub")
	if d.DemoURL == "" {
		t.Fatal("the hub has no demo client URL although the config has a demo section")
	}
	return d
}

// serveForBrowser opens and serves a daemon of cfg until the test ends,
// its log (named name) watched for secrets and shown when the test fails.
func serveForBrowser(t *testing.T, cfg *config.Config, name string) (*daemon.Daemon, *logtest.Buffer) {
	t.Helper()
	logs := logtest.Watched(t, name)
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx, cancel := context.WithCancel(context.Background())
	d, err := daemon.Open(ctx, cfg, builtin.Registry(), logger)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, logs.String())
		}
	})
	return d, logs
}

// startBrowser starts one headless browser for the test, bounded by
// browserTestTimeout, and stops it when the test ends.
func startBrowser(t *testing.T, exe string) context.Context {
	t.Helper()
	return startBrowserFor(t, exe, browserTestTimeout)
}

// startBrowserFor is startBrowser for a test that may take timeout.
func startBrowserFor(t *testing.T, exe string, timeout time.Duration) context.Context {
	t.Helper()
	output := &logtest.Buffer{}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox, // tests may run as root, in a container
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 900),
		chromedp.CombinedOutput(output),
		// Loopback only: no proxy, no QUIC, nothing in the background, and
		// any host name other than loopback fails to resolve.
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,PasswordLeakDetection,AutofillServerCommunication"),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("password-store", "basic"),
		// Small /dev/shm in containers makes the renderer crash.
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	timeoutCtx, cancelTimeout := context.WithTimeout(context.Background(), timeout)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(timeoutCtx, opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(func() {
		chromedp.Cancel(ctx) // a graceful close; the allocator kills what is left
		cancel()
		cancelAlloc() // waits until the browser process has exited
		cancelTimeout()
		if t.Failed() {
			t.Logf("browser output (D-Bus complaints left out):\n%s", withoutDBus(output.String()))
		}
	})
	// The first Run starts the browser and lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v\n%s", exe, err, withoutDBus(output.String()))
	}
	return ctx
}

// withoutDBus drops the lines in which a browser without a session bus (a
// container, a CI runner) complains about it: they are noise in a failure.
func withoutDBus(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, "dbus") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// page is one browser tab with its own cookies, and the person's actions on
// it. Each action is bounded by browserStepTimeout; a failure ends the test
// with the page's address and text, to show where the person was.
type page struct {
	t   *testing.T
	ctx context.Context
}

func newPage(t *testing.T, browser context.Context) *page {
	t.Helper()
	// A new browser context is a fresh cookie jar, like a private window.
	ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first Run opens the tab, which then lives as long as the context
	// of that call: ctx itself, not a step's shorter timeout.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("opening a tab: %v", err)
	}
	return &page{t: t, ctx: ctx}
}

func (p *page) fatalf(format string, args ...any) {
	p.t.Helper()
	msg := fmt.Sprintf(format, args...)
	if p.ctx.Err() == nil {
		ctx, cancel := context.WithTimeout(p.ctx, 3*time.Second)
		defer cancel()
		where, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		msg += fmt.Sprintf("\npage %s says:\n%s", where, text)
	}
	p.t.Fatal(msg)
}

func (p *page) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.fatalf("%s: %v", what, err)
	}
}

// open loads url as if typed into the address bar, and wants a 200.
func (p *page) open(url string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(url))
	if err != nil {
		p.fatalf("opening %s: %v", url, err)
	}
	if resp.Status != http.StatusOK {
		p.fatalf("opening %s: HTTP %d", url, resp.Status)
	}
}

// follow runs actions that make the page navigate (a click on a link or a
// submit button), waits until the page they lead to has loaded, after any
// redirects, and returns its address. The page must have answered 200.
func (p *page) follow(what string, actions ...chromedp.Action[chromedp.Void]) *url.URL {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, actions...)
	if err != nil {
		p.fatalf("%s: %v", what, err)
	}
	if resp == nil {
		p.fatalf("%s: the browser reported no response for the page it led to", what)
	}
	if resp.Status != http.StatusOK {
		p.fatalf("%s: the page it led to (%s) answered HTTP %d", what, resp.URL, resp.Status)
	}
	u, err := url.Parse(resp.URL)
	if err != nil {
		p.fatalf("%s: %v", what, err)
	}
	return u
}

// logIn fills in the login form, which must be on the page, and submits it.
func (p *page) logIn(user, password string) {
	p.t.Helper()
	p.waitVisible("#username", "#password", "#login")
	p.do("type the user name and password",
		chromedp.Clear(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), user),
		chromedp.Clear(chromedp.ID("password")),
		chromedp.SendKeys(chromedp.ID("password"), password),
	)
	if got := p.value("#username"); got != user {
		p.fatalf("the user name field holds %q after typing %q", got, user)
	}
	u := p.follow("click Log in", chromedp.Click(chromedp.ID("login")))
	if u.Path != "/oauth/authorize" {
		p.fatalf("Log in led to %s, want back to /oauth/authorize", u)
	}
}

// location is the address the tab shows now.
func (p *page) location() *url.URL {
	p.t.Helper()
	u, err := url.Parse(evaluate[string](p, `location.href`))
	if err != nil {
		p.fatalf("the tab's address: %v", err)
	}
	return u
}

func (p *page) waitVisible(selectors ...string) {
	p.t.Helper()
	var waits []chromedp.Action[chromedp.Void]
	for _, s := range selectors {
		waits = append(waits, chromedp.WaitVisible(chromedp.CSS(s)))
	}
	p.do("wait for "+strings.Join(selectors, ", ")+" to be visible", waits...)
}

func evaluate[T any](p *page, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// count is how many elements match selector now.
func (p *page) count(selector string) int {
	p.t.Helper()
	return evaluate[int](p, fmt.Sprintf(`document.querySelectorAll(%q).length`, selector))
}

// text is the visible text of the first element matching selector, trimmed.
func (p *page) text(selector string) string {
	p.t.Helper()
	return evaluate[string](p, fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? "<none>").trim()`, selector))
}

func (p *page) value(selector string) string {
	p.t.Helper()
	return evaluate[string](p, fmt.Sprintf(`document.querySelector(%q)?.value ?? "<none>"`, selector))
}

func (p *page) checkedBoxes() []string {
	p.t.Helper()
	ids := evaluate[[]string](p, `Array.from(document.querySelectorAll('input[type=checkbox]:checked'), c => c.id)`)
	if ids == nil {
		ids = []string{}
	}
	return ids
}

type switchRow struct {
	Name  string `json:"name"`  // the first cell, as a person reads it
	Value string `json:"value"` // the value cell's text
}

// wantTable checks the demo client's switch table, row by row: the name, the
// value cell's text, its data-switch and its class (which colours it).
func (p *page) wantTable(when string, want []switchRow) {
	p.t.Helper()
	type cell struct {
		switchRow
		Key   string `json:"key"`
		Class string `json:"class"`
	}
	got := evaluate[[]cell](p, `Array.from(document.querySelectorAll('#switches tr'), tr => {
		const td = tr.querySelector('td[data-switch]');
		return {name: tr.cells[0].innerText.trim(), value: td ? td.innerText.trim() : '',
			key: td ? td.dataset.switch : '', class: td ? td.className : ''};
	})`)
	var rows []switchRow
	for _, c := range got {
		rows = append(rows, c.switchRow)
		if c.Key != c.Name || c.Class != c.Value {
			p.fatalf("%s: row %q has data-switch %q and class %q, want %q and %q", when, c.Name, c.Key, c.Class, c.Name, c.Value)
		}
	}
	if !slices.Equal(rows, want) {
		p.fatalf("%s: the switch table shows %+v, want %+v", when, rows, want)
	}
}

// screenshot saves a full-page PNG in the test's temp dir, and also in
// $SWITCHBRIDGE_SCREENSHOT_DIR when that is set.
func (p *page) screenshot(name string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	img, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.fatalf("screenshot %s: %v", name, err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img))
	if err != nil || cfg.Width == 0 || cfg.Height == 0 {
		p.fatalf("screenshot %s is not a usable PNG (%d bytes): %v", name, len(img), err)
	}
	dirs := []string{p.t.TempDir()}
	if d := os.Getenv("SWITCHBRIDGE_SCREENSHOT_DIR"); d != "" {
		dirs = append(dirs, d)
	}
	for _, dir := range dirs {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, img, 0o644); err != nil {
			p.t.Fatal(err)
		}
		p.t.Logf("screenshot: %s (%dx%d)", path, cfg.Width, cfg.Height)
	}
}

// hubValues is the value of every switch of the hub, from the hub itself.
func hubValues(t *testing.T, d *daemon.Daemon) map[string]bridge.Value {
	t.Helper()
	out := map[string]bridge.Value{}
	for _, sw := range d.Switchboard.Switches() {
		out[sw.ID] = sw.Device.State().Value
	}
	if len(out) == 0 {
		t.Fatal("the hub has no switches")
	}
	return out
}

// wantHub checks the hub's own state: the switches in changed have the
// values given, and every other switch still has its value from before.
func wantHub(t *testing.T, d *daemon.Daemon, before, changed map[string]bridge.Value) {
	t.Helper()
	now := hubValues(t, d)
	var errs []error
	for id, was := range before {
		want, ok := changed[id]
		if !ok {
			want = was
		}
		if now[id] != want {
			what := "was not ticked, so must keep"
			if ok {
				what = "must be"
			}
			errs = append(errs, fmt.Errorf("switch %s is %q on the hub; it %s %q", id, now[id], what, want))
		}
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}
