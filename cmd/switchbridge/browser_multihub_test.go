// chromedp has data races of its own, so this test is built without the
// race detector; make test runs it in its browser step, without -race.

//go:build !race

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"golang.org/x/oauth2"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// TestBrowserConsentForAHub: a person in headless Chromium logs in at the
// platform, sees hub B's location and switches on the consent page, ticks
// one and authorizes; the third-party client exchanges the code with
// x/oauth2, discovery sends it to hub B, and the switch works there.
func TestBrowserConsentForAHub(t *testing.T) {
	exe := browserExe(t)

	m := startPlatform(t)
	b := m.addHub("barn", `  - id: 20
    name: Barn
    switches:
      - {id: barn-light, name: Barn light, driver: virtual}
      - {id: bell, name: Barn bell, driver: virtual, commands: [on]}`, "")
	b.start(t)
	waitFor(t, 15*time.Second, "hub B reports its inventory", func() bool { return len(m.hubList()["barn"].Locations) == 1 })
	if r := runCLI(t, "pw-alice\n", "user", "add", "alice", "--location", "20", "--config", m.platform.cfg); r.code != 0 {
		t.Fatalf("user add: %+v", r)
	}
	// The third-party client's callback, on loopback.
	codes := make(chan string, 1)
	client := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case codes <- r.URL.Query().Get("code"):
		default:
		}
		w.Write([]byte("client got the code"))
	}))
	defer client.Close()
	redirect := client.URL + "/cb"
	r := runCLI(t, "", "app", "create", "--name", "Barn app", "--redirect-uri", redirect, "--owner", "alice", "--publish", "--json", "--config", m.platform.cfg)
	var raw map[string]string
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatalf("app create: %+v", r)
	}
	ph := &daemontest.Harness{URL: m.platform.url, Client: &http.Client{Timeout: 30 * time.Second}}
	cfg := ph.OAuthConfig(daemontest.App{ClientID: raw["client_id"], Secret: raw["client_secret"], RedirectURIs: []string{redirect}})

	ctx := newBrowser(t, exe, 60*time.Second)
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			t.Fatalf("%s: %v\npage says:\n%s", what, err, text)
		}
	}
	step("open the authorization URL", chromedp.Navigate(cfg.AuthCodeURL("st-browser")))
	step("log in",
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "alice"),
		chromedp.SendKeys(chromedp.ID("password"), "pw-alice"),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("authorize-20")))
	page, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Install into Barn", "Barn light", "Barn bell (can only be switched on)"} {
		if !strings.Contains(page, want) {
			t.Errorf("the consent page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "offline") {
		t.Errorf("hub B is marked offline while its link is up:\n%s", page)
	}
	step("tick the barn light and authorize",
		chromedp.Click(chromedp.ID("sw-20-barn-light")),
		chromedp.Click(chromedp.ID("authorize-20")))
	var code string
	select {
	case code = <-codes:
	case <-time.After(15 * time.Second):
		t.Fatal("the client's callback was not called")
	}
	tok, err := cfg.Exchange(context.WithValue(context.Background(), oauth2.HTTPClient, ph.Client), code)
	if err != nil {
		t.Fatal(err)
	}
	eps := ph.Endpoints(t, tok.AccessToken)
	if len(eps) != 1 || eps[0].BaseURL != b.url {
		t.Fatalf("discovery = %+v, want hub B %s", eps, b.url)
	}
	waitFor(t, 5*time.Second, "hub B serves the installation", func() bool { return status(t, "GET", eps[0].URI+"/switches", tok.AccessToken) == 200 })
	if c, body := call(t, "PUT", eps[0].URI+"/switches/on", tok.AccessToken); c != http.StatusNoContent {
		t.Errorf("PUT on at hub B: %d %s", c, body)
	}
	if c, body := call(t, "GET", eps[0].URI+"/switches", tok.AccessToken); c != 200 || !strings.Contains(body, `"Barn light","value":"on"`) || strings.Contains(body, "bell") {
		t.Errorf("GET at hub B: %d %s", c, body)
	}
}

// browserExe is the headless browser the browser tests drive; they skip
// without one, except under CI=true, and under emulation and -short.
func browserExe(t *testing.T) string {
	t.Helper()
	if e := os.Getenv("SWITCHBRIDGE_TEST_EMULATED"); e != "" {
		t.Skipf("the browser test does not run under %s", e)
	}
	if testing.Short() {
		t.Skip("-short: starts a browser (make test runs it)")
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no headless browser on PATH (CI=true: the browser test must run in CI)")
	}
	t.Skip("no headless browser on PATH; install one, e.g. apt-get install chromium")
	return ""
}

// newBrowser starts exe headless, loopback only, for at most timeout;
// it ends with the test.
func newBrowser(t *testing.T, exe string, timeout time.Duration) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("no-proxy-server", true),
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost"),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-dev-shm-usage", true))
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatal(err)
	}
	return ctx
}
