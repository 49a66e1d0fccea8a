package link

// The inventory a hub reports of itself: what it holds, the limits on it,
// and how the platform checks it.

import (
	"fmt"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/config"
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

// CheckInventory applies the limits on what a hub may report: counts,
// lengths, ids as the config allows them, each location and switch once,
// known commands.
func CheckInventory(inv *Inventory) error {
	if len(inv.Version) > MaxVersionLen {
		return fmt.Errorf("version is longer than %d bytes", MaxVersionLen)
	}
	if len(inv.Locations) > MaxLocations {
		return fmt.Errorf("%d locations: at most %d", len(inv.Locations), MaxLocations)
	}
	locs := map[int64]bool{}
	sws := map[string]bool{}
	for _, l := range inv.Locations {
		switch {
		case l.ID <= 0:
			return fmt.Errorf("location id %d: ids are positive", l.ID)
		case locs[l.ID]:
			return fmt.Errorf("location %d is listed twice", l.ID)
		case l.Name == "" || len(l.Name) > MaxNameLen:
			return fmt.Errorf("location %d: a name of 1-%d bytes is required", l.ID, MaxNameLen)
		}
		locs[l.ID] = true
		for _, s := range l.Switches {
			switch {
			case !config.SwitchIDPattern.MatchString(s.ID):
				return fmt.Errorf("location %d: switch id %.70q is not a valid id", l.ID, s.ID)
			case sws[s.ID]:
				return fmt.Errorf("switch %q is listed twice", s.ID)
			case s.Name == "" || len(s.Name) > MaxNameLen:
				return fmt.Errorf("switch %q: a name of 1-%d bytes is required", s.ID, MaxNameLen)
			case len(s.Commands) > len(bridge.Commands):
				return fmt.Errorf("switch %q: too many commands", s.ID)
			}
			for _, c := range s.Commands {
				if _, err := bridge.ParseCommand(string(c)); err != nil {
					return fmt.Errorf("switch %q: unknown command %.20q", s.ID, c)
				}
			}
			sws[s.ID] = true
			if len(sws) > MaxSwitches {
				return fmt.Errorf("more than %d switches", MaxSwitches)
			}
		}
	}
	return nil
}
