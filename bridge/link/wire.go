package link

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/version"
)

// The paths of the link, below the platform's URL.
const (
	InventoryPath = "/api/hub/v1/inventory"
	ChangesPath   = "/api/hub/v1/changes"
	SnapshotPath  = "/api/hub/v1/snapshot"
)

// Limits on what a hub may send: an inventory is a few kilobytes for a
// real hub.
const (
	MaxInventoryBytes = 1 << 20
	MaxLocations      = 256
	MaxSwitches       = 4096 // over all locations
	MaxNameLen        = 200
	MaxVersionLen     = 100
)

// Inventory is what a hub reports of itself.
type Inventory struct {
	Version   string                  `json:"version"`
	Locations []bridge.RemoteLocation `json:"locations"`
}

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
