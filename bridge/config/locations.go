package config

// The config's locations as the domain holds them.

import "github.com/switchbridge/switchbridge/bridge"

// BridgeLocations is the config's locations as bridge.Switchboard holds them:
// each with its switch ids in config order. (A platform's "hub
// locations", in the store and bridge/platform/linkserver, are those its
// hubs report.)
func (c *Config) BridgeLocations() []bridge.Location {
	var locs []bridge.Location
	for _, l := range c.Locations {
		bl := bridge.Location{ID: l.ID, Name: l.Name}
		for _, s := range l.Switches {
			bl.Switches = append(bl.Switches, s.ID)
		}
		locs = append(locs, bl)
	}
	return locs
}
