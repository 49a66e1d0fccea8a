package link

// What both sides of the link share: its paths and headers, the timing
// both count on, the reading of a JSON body, and the version a hub
// reports.

import (
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/version"
)

// The paths of the link, below the platform's URL.
const (
	InventoryPath = "/api/hub/v1/inventory"
	ChangesPath   = "/api/hub/v1/changes"
	SnapshotPath  = "/api/hub/v1/snapshot"
	// ConsoleSignInPath is where a hub redeems the code its console's
	// sign-in came back with (POST ConsoleSignIn, answered ConsoleOwner).
	ConsoleSignInPath = "/api/hub/v1/console-signin"
)

// ConsoleSignIn is a hub's request to redeem a console sign-in code.
type ConsoleSignIn struct {
	Code string `json:"code"`
}

// ConsoleOwner is the owner a redeemed code signs in to a hub's console:
// a user of the platform with the owner role, and when they last typed
// their password there (unix milliseconds).
type ConsoleOwner struct {
	ID         int64  `json:"id"`
	Name       string `json:"name"`
	PasswordAt int64  `json:"password_at"`
}

// Headers of the link beyond HTTP Basic. A side that does not know one
// ignores it, so hubs and platforms of different versions still link.
const (
	// InstanceHeader carries a random id a hub process draws at start:
	// two processes calling with one hub's credentials are two instances,
	// which the platform tells apart from one hub reconnecting.
	InstanceHeader = "Switchbridge-Instance"
	// HeartbeatHeader, on a hub's long poll, asks the platform for an
	// interim 102 Processing every HeartbeatInterval while the poll waits,
	// so the hub can tell a dead connection from a quiet one within
	// seconds. On the platform's answers it says the platform sends them.
	HeartbeatHeader = "Switchbridge-Heartbeat"
	// LocationsHeader, on the platform's answers to a hub, lists the
	// locations the platform accepts from that hub (comma-separated, empty
	// for none): the hub serves no installation of any other.
	LocationsHeader = "Switchbridge-Hub-Locations"
	// CursorHeader carries the hub's replica cursor and its tag ("N tag")
	// on its inventory report, so that a platform restored from a backup
	// older than the hub's secret can tell the hub so (RekeyHeader).
	CursorHeader = "Switchbridge-Cursor"
	// RekeyHeader marks a 401 to a hub whose cursor this platform's change
	// log never held: the platform was restored from a backup older than
	// what the hub followed, its secret included. The hub empties its
	// replica: what it holds may have been revoked in a history the
	// platform lost, and it was never issued in the one it kept.
	RekeyHeader = "Switchbridge-Hub-Rekey"
)

// RemovedHeader marks the answer to a hub that was removed (hub remove):
// 410 Gone with this header set. A 410 without it is a cursor the change
// log cannot resume.
const RemovedHeader = "Switchbridge-Hub-Removed"

// Timing both sides count on.
const (
	// DefaultPollTimeout is how long a platform holds a long poll with no
	// changes before it answers with none; a hub gives a poll that long,
	// and a round trip, before it takes it for lost.
	DefaultPollTimeout = 25 * time.Second
	// HeartbeatInterval is how often a waiting long poll sends 102
	// Processing to a hub that asked for it, the first as soon as the
	// platform accepts the poll; a hub that hears nothing for a few
	// intervals (plus its round trip's spread) takes its connection for
	// dead.
	HeartbeatInterval = time.Second
)

// HeartbeatAtOnce, in the HeartbeatHeader of the platform's answer to an
// inventory, says that it sends the first 102 as soon as it accepts a
// poll (a hub then takes that one for a round-trip sample). An older hub
// reads only that the header is there.
const HeartbeatAtOnce = "at-once"

// DecodeOne reads exactly one JSON value from r into v: anything after
// the value is an error. Fields v does not know are ignored, so that a
// platform and its hubs need not be upgraded together: a newer side may
// add fields; a change an older side cannot ignore takes a new path
// (/api/hub/v2).
func DecodeOne(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}

// Version is this binary's version, as a hub reports it.
func Version() string { return version.Version() }
