// Package adminpages is the platform's part of the owner's console
// (bridge/console): the pages of its users, apps, installations and hubs,
// each action through the admin service (bridge/platform/admin), the one
// code path the command line takes too.
package adminpages

import (
	"context"
	"embed"
	"html/template"
	"net/http"
	"sync"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/console"
	"github.com/switchbridge/switchbridge/bridge/platform/admin"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// Options is what the pages are built with.
type Options struct {
	Admin *admin.Service
	// Own are this process's own locations (its config's), Hubs the
	// directory of its hubs' locations (nil without hubs).
	Own  *bridge.Switchboard
	Hubs oauth.HubDirectory
	// SignIn makes the code that signs an owner in to a hub's console
	// (oauth.Server.ConsoleSignInCode); nil: hubs' consoles cannot sign
	// anyone in here.
	SignIn func(ctx context.Context, hubID string, v *console.Visitor) (string, error)
}

// Pages are the platform's console pages.
type Pages struct {
	c    *console.Console
	opts Options
}

// New returns the platform's pages of console c.
func New(c *console.Console, o Options) *Pages { return &Pages{c: c, opts: o} }

//go:embed pages/*.html
var pageFiles embed.FS

var templates = sync.OnceValue(func() map[string]*template.Template { return console.ParsePages(pageFiles, "pages/*.html") })

// Register adds the pages to mux and their entries to the console's menu.
func (p *Pages) Register(mux *http.ServeMux) {
	p.registerUsers(mux)
	p.registerApps(mux)
	p.registerInstallations(mux)
	p.registerHubs(mux)
	p.registerSignIn(mux)
}
