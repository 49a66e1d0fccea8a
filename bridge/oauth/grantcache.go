package oauth

import (
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// A client that lists and then commands its switches presents the same
// token several times within a second; each check costs three queries on a
// Pi's SD card. Valid grants are kept for a short while. Everything this
// process does that changes a grant (a reinstall, a revocation by code
// replay) clears the cache; a reinstall made by another process (the
// install command) is seen within grantTTL. Refusals are never cached.
const (
	grantTTL      = 2 * time.Second
	maxGrantCache = 1024
)

type grantCache struct {
	mu sync.Mutex
	m  map[string]cachedGrant
	// gen counts clears. A lookup notes it before reading the database and
	// stores its grant only if no clear happened meanwhile, so a grant read
	// just before a reinstall or a revocation is not cached after it.
	gen uint64
}

type cachedGrant struct {
	g     *bridge.Grant
	until time.Time
}

func newGrantCache() *grantCache { return &grantCache{m: map[string]cachedGrant{}} }

func (c *grantCache) get(hash []byte, now time.Time) (*bridge.Grant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[string(hash)]
	if !ok || !now.Before(e.until) {
		return nil, false
	}
	return e.g, true
}

// generation is the number of clears so far; pass it to put.
func (c *grantCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

func (c *grantCache) put(hash []byte, g *bridge.Grant, now time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		return // cleared while this grant was read: it may be stale
	}
	if len(c.m) >= maxGrantCache {
		clear(c.m)
	}
	c.m[string(hash)] = cachedGrant{g: g, until: now.Add(grantTTL)}
}

func (c *grantCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.gen++
}
