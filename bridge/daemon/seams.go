package daemon

import (
	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/accounts"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// The handlers declare the interfaces they need; the adapters the daemon
// wires in must keep satisfying them.
var (
	_ oauth.Store       = (*accounts.Store)(nil)
	_ bridge.Authorizer = (*oauth.Server)(nil)
)
