// Built without the race detector, as browser_test.go is (chromedp races
// internally); make test runs the TestBrowser tests in a step of their own.

//go:build !race

package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/daemon"
	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
)

// The owner's console (bridge/platform/console) in a real headless
// Chromium against a real daemon: each action through its page, its
// effect checked through the admin service, the API or the switchboard;
// axe-core on every page; a screenshot of every page at 360 and 1280 px
// wide, in a directory the test prints and leaves for a person to look at.

// consoleTestTimeout bounds one console test, the browser's start
// included: many pages, each loaded twice for its screenshots.
const consoleTestTimeout = 4 * time.Minute

const consoleTestConfig = `
server:
  listen: 127.0.0.1:0
  metrics_listen: "off"
data_dir: %q
locations:
  - id: 1
    name: Home
    switches:
      - {id: kitchen, name: Kitchen light, driver: virtual, initial: off}
      - {id: hall, name: Hall lamp, driver: virtual, initial: on}
  - id: 2
    name: Garage
    switches:
      - {id: garage-light, name: Garage light, driver: virtual, initial: on}
`

// Passwords of the console tests' users: olivia is an owner, nico is not.
const (
	ownerPassword = "olivia-pw-1"
	otherPassword = "nico-pw-1"
)

// consoleHub is a single box for the console tests, with an owner and a
// user who is not one.
type consoleHub struct {
	*daemon.Daemon
	logs *logtest.Buffer
}

func startConsoleHub(t *testing.T, configText string) *consoleHub {
	t.Helper()
	cfg, err := config.Load("console_test.yaml", config.Text(fmt.Sprintf(configText, t.TempDir())))
	if err != nil {
		t.Fatal(err)
	}
	return startConsoleHubWith(t, cfg)
}

// startConsoleHubWith is startConsoleHub for a config already loaded.
func startConsoleHubWith(t *testing.T, cfg *config.Config) *consoleHub {
	t.Helper()
	logtest.NoteSecret(ownerPassword)
	logtest.NoteSecret(otherPassword)
	d, logs := serveForBrowser(t, cfg, "the console test's hub")
	a := d.Platform.Admin
	a.PasswordCost = 4 // bcrypt.MinCost: the tests log in many times
	if _, err := a.AddUser(context.Background(), "olivia", ownerPassword, []int64{1, 2}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddUser(context.Background(), "nico", otherPassword, []int64{1}, false); err != nil {
		t.Fatal(err)
	}
	return &consoleHub{Daemon: d, logs: logs}
}

// screenshotDir is where the console tests' screenshots go: one
// directory for the whole run, kept after it (its path is printed), or
// $SWITCHBRIDGE_SCREENSHOT_DIR.
var screenshotDir = sync.OnceValues(func() (string, error) {
	if d := os.Getenv("SWITCHBRIDGE_SCREENSHOT_DIR"); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	return os.MkdirTemp("", "switchbridge-console-screenshots-")
})

// consolePage is a tab of the console.
type consolePage struct {
	*page
	base string // the daemon's URL
}

func newConsolePage(t *testing.T, browser context.Context, h *consoleHub) *consolePage {
	return &consolePage{page: newPage(t, browser), base: strings.TrimRight(h.PublicURL(), "/")}
}

// openConsole opens a console path and logs in as user when the login
// form shows; the page must then be path, answered 200.
func (p *consolePage) openConsole(path, user, password string) {
	p.t.Helper()
	status := p.navigate(p.base + path)
	if p.count("#login") > 0 {
		p.waitVisible("#username", "#password", "#login")
		p.do("type the user name and password",
			chromedp.SendKeys(chromedp.ID("username"), user),
			chromedp.SendKeys(chromedp.ID("password"), password))
		u := p.follow("click Log in", chromedp.Click(chromedp.ID("login")))
		if u.Path != path {
			p.fatalf("logging in at %s led to %s", path, u)
		}
		return
	}
	if status != http.StatusOK {
		p.fatalf("opening %s: HTTP %d", path, status)
	}
}

// navigate loads url and returns its status, whatever it is.
func (p *consolePage) navigate(u string) int64 {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(u))
	if err != nil {
		p.fatalf("opening %s: %v", u, err)
	}
	return resp.Status
}

// submit clicks a submit button, which must lead to a console page
// answered 200 (after the redirect of a POST), and returns the notice or
// error the page shows.
func (p *consolePage) submit(what, selector string) (notice, problem string) {
	p.t.Helper()
	p.follow(what, chromedp.Click(chromedp.CSS(selector)))
	return p.optText("main .notice"), p.optText("main .error")
}

// optText is the text of the first element matching selector, "" when
// none does.
func (p *consolePage) optText(selector string) string {
	p.t.Helper()
	return evaluate[string](p.page, fmt.Sprintf(`(document.querySelector(%q)?.innerText ?? "").trim()`, selector))
}

// axeVersion is the axe-core release the accessibility checks run.
const axeVersion = "4.10.3"

var axeSource struct {
	once sync.Once
	src  string
}

// axe returns axe-core's script, installed by npm once per test binary.
func axe(t *testing.T) string {
	t.Helper()
	axeSource.once.Do(func() {
		dir := npmInstall(t, []string{"axe-core@" + axeVersion})
		b, err := os.ReadFile(filepath.Join(dir, "node_modules", "axe-core", "axe.min.js"))
		if err != nil {
			t.Fatal(err)
		}
		axeSource.src = string(b)
	})
	if axeSource.src == "" {
		t.Fatal("axe-core was not installed by an earlier test of this run")
	}
	return axeSource.src
}

type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target []string `json:"target"`
	} `json:"nodes"`
}

// checkPage runs axe-core on the page as it is and fails on a serious or
// critical violation; then takes its screenshots at 360 and 1280 px.
// The page's own Content-Security-Policy does not stop the check: the
// DevTools protocol evaluates it, as a person's browser extension would.
func (p *consolePage) checkPage(name string) {
	p.t.Helper()
	src := axe(p.t)
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](src+";0")); err != nil {
		p.fatalf("loading axe-core into %s: %v", name, err)
	}
	res, err := chromedp.Run(ctx, chromedp.Evaluate[[]axeViolation](`axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations)`,
		chromedp.EvalAwaitPromise))
	if err != nil {
		p.fatalf("running axe-core on %s: %v", name, err)
	}
	for _, v := range res {
		if v.Impact == "serious" || v.Impact == "critical" {
			b, _ := json.Marshal(v.Nodes)
			p.t.Errorf("axe-core on %s: %s (%s): %s at %s", name, v.ID, v.Impact, v.Help, b)
		}
	}
	p.screenshots(name)
}

// screenshots saves the page at a phone's width and a desk's.
func (p *consolePage) screenshots(name string) {
	p.t.Helper()
	dir, err := screenshotDir()
	if err != nil {
		p.t.Fatal(err)
	}
	for _, width := range []int64{360, 1280} {
		ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
		var img []byte
		err := chromedp.Do(ctx, chromedp.EmulateViewport(width, 800))
		if err == nil {
			img, err = chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG; below, JPEG
		}
		cancel()
		if err != nil {
			p.fatalf("screenshot of %s at %d px: %v", name, width, err)
		}
		path := filepath.Join(dir, fmt.Sprintf("%s-%d.png", name, width))
		if err := os.WriteFile(path, img, 0o644); err != nil {
			p.t.Fatal(err)
		}
		p.t.Logf("screenshot: %s", path)
	}
	ctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
	defer cancel()
	chromedp.Do(ctx, chromedp.EmulateReset())
}

// dialogs answers the tab's JavaScript dialogs: a confirm() of a form
// marked data-confirm is accepted (the person said yes), and counted;
// any other dialog (an alert an injected script would open) is refused
// and reported as a failure of the test.
type dialogs struct {
	mu        sync.Mutex
	confirmed []string
	unwanted  []string
}

func (p *consolePage) answerDialogs() *dialogs {
	p.t.Helper()
	d := &dialogs{}
	err := chromedp.Listen(p.ctx, func(ev any) {
		e, ok := ev.(*cdppage.EventJavascriptDialogOpening)
		if !ok {
			return
		}
		accept := e.Type == cdppage.DialogTypeConfirm
		d.mu.Lock()
		if accept {
			d.confirmed = append(d.confirmed, e.Message)
		} else {
			d.unwanted = append(d.unwanted, string(e.Type)+": "+e.Message)
		}
		d.mu.Unlock()
		// Not from the listener itself: a command there would wait for
		// the listener.
		go chromedp.Call(p.ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: accept})
	})
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.unwanted) > 0 {
			p.t.Errorf("the page opened dialogs no form asked for (an injected script?): %q", d.unwanted)
		}
	})
	return d
}

func (d *dialogs) confirmations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.confirmed)
}

// TestBrowserConsoleUsers: an owner adds, changes and deletes a user at
// the console's users page; one who is not an owner gets 403; a name
// with markup in it is shown as text, never run.
func TestBrowserConsoleUsers(t *testing.T) {
	exe := findBrowser(t)
	h := startConsoleHub(t, consoleTestConfig)
	browser := startBrowserFor(t, exe, consoleTestTimeout)
	ctx := context.Background()

	t.Run("NotAnOwner", func(t *testing.T) {
		p := newConsolePage(t, browser, h)
		p.navigate(p.base + "/console/users")
		p.waitVisible("#username", "#password", "#login")
		p.do("type nico's login", chromedp.SendKeys(chromedp.ID("username"), "nico"), chromedp.SendKeys(chromedp.ID("password"), otherPassword))
		sctx, cancel := context.WithTimeout(p.ctx, browserStepTimeout)
		defer cancel()
		resp, err := chromedp.RunResponse(sctx, chromedp.Click(chromedp.ID("login")))
		if err != nil {
			p.fatalf("log in: %v", err)
		}
		if resp.Status != http.StatusForbidden {
			p.fatalf("a user who is not an owner got HTTP %d from the console, want 403", resp.Status)
		}
		if got := p.optText("main .error"); !strings.Contains(got, "is not one") {
			p.fatalf("the 403 page says %q, want it to say nico is not an owner", got)
		}
		p.checkPage("forbidden")
	})

	t.Run("Owner", func(t *testing.T) {
		p := newConsolePage(t, browser, h)
		dl := p.answerDialogs()
		p.openConsole("/console/", "olivia", ownerPassword)
		if got := p.text("main h1"); got != "Overview" {
			p.fatalf("the console's first page is titled %q, want Overview", got)
		}
		p.checkPage("overview")

		p.openConsole("/console/users", "olivia", ownerPassword)
		p.checkPage("users")
		const evil = `mallory<script>alert(1)</script>`
		p.do("fill in a new user",
			chromedp.SendKeys(chromedp.ID("new-name"), evil),
			chromedp.SendKeys(chromedp.ID("new-password"), "mallory-pw-1"),
			chromedp.Click(chromedp.ID("loc-1")))
		notice, problem := p.submit("add the user", `form[action="/console/users/add"] button[type=submit]`)
		if problem != "" || !strings.Contains(notice, "Added "+evil) {
			p.fatalf("adding a user: notice %q, error %q", notice, problem)
		}
		u, err := h.Accounts.UserByName(ctx, evil)
		if err != nil {
			t.Fatalf("the user the console added is not in the store: %v", err)
		}
		if u.Owner || !slices.Equal(u.Locations, []int64{1}) {
			t.Errorf("the added user: owner %v, locations %v; want not an owner, in location 1", u.Owner, u.Locations)
		}
		if n := p.count("main script"); n != 0 {
			p.fatalf("the users page holds %d script elements after a user with markup in its name was added", n)
		}
		if !strings.Contains(p.text("main table"), evil) {
			p.fatalf("the users table does not show the name %q as text", evil)
		}

		notice, problem = p.submit("make the user an owner", fmt.Sprintf(`form[action="/console/users/owner"]:has(input[value=%q]) button`, evil))
		if u, _ := h.Accounts.UserByName(ctx, evil); problem != "" || u == nil || !u.Owner {
			p.fatalf("making the user an owner: notice %q, error %q; owner in the store: %v", notice, problem, u != nil && u.Owner)
		}

		// A rule of the admin service, shown as the command line shows it.
		p.do("fill in a too short password", chromedp.SendKeys(chromedp.CSS(`#pw-`+fmt.Sprint(u.ID)), "abc"))
		evaluate[int](p.page, `document.querySelectorAll("input[minlength]").forEach(i => i.removeAttribute("minlength")), 0`) // lift the browser's own length check
		_, problem = p.submit("set the too short password", fmt.Sprintf(`form[action="/console/users/password"]:has(input[value=%q]) button`, evil))
		if !strings.Contains(problem, "at least 4 characters") {
			p.fatalf("a 3-character password: the page says %q, want the admin service's rule", problem)
		}

		notice, problem = p.submit("delete the user", fmt.Sprintf(`form[action="/console/users/delete"]:has(input[value=%q]) button`, evil))
		if problem != "" || !strings.Contains(notice, "Deleted") {
			p.fatalf("deleting a user: notice %q, error %q", notice, problem)
		}
		if _, err := h.Accounts.UserByName(ctx, evil); err == nil {
			t.Fatal("the user the console deleted is still in the store")
		}
		if got := dl.confirmations(); len(got) != 1 || !strings.Contains(got[0], "Delete "+evil) {
			t.Errorf("the delete button asked %q, want one confirmation naming the user", got)
		}
	})
}

// TestBrowserConsoleInTheDemo: the demo's user is an owner, so the demo
// daemon (the README's first command) shows the console with its login.
func TestBrowserConsoleInTheDemo(t *testing.T) {
	exe := findBrowser(t)
	d := startBrowserTestHub(t)
	browser := startBrowserFor(t, exe, consoleTestTimeout)
	p := &consolePage{page: newPage(t, browser), base: strings.TrimRight(d.PublicURL(), "/")}
	p.openConsole("/console/", "demo", "demo-secret")
	if got := p.text("main h1"); got != "Overview" {
		p.fatalf("the demo's console shows %q, want its Overview", got)
	}
}
