// chromedp has data races of its own, so this test is built without the
// race detector; make test runs it in its browser step, without -race.

//go:build !race

package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// TestBrowserConsoleOfAHub: the console of a hub of a platform, real
// processes both. An owner who opens the hub's /console/ is sent to the
// platform to log in and comes back to the hub's console, which shows
// the hub's own state; a user who is not an owner is refused at the
// platform; a sign-in link is good once, and only in the browser that
// started it; logging out at the hub ends the hub's console login.
func TestBrowserConsoleOfAHub(t *testing.T) {
	exe := browserExe(t)

	m := startPlatform(t)
	b := m.addHub("barn", `  - id: 20
    name: Barn
    switches:
      - {id: barn-light, name: Barn light, driver: virtual}`, "")
	b.start(t)
	waitFor(t, 15*time.Second, "hub B reports its inventory", func() bool { return len(m.hubList()["barn"].Locations) == 1 })
	for _, u := range []struct{ name, pw, owner string }{{"olga", "pw-olga", "--owner"}, {"nils", "pw-nils", ""}} {
		args := []string{"user", "add", u.name, "--location", "20", "--config", m.platform.cfg}
		if u.owner != "" {
			args = append(args, u.owner)
		}
		if r := runCLI(t, u.pw+"\n", args...); r.code != 0 {
			t.Fatalf("user add %s: %+v", u.name, r)
		}
	}

	browser := newBrowser(t, exe, 2*time.Minute)

	// tab is a fresh cookie jar, like a private window.
	tab := func() context.Context {
		ctx, cancel := chromedp.NewContext(browser, chromedp.WithNewBrowserContext())
		t.Cleanup(cancel)
		if err := chromedp.Do(ctx); err != nil {
			t.Fatal(err)
		}
		return ctx
	}
	step := func(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			text, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
			t.Fatalf("%s: %v\npage says:\n%s", what, err, text)
		}
	}
	eval := func(t *testing.T, ctx context.Context, expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return v
	}
	logIn := func(t *testing.T, ctx context.Context, user, pw string) {
		t.Helper()
		step(t, ctx, "open the hub's console", chromedp.Navigate(b.url+"/console/"))
		if got := eval(t, ctx, `location.origin`); got != m.platform.url {
			t.Fatalf("the hub's console sent the browser to %s, want the platform %s to log in", got, m.platform.url)
		}
		step(t, ctx, "type the login at the platform",
			chromedp.WaitVisible(chromedp.ID("username")),
			chromedp.SendKeys(chromedp.ID("username"), user),
			chromedp.SendKeys(chromedp.ID("password"), pw))
		// Waits for the page the login leads to.
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.ID("login"))); err != nil {
			t.Fatalf("log in at the platform: %v", err)
		}
	}

	t.Run("Owner", func(t *testing.T) {
		ctx := tab()
		// The sign-in link the platform sends the browser back with, as
		// the hub's log would not show it: caught on its way.
		var callback string
		chromedp.Listen(ctx, func(ev any) {
			if u := requestURL(ev); strings.Contains(u, "/console/signin/callback") {
				callback = u
			}
		})
		logIn(t, ctx, "olga", "pw-olga")
		if got := eval(t, ctx, `location.href`); got != b.url+"/console/" {
			t.Fatalf("after logging in at the platform the browser is at %s, want the hub's console %s/console/", got, b.url)
		}
		body := eval(t, ctx, `document.body.innerText`)
		for _, want := range []string{"Overview", "Log out olga", "Platform link", "linked to " + m.platform.url} {
			if !strings.Contains(body, want) {
				t.Errorf("the hub's console lacks %q:\n%s", want, body)
			}
		}
		if callback == "" {
			t.Fatal("saw no sign-in callback")
		}
		// The hub's own pages: its switches, switched from the console.
		step(t, ctx, "open the hub's switches", chromedp.Navigate(b.url+"/console/switches"), chromedp.WaitVisible(chromedp.CSS(`tr[data-switch="barn-light"]`)))
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`form[action="/console/switches/barn-light/on"] button`))); err != nil {
			t.Fatalf("switch the barn light on: %v", err)
		}
		if body := eval(t, ctx, `document.body.innerText`); !strings.Contains(body, "Barn light") || !strings.Contains(eval(t, ctx, `document.querySelector('tr[data-switch="barn-light"] [data-field="value"]').innerText`), "on") {
			t.Errorf("after switching on at the hub's console:\n%s", body)
		}
		// The link again, in the same browser: taken already.
		resp, err := chromedp.RunResponse(ctx, chromedp.Navigate(callback))
		if err != nil || resp.Status != http.StatusForbidden {
			t.Errorf("the sign-in link used a second time: %v, status %v; want 403", err, resp)
		}
		// And in a browser that did not start the sign-in (no state cookie).
		other := tab()
		resp, err = chromedp.RunResponse(other, chromedp.Navigate(callback))
		if err != nil || resp.Status != http.StatusForbidden {
			t.Errorf("the sign-in link in another browser: %v, status %v; want 403", err, resp)
		}
		if body := eval(t, other, `document.body.innerText`); strings.Contains(body, "olga") {
			t.Errorf("another browser got olga's console:\n%s", body)
		}

		step(t, ctx, "back to the hub's console", chromedp.Navigate(b.url+"/console/"), chromedp.WaitVisible(chromedp.CSS(`form[action="/console/logout"]`)))
		// Waits for the page the logout leads to.
		if _, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(`form[action="/console/logout"] button`))); err != nil {
			t.Fatalf("log out at the hub: %v", err)
		}
		if got := eval(t, ctx, `document.querySelector("main h1").innerText`); got != "Logged out" {
			t.Errorf("logging out shows %q, want the Logged out page", got)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		cookies := eval(t, ctx, `document.cookie`) // HttpOnly: none of the console's shows here
		if strings.Contains(cookies, "switchbridge") {
			t.Errorf("a console cookie is readable by scripts: %q", cookies)
		}
		resp2, err := c.Get(b.url + "/console/")
		if err != nil {
			t.Fatal(err)
		}
		resp2.Body.Close()
		if loc, _ := url.Parse(resp2.Header.Get("Location")); resp2.StatusCode != http.StatusSeeOther || loc == nil || loc.Host != strings.TrimPrefix(m.platform.url, "http://") {
			t.Errorf("the hub's console without a login answers %d to %s, want 303 to the platform", resp2.StatusCode, resp2.Header.Get("Location"))
		}
	})

	t.Run("NotAnOwner", func(t *testing.T) {
		ctx := tab()
		logIn(t, ctx, "nils", "pw-nils")
		if got := eval(t, ctx, `location.origin`); got != m.platform.url {
			t.Errorf("a user who is not an owner reached %s, want to stay at the platform", got)
		}
		if body := eval(t, ctx, `document.body.innerText`); !strings.Contains(body, "is not one") {
			t.Errorf("the platform's answer to a user who is not an owner:\n%s", body)
		}
	})
}

// requestURL is the URL a browser event requests, "" for other events.
func requestURL(ev any) string {
	if e, ok := ev.(*network.EventRequestWillBeSent); ok && e.Request != nil {
		return e.Request.URL
	}
	return ""
}
