package link

// What both sides of the link share: its paths and headers, the reading of
// a JSON body, the version a hub reports, and the platform's error answers.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/version"
)

// The paths of the link, below the platform's URL.
const (
	InventoryPath = "/api/hub/v1/inventory"
	ChangesPath   = "/api/hub/v1/changes"
	SnapshotPath  = "/api/hub/v1/snapshot"
)

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

// decodeOne reads exactly one JSON value from r into v: anything after
// the value is an error. Fields v does not know are ignored, so that a
// platform and its hubs need not be upgraded together: a newer side may
// add fields; a change an older side cannot ignore takes a new path
// (/api/hub/v2).
func decodeOne(r io.Reader, v any) error {
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

// statusError is a link request the platform answered with an error.
type statusError struct {
	Status  int
	Message string
	// Removed: the platform said this hub was removed (RemovedHeader).
	Removed bool
	// Rekey: the platform said its history lost this hub's credentials
	// (RekeyHeader).
	Rekey bool
	// RetryAfter is the answer's Retry-After, 0 when none.
	RetryAfter time.Duration
	// Header is the answer's header.
	Header http.Header
}

func (e *statusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("the platform answered %d %s", e.Status, http.StatusText(e.Status))
	}
	return fmt.Sprintf("the platform answered %d: %s", e.Status, e.Message)
}
