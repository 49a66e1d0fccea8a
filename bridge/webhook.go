package bridge

import "time"

// Webhook is a URL an installation's client registered to be sent its
// switches' changes, signed with Secret (Standard Webhooks).
type Webhook struct {
	ID             string
	InstallationID string
	URL            string
	// Secret signs every delivery ("whsec_" and base64); OldSecret, until
	// OldSecretUntil, signs them too, so a receiver can switch keys after
	// a rotation.
	Secret         string
	OldSecret      string
	OldSecretUntil time.Time
	// Disabled, with its reason, when the receiver answered 410 or failed
	// for too long; nothing is sent to it then.
	Disabled       bool
	DisabledReason string
	// Suspended while no one holds a live token of its installation's
	// grant (all revoked, or expired): nothing is sent to it, and what
	// waited was dropped, until a new authorization of the same app for
	// the same installation issues a token. Not stored: the hub judges it
	// from the grant's tokens as it reads them.
	Suspended     bool
	CreatedAt     time.Time
	LastSuccessAt time.Time
	LastFailureAt time.Time
	LastError     string
	// FailingSince is the first failure since the last success; zero while
	// deliveries succeed.
	FailingSince time.Time
	// Pending is how many deliveries wait in the outbox.
	Pending int
}

// Status says in a few words how the webhook fares, for its owner:
// delivering, failing since when and why, suspended, or disabled and why.
func (w *Webhook) Status() string {
	switch {
	case w.Disabled:
		return "disabled: " + w.DisabledReason
	case w.Suspended:
		return "suspended: " + SuspendedReason
	case !w.FailingSince.IsZero():
		s := "failing since " + w.FailingSince.Local().Format("2006-01-02 15:04")
		if w.LastError != "" {
			s += ": " + w.LastError
		}
		return s
	}
	return "delivering"
}

// SuspendedReason says why a webhook is suspended.
const SuspendedReason = "the app's authorization ended (no live token); it resumes when the app is authorized again"

// WebhookDelivery is one message in the outbox: the latest change of one
// switch for one webhook. A newer change of the same switch replaces it
// (Version grows), so a flapping plug sends its latest state.
type WebhookDelivery struct {
	WebhookID string
	// InstallationID is the webhook's installation, as the outbox reads
	// it (for sharing the delivery slots fairly); not stored with it.
	InstallationID string
	SwitchID       string
	Version        int64
	MsgID          string
	Payload        []byte
	Attempts       int
	QueuedAt       time.Time
	NextAt         time.Time
}
