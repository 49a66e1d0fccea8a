// Package clocktest is a clock that tests step by hand, for the rate
// limits and change caps that read the time through a Now function.
package clocktest

import (
	"sync"
	"time"
)

// Start is where a New clock starts: a fixed time, so failures repeat.
var Start = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// Clock is a time that moves only when Add is called. It is safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock at Start.
func New() *Clock { return &Clock{now: Start} }

// Now is the clock's time; pass the method value where a func() time.Time
// is wanted.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
