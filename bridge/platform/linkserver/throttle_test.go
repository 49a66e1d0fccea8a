package linkserver_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
)

// TestThrottleTableIsBounded: a flood of addresses does not wipe out the
// count of the address under attack; the table stays bounded.
func TestThrottleTableIsBounded(t *testing.T) {
	fail, wait, size := linkserver.FailuresTable()
	now := time.Now()
	for range 10 {
		fail("h1", "198.51.100.1", now)
	}
	for i := range 10000 {
		fail("x", fmt.Sprint("10.", i/65536, ".", i/256%256, ".", i%256), now.Add(time.Millisecond))
	}
	if size() > 4096 {
		t.Errorf("table holds %d keys", size())
	}
	if wait("h1", "198.51.100.1", now.Add(time.Millisecond)) == 0 {
		t.Error("the flood of new addresses wiped out the attacked pair's count")
	}
}
