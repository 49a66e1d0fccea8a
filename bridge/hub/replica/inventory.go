package replica

// The inventory this hub reports of itself (link.Inventory).

import "github.com/switchbridge/switchbridge/bridge"

// InventoryOf lists a hub's locations and switches as a platform's consent
// page needs them.
func InventoryOf(hub *bridge.Switchboard) []bridge.RemoteLocation {
	var out []bridge.RemoteLocation
	for _, l := range hub.Locations() {
		rl := bridge.RemoteLocation{ID: l.ID, Name: l.Name, Switches: []bridge.RemoteSwitch{}}
		for _, id := range l.Switches {
			sw, ok := hub.Switch(id)
			if !ok {
				continue
			}
			rs := bridge.RemoteSwitch{ID: sw.ID, Name: sw.Name, Commands: []bridge.Command{}}
			for _, c := range bridge.Commands {
				if bridge.Supports(sw.Device, c) {
					rs.Commands = append(rs.Commands, c)
				}
			}
			rl.Switches = append(rl.Switches, rs)
		}
		out = append(out, rl)
	}
	return out
}
