package bridge

import (
	"errors"
	"time"
)

// A platform with several hubs: the platform keeps a registry of the hubs
// that serve its locations, and each hub keeps a replica of what its own
// installations need. These are the records both sides hold; bridge/link
// carries them between the two.

// RegisteredHub is one hub registered with a platform (switchbridge hub add).
type RegisteredHub struct {
	ID      string
	Name    string
	BaseURL string
	// SecretHash is the hash of the hub's secret; the secret is shown once.
	SecretHash []byte
	CreatedAt  time.Time
	// LastSeen is when the hub last called the platform; zero when never.
	LastSeen time.Time
	// Version is the software version the hub reported.
	Version string
	// Cursor is the change sequence the hub acknowledged last.
	Cursor    int64
	Locations []RemoteLocation
	// Conflict says why the platform last refused a second process that
	// called with this hub's credentials while its link was live, at
	// ConflictAt; "" when it never did.
	Conflict   string
	ConflictAt time.Time
}

// RemoteLocation is a location a hub reported in its inventory.
type RemoteLocation struct {
	ID       int64          `json:"id"`
	Name     string         `json:"name"`
	Switches []RemoteSwitch `json:"switches"`
	// HubID is the hub that holds it; not on the wire.
	HubID string `json:"-"`
}

// RemoteSwitch is one switch of a hub's inventory, with the commands it
// supports (so the consent page says what it cannot do).
type RemoteSwitch struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Commands []Command `json:"commands"`
}

// ReplicaInstallation is an installation as a hub's replica holds it:
// Member says whether its user still belongs to its location.
type ReplicaInstallation struct {
	ID         string   `json:"id"`
	ClientID   string   `json:"client_id"`
	UserID     int64    `json:"user_id"`
	LocationID int64    `json:"location_id"`
	SwitchIDs  []string `json:"switch_ids"`
	// SeeOnly are those of SwitchIDs the app may see but not switch; the
	// hub refuses a command to them from its replica.
	SeeOnly []string `json:"see_only,omitempty"`
	Member  bool     `json:"member"`
	// Legacy is whether the installation's app may send its token in the
	// query string.
	Legacy    bool      `json:"legacy,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	// RefreshUntil is when the installation's last live refresh token
	// (neither spent nor revoked) expires, the zero time when it has
	// none: with the access tokens, whether anyone still holds the
	// grant, which the hub's webhooks follow. nil from a platform older
	// than the field: the hub then takes the grant to be held.
	RefreshUntil *time.Time `json:"refresh_until,omitempty"`
}

// ReplicaToken is an access token as a hub's replica holds it: its hash
// only, never the token.
type ReplicaToken struct {
	Hash           []byte    `json:"hash"`
	InstallationID string    `json:"installation_id"`
	ExpiresAt      time.Time `json:"expires_at"`
	Revoked        bool      `json:"revoked"`
}

// ChangeBatch is what a hub applies to its replica at once, together with
// Cursor, the platform's change sequence it brings the replica up to. A
// Snapshot replaces the whole replica; otherwise the records are upserts
// and the Deleted lists tombstones.
type ChangeBatch struct {
	Cursor int64 `json:"cursor"`
	// CursorTag identifies the change log entry at Cursor: a hub sends it
	// back with the cursor, and a platform whose log took another course
	// (restored from a backup) answers ErrCursorGone.
	CursorTag            string                `json:"cursor_tag"`
	Snapshot             bool                  `json:"snapshot,omitempty"`
	Installations        []ReplicaInstallation `json:"installations,omitempty"`
	Tokens               []ReplicaToken        `json:"tokens,omitempty"`
	DeletedInstallations []string              `json:"deleted_installations,omitempty"`
	DeletedTokens        [][]byte              `json:"deleted_tokens,omitempty"`
	// Locations are locations the hub (re)gained whose whole current
	// state the batch carries: the hub drops whatever it held of them
	// before applying the records, so nothing uninstalled while the
	// location was elsewhere survives in its replica.
	Locations []int64 `json:"locations,omitempty"`
}

// Empty reports whether the batch changes nothing but the cursor.
func (b *ChangeBatch) Empty() bool {
	return !b.Snapshot && len(b.Installations) == 0 && len(b.Tokens) == 0 &&
		len(b.DeletedInstallations) == 0 && len(b.DeletedTokens) == 0 && len(b.Locations) == 0
}

// ErrCursorGone is a cursor the platform's change log cannot resume from:
// older than what compaction kept, newer than the log, or naming an entry
// the log does not hold (a platform restored from a backup). The hub must
// fetch a snapshot.
var ErrCursorGone = errors.New("the change log cannot resume from this cursor (compacted past it, or the platform was restored from a backup): fetch a snapshot")

// ReplicaState is where a hub's replica stands.
type ReplicaState struct {
	// Cursor is the platform's change sequence the replica is current at,
	// and CursorTag the tag of that entry (ChangeBatch.CursorTag).
	Cursor    int64
	CursorTag string
	// Synced is false until the replica holds a first snapshot.
	Synced bool
	// SyncedAt is when the platform last answered the hub.
	SyncedAt time.Time
	// Applied counts the batches applied that changed something.
	Applied int64
}

// LocationHeldError is the refusal of an inventory naming a location
// another hub holds: its message, for the refused hub, does not say which
// hub (a hub learns nothing of the others); Holder does, for the
// platform's log only.
type LocationHeldError struct {
	Err    error
	Holder string
}

func (e *LocationHeldError) Error() string { return e.Err.Error() }
func (e *LocationHeldError) Unwrap() error { return e.Err }
