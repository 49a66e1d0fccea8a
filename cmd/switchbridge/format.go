package main

// How the commands print ids, counts and locations; shared by the
// command groups.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/link"
	"github.com/switchbridge/switchbridge/bridge/store"
)

func joinIDs(ids []int64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(parts, ",")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// locationsOf returns the locations a command may name: the config's own
// and, on a platform, those its hubs hold, through the directory the
// Issuer uses.
func locationsOf(cfg *config.Config, db *store.DB) (*link.Directory, error) {
	own, err := bridge.NewHub(cfg.BridgeLocations(), nil)
	if err != nil {
		return nil, err
	}
	return link.NewDirectory(db, own), nil
}

// locationLabel is "ID (Name)", or the id alone for a location neither in
// the config nor held by a hub.
func locationLabel(dir *link.Directory, id int64) string {
	if l, ok := dir.Location(id); ok {
		return fmt.Sprintf("%d (%s)", id, l.Name)
	}
	return fmt.Sprint(id)
}
