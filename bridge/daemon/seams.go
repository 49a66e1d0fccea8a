package daemon

import (
	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
	"github.com/switchbridge/switchbridge/bridge/store"
)

// The handlers declare the interfaces they need; the adapters the daemon
// wires in must keep satisfying them.
var (
	_ oauth.Store       = (*store.DB)(nil)
	_ bridge.Authorizer = (*oauth.Server)(nil)
)
