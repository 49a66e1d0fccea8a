package main

// How the commands print ids, counts and locations; shared by the
// command groups.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/switchbridge/switchbridge/bridge/config"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
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

// locationLabel is "ID (Name)", or the id alone for a location neither in
// the config nor held by a hub.
func locationLabel(dir *linkserver.Directory, id int64) string {
	if l, ok := dir.Location(id); ok {
		return fmt.Sprintf("%d (%s)", id, l.Name)
	}
	return fmt.Sprint(id)
}

// hasLocation reports whether the config has location id (else a hub of
// the platform may hold it).
func hasLocation(cfg *config.Config, id int64) bool {
	for _, l := range cfg.Locations {
		if l.ID == id {
			return true
		}
	}
	return false
}
