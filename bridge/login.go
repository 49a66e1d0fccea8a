package bridge

import "time"

// LoginSession is a user's login to the platform's pages, kept where every
// platform process sees it. The cookie that names it is never kept, only
// its hash.
type LoginSession struct {
	UserID int64
	// Password is a digest of the user's password hash at login: a
	// password changed since ends the session.
	Password []byte
	// CSRF is the token the session's forms carry. It is derived from
	// the session's cookie (an HMAC under the login pages' signing key)
	// whenever the session is read, and never stored.
	CSRF             string
	Created, Expires time.Time
}

// FailureCount is how often a throttling key failed, and when it last did.
type FailureCount struct {
	Count int
	Last  time.Time
}
