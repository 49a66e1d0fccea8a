package bridge

import "time"

// AuditRecord is one switch of one command sent through the installation
// API: when, by which installation (its app and user), to which switch,
// which command, how it ended (Outcome), how long the switch took and the
// X-Request-Id of the command's answer. The hub that ran the command keeps
// it, in the write that stores the command's values. Its JSON is the form
// the value journal holds it in.
type AuditRecord struct {
	At             time.Time `json:"at"`
	InstallationID string    `json:"installation"`
	ClientID       string    `json:"app"`
	UserID         int64     `json:"user"`
	SwitchID       string    `json:"switch"`
	Command        Command   `json:"command"`
	// Outcome is OutcomeOK, a Fail* reason (FailSeeOnly, FailUnsupported
	// and FailRateLimited for the switch a refusal names: nothing was
	// sent), or OutcomeNotSent for the other switches of a command
	// refused before any device was touched.
	Outcome   string        `json:"outcome"`
	Latency   time.Duration `json:"latency"`
	RequestID string        `json:"request_id"`
}

// The outcomes of an audit record besides the Fail* reasons.
const (
	OutcomeOK = "ok"
	// OutcomeNotSent is a switch of a command refused before any device
	// was touched, for a reason of another switch (or of the whole
	// command: a switch no longer configured).
	OutcomeNotSent = "not_sent"
)

// AuditFilter selects audit records: of one installation, of one app (its
// client id), of one switch, at or after Since; each when set. Limit
// bounds how many (the newest); none when 0.
type AuditFilter struct {
	InstallationID string
	ClientID       string
	SwitchID       string
	Since          time.Time
	Limit          int
}

// outcomeText are the outcomes in words.
var outcomeText = map[string]string{
	OutcomeOK:       "done",
	OutcomeNotSent:  "not sent (refused for another switch)",
	FailSeeOnly:     "refused: it may only see this switch",
	FailUnsupported: "refused: the switch cannot do this",
	FailRateLimited: "refused: switched too often",
	FailTimeout:     "no answer from the device",
	FailUnavailable: "the device was offline",
	FailError:       "the device failed",
}

// OutcomeText is how a page words an audit record's outcome; an outcome
// it does not know, as it is.
func OutcomeText(outcome string) string {
	if t, ok := outcomeText[outcome]; ok {
		return t
	}
	return outcome
}

// Audit log bounds when the config does not set them (audit.max_age,
// audit.max_rows): a month of a busy household's commands fits in a few
// megabytes.
const (
	DefaultAuditMaxAge  = 30 * 24 * time.Hour
	DefaultAuditMaxRows = 100000
)

// record is the audit record of a command s sent to switch id.
func (s Sender) record(at time.Time, id string, cmd Command, outcome string, took time.Duration) AuditRecord {
	return AuditRecord{At: at, InstallationID: s.Installation, ClientID: s.App, UserID: s.UserID, SwitchID: id,
		Command: cmd, Outcome: outcome, Latency: took, RequestID: s.RequestID}
}
