package hubstore_test

import (
	"testing"

	"github.com/switchbridge/switchbridge/bridge/hub/hubstore"
	"github.com/switchbridge/switchbridge/bridge/store/storetest"
)

// TestMain stops the PostgreSQL the tests started.
func TestMain(m *testing.M) { storetest.Main(m) }

// open opens the hub's records at dir in the dialect under test (the
// same database again for the same dir).
func open(t *testing.T, dir string) *hubstore.Store {
	t.Helper()
	return hubstore.New(storetest.Open(t, dir))
}
