package oauth

import (
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

func TestGrantCache(t *testing.T) {
	c := newGrantCache()
	now := time.Now()
	g := &bridge.Grant{InstallationID: "i"}
	c.put([]byte("a"), g, now, c.generation())
	if got, ok := c.get([]byte("a"), now); !ok || got != g {
		t.Fatal("a fresh grant is not served")
	}
	if _, ok := c.get([]byte("a"), now.Add(grantTTL)); ok {
		t.Error("a grant is served past its TTL")
	}
	// A grant read before a clear (a reinstall, a revocation) and stored
	// after it is dropped.
	gen := c.generation()
	c.clear()
	c.put([]byte("b"), g, now, gen)
	if _, ok := c.get([]byte("b"), now); ok {
		t.Error("a grant read before a clear was cached after it")
	}
	if _, ok := c.get([]byte("a"), now); ok {
		t.Error("clear kept a grant")
	}
}
