// Built without the race detector, as browser_test.go (chromedp races
// internally); make test runs the browser tests in a separate step.

//go:build !race

package daemon_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchbridge/switchbridge/bridge"
)

// TestBrowserConnectedApps drives the connected apps page in headless
// Chromium as a person would: they connect the demo client, find it on
// the page linked from the consent page, change its switches through the
// consent page again, and remove it; the demo client, which keeps its
// token, sees each change at once.
func TestBrowserConnectedApps(t *testing.T) {
	exe := findBrowser(t)
	d := startBrowserTestHub(t)
	browser := startBrowser(t, exe)
	p := newPage(t, browser)
	before := hubValues(t, d)

	// Connect the demo client with two switches of Home.
	p.open(d.DemoURL)
	p.follow("click Connect", chromedp.Click(chromedp.ID("connect")))
	p.logIn("demo", "demo-secret")
	p.waitVisible("#authorize-1", "#connected-apps")
	if href := evaluate[string](p, `document.querySelector("#connected-apps").getAttribute("href")`); href != "/oauth/apps" {
		p.fatalf("the consent page links the connected apps as %q", href)
	}
	p.do("tick Kitchen light and Hall lamp",
		chromedp.Click(chromedp.CSS(`label[for="sw-1-kitchen"]`)),
		chromedp.Click(chromedp.CSS(`label[for="sw-1-hall"]`)),
	)
	if u := p.follow("click Authorize for Home", chromedp.Click(chromedp.ID("authorize-1"))); u.Path != "/demo/" {
		p.fatalf("Authorize ended at %s", u)
	}
	p.waitVisible("#switches")
	p.wantTable("after Authorize", []switchRow{{Name: "Kitchen light", Value: "off"}, {Name: "Hall lamp", Value: "on"}})

	// The page lists the installation, the person still logged in.
	p.open(d.PublicURL() + "/oauth/apps")
	p.waitVisible("section.app")
	if n := p.count("section.app"); n != 1 {
		p.fatalf("the page lists %d apps, want 1", n)
	}
	for sel, want := range map[string]string{
		"section.app h2": "Demo client", "dd.location": "Home", "dd.switches": "Kitchen light, Hall lamp",
	} {
		if got := p.text(sel); got != want {
			p.fatalf("%s says %q, want %q", sel, got, want)
		}
	}
	if p.text("dd.granted") == "" || p.text("dd.last-used") == "" {
		p.fatalf("the page shows no grant or last-use time")
	}
	p.screenshot("connected-apps.png")

	// Change switches: the consent page for Home, the current ones ticked.
	u := p.follow("click Change switches", chromedp.Click(chromedp.CSS(`button[id^="change-"]`)))
	if u.Path != "/oauth/apps/switches" {
		p.fatalf("Change switches led to %s", u)
	}
	if got := p.checkedBoxes(); !slices.Equal(got, []string{"sw-1-kitchen", "sw-1-hall"}) {
		p.fatalf("the change page ticks %q, want the installation's sw-1-kitchen and sw-1-hall", got)
	}
	if p.count(`input[name="switch"]`) != 4 {
		p.fatalf("the change page offers %d switches, want Home's 4", p.count(`input[name="switch"]`))
	}
	p.do("untick Hall lamp, tick Desk fan",
		chromedp.Click(chromedp.CSS(`label[for="sw-1-hall"]`)),
		chromedp.Click(chromedp.CSS(`label[for="sw-1-fan"]`)),
	)
	if u := p.follow("click Save switches", chromedp.Click(chromedp.ID("save"))); u.Path != "/oauth/apps" {
		p.fatalf("Save switches led to %s", u)
	}
	p.waitVisible("#notice")
	if got, want := p.text("#notice"), "Demo client now controls Kitchen light, Desk fan in Home."; got != want {
		p.fatalf("notice %q, want %q", got, want)
	}
	if got := p.text("dd.switches"); got != "Kitchen light, Desk fan" {
		p.fatalf("the page lists switches %q after the change", got)
	}

	// The demo client, same token and installation, now has the new ones.
	p.open(d.DemoURL)
	p.waitVisible("#switches", "#all-on")
	p.wantTable("after the change", []switchRow{{Name: "Kitchen light", Value: "off"}, {Name: "Desk fan", Value: "off"}})
	p.follow("click Turn all on", chromedp.Click(chromedp.ID("all-on")))
	p.waitVisible("#flash")
	wantHub(t, d, before, map[string]bridge.Value{"kitchen": bridge.On, "fan": bridge.On})

	// Remove: gone from the page, and the demo client's token stops.
	p.open(d.PublicURL() + "/oauth/apps")
	if u := p.follow("click Remove", chromedp.Click(chromedp.CSS(`button[id^="remove-"]`))); u.Path != "/oauth/apps" {
		p.fatalf("Remove led to %s", u)
	}
	p.waitVisible("#notice", "#no-apps")
	if got, want := p.text("#notice"), "Demo client is removed from Home: its access ended."; got != want {
		p.fatalf("notice %q, want %q", got, want)
	}
	p.open(d.DemoURL)
	p.waitVisible("#error")
	if got := p.text("#error"); !strings.Contains(got, "HTTP 401") {
		p.fatalf("after the remove the demo client says %q, want its token refused (HTTP 401)", got)
	}
	if p.count("#switches tr") != 0 {
		p.fatalf("after the remove the demo client still lists switches")
	}
	wantHub(t, d, before, map[string]bridge.Value{"kitchen": bridge.On, "fan": bridge.On})
}
