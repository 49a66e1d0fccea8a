package replica

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchbridge/switchbridge/bridge/link"
)

// RedeemConsoleSignIn redeems the code the platform's console sign-in
// sent an owner's browser back with: the platform, asked as this hub,
// says which owner it signs in (bridge/hub/hubconsole).
func (l *Link) RedeemConsoleSignIn(ctx context.Context, code string) (link.ConsoleOwner, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	body, err := json.Marshal(link.ConsoleSignIn{Code: code})
	if err != nil {
		return link.ConsoleOwner{}, err
	}
	var out link.ConsoleOwner
	_, err = l.do(context.WithValue(ctx, noSampleKey{}, true), "POST", link.ConsoleSignInPath, nil, body, &out)
	return out, err
}
