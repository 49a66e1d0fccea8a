package daemon

import (
	"context"
	"fmt"
	"net/http"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/daemon/democlient"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

func (d *Daemon) handleRoot(w http.ResponseWriter, r *http.Request) {
	if d.DemoURL != "" {
		http.Redirect(w, r, "/demo/", http.StatusFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "switchbridge hub. Clients start at /oauth/authorize; see the README.")
}

// DemoClientID is the client id of the demo app.
const DemoClientID = "switchbridge-demo"

// setUpDemo makes sure the demo user (member of every location, an owner)
// and the published demo app exist, gives the app a fresh secret that
// only this process knows, and mounts the demo client.
func (d *Daemon) setUpDemo(ctx context.Context, mux *http.ServeMux) error {
	demo := d.Config.Demo
	hash, err := bcrypt.GenerateFromPassword([]byte(demo.Password), bcrypt.DefaultCost)
	if err != nil {
		return err
	}
	var all []int64
	for _, l := range d.Config.Locations {
		all = append(all, l.ID)
	}
	user, err := d.Accounts.UserByName(ctx, demo.User)
	switch bridge.ErrorCode(err) {
	case "":
		if err := d.Accounts.SetPassword(ctx, demo.User, hash); err != nil {
			return err
		}
	case bridge.ENOTFOUND:
		if user, err = d.Accounts.CreateUser(ctx, demo.User, hash, all); err != nil {
			return err
		}
	default:
		return err
	}
	// The demo user is an owner, so the demo shows the console too.
	if err := d.Accounts.SetOwner(ctx, demo.User, true); err != nil {
		return err
	}
	redirect := d.publicURL + democlient.CallbackPath
	secret := oauth.NewSecret()
	_, err = d.Accounts.App(ctx, DemoClientID)
	switch bridge.ErrorCode(err) {
	case "":
		if err := d.Accounts.SetAppSecret(ctx, DemoClientID, oauth.Hash(secret)); err != nil {
			return err
		}
		if err := d.Accounts.SetAppRedirectURIs(ctx, DemoClientID, []string{redirect}); err != nil {
			return err
		}
	case bridge.ENOTFOUND:
		err = d.Accounts.CreateApp(ctx, &bridge.App{ClientID: DemoClientID, Name: "Demo client", SecretHash: oauth.Hash(secret),
			RedirectURIs: []string{redirect}, OwnerID: user.ID, Published: true})
		if err != nil {
			return err
		}
	default:
		return err
	}
	c := democlient.New(democlient.Options{
		ClientID: DemoClientID, ClientSecret: secret, AuthURL: d.publicURL, RedirectURL: redirect,
		Logger: d.logger.With("component", "demo"),
	})
	c.Register(mux)
	d.DemoURL = d.publicURL + "/demo/"
	return nil
}
