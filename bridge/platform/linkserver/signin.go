package linkserver

// The platform's side of a hub console's sign-in: the hub, authenticated
// as itself, redeems the code the platform's /console/signin sent the
// owner's browser back with (oauth.Server.RedeemConsoleSignIn).

import (
	"encoding/json"
	"net/http"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/wire"
)

// maxSignInBytes bounds the body of a redemption: one short code.
const maxSignInBytes = 4 << 10

func (p *Platform) handleConsoleSignIn(w http.ResponseWriter, r *http.Request) {
	h := p.authenticate(w, r)
	if h == nil {
		return
	}
	var in link.ConsoleSignIn
	if err := link.DecodeOne(http.MaxBytesReader(w, r.Body, maxSignInBytes), &in); err != nil {
		wire.WriteError(w, http.StatusBadRequest, "unreadable console sign-in: "+err.Error(), nil)
		return
	}
	if p.opts.SignIns == nil {
		wire.WriteError(w, http.StatusForbidden, "this platform signs no one in to a hub's console", nil)
		return
	}
	u, at, err := p.opts.SignIns.RedeemConsoleSignIn(r.Context(), h.ID, in.Code)
	if err != nil {
		if bridge.ErrorCode(err) == bridge.EFORBIDDEN {
			p.logger.Warn("hub link: a hub's console sign-in code was refused", "hub", h.ID)
		}
		wire.WriteErrorOf(w, err)
		return
	}
	p.logger.Info("hub link: an owner signed in to a hub's console", "hub", h.ID, "user", u.Name)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(link.ConsoleOwner{ID: u.ID, Name: u.Name, PasswordAt: at.UnixMilli()})
}
