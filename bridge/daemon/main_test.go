package daemon_test

import (
	"testing"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
)

// TestMain notes every secret the tests send to a hub or get from one, for
// the scan of each hub's log when its test ends (daemontest.Main).
func TestMain(m *testing.M) { daemontest.Main(m) }
