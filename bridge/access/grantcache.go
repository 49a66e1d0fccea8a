package access

import (
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// A client that lists and then commands its switches presents the same
// token several times within a second; a full check costs four queries on
// a Pi's SD card. Valid grants are kept for a short while, each with the
// access generation (GrantSource.AccessGeneration) it was read under. A
// cached grant is served only while the generation is still that one: the
// store moves it in the same transaction as every write that takes access
// away or changes a grant (an uninstall, a revocation, a deleted app or
// user, an ended membership, changed switches), whichever process makes
// it, so a removal made by the CLI against the running daemon's database
// ends access at once, as one made by this process does. A cache hit costs
// one point query instead of four. Refusals are never cached.
const (
	grantTTL      = 10 * time.Second
	maxGrantCache = 1024
)

type grantCache struct {
	mu sync.Mutex
	m  map[string]cachedGrant
	// access is the access generation the entries in m were read under;
	// on seeing another, the cache empties.
	access int64
	// gen counts clears. A lookup notes it before reading the database and
	// stores its grant only if no clear happened meanwhile, so a grant read
	// just before a change made in this process is not cached after it.
	gen uint64
}

type cachedGrant struct {
	g      *bridge.Grant
	until  time.Time
	access int64
}

func newGrantCache() *grantCache { return &grantCache{m: map[string]cachedGrant{}} }

// get returns the cached grant of a token hash, if it was read under the
// access generation now in force.
func (c *grantCache) get(hash []byte, now time.Time, access int64) (*bridge.Grant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if access != c.access {
		// Something took access away or changed a grant: every entry is
		// suspect.
		clear(c.m)
		c.access = access
		c.gen++
		return nil, false
	}
	e, ok := c.m[string(hash)]
	if !ok || !now.Before(e.until) || e.access != access {
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

// put caches a grant read under access generation access, after
// generation() returned gen.
func (c *grantCache) put(hash []byte, g *bridge.Grant, now time.Time, gen uint64, access int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen || access != c.access {
		return // cleared while this grant was read: it may be stale
	}
	if len(c.m) >= maxGrantCache {
		clear(c.m)
	}
	c.m[string(hash)] = cachedGrant{g: g, until: now.Add(grantTTL), access: access}
}

func (c *grantCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.m)
	c.gen++
}
