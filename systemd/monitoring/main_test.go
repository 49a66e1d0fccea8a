package monitoring

import (
	"testing"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// TestMain records the secrets the live hubs' tests send, so each hub's
// log and metrics are scanned for them when its test ends.
func TestMain(m *testing.M) { daemontest.Main(m) }
