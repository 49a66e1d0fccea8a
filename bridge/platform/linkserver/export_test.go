package linkserver

import "time"

// FailuresTable exposes the throttle's table for tests.
func FailuresTable() (fail func(id, addr string, now time.Time), wait func(id, addr string, now time.Time) time.Duration, size func() int) {
	f := newLoginThrottle()
	return f.fail, f.wait, f.t.Len
}
