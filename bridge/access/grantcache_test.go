package access

import (
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

func TestGrantCache(t *testing.T) {
	c := newGrantCache()
	now := time.Now()
	g := &bridge.Grant{InstallationID: "i"}
	c.put([]byte("a"), g, now, c.generation(), 0)
	if got, ok := c.get([]byte("a"), now, 0); !ok || got != g {
		t.Fatal("a fresh grant is not served")
	}
	if _, ok := c.get([]byte("a"), now.Add(grantTTL), 0); ok {
		t.Error("a grant is served past its TTL")
	}
	// A grant read before a clear (a reinstall, a revocation) and stored
	// after it is dropped.
	gen := c.generation()
	c.clear()
	c.put([]byte("b"), g, now, gen, 0)
	if _, ok := c.get([]byte("b"), now, 0); ok {
		t.Error("a grant read before a clear was cached after it")
	}
	if _, ok := c.get([]byte("a"), now, 0); ok {
		t.Error("clear kept a grant")
	}
}

// Another process took access away: the access generation moved, and no
// grant read before is served, however fresh.
func TestGrantCacheAccessGeneration(t *testing.T) {
	c := newGrantCache()
	now := time.Now()
	g := &bridge.Grant{InstallationID: "i"}
	c.put([]byte("a"), g, now, c.generation(), 0)
	if _, ok := c.get([]byte("a"), now, 1); ok {
		t.Fatal("a grant read under access generation 0 is served under 1")
	}
	if _, ok := c.get([]byte("a"), now, 0); ok {
		t.Error("a grant survived a move of the access generation")
	}
	// A grant read under the old generation, stored after the cache saw
	// the new one, is dropped.
	gen := c.generation()
	c.get([]byte("x"), now, 2)
	c.put([]byte("b"), g, now, gen, 1)
	if _, ok := c.get([]byte("b"), now, 2); ok {
		t.Error("a grant read under an old access generation was cached")
	}
	c.put([]byte("c"), g, now, c.generation(), 2)
	if _, ok := c.get([]byte("c"), now, 2); !ok {
		t.Error("a grant read under the current access generation is not served")
	}
}
