package oauth

// A platform with several hubs: the directory through which consent and
// discovery see the locations the hubs hold.

import (
	"context"

	"github.com/switchbridge/switchbridge/bridge"
)

// HubLocation is a location one of the platform's hubs holds, as its
// inventory says, and where that hub is.
type HubLocation struct {
	bridge.RemoteLocation
	HubName string
	// BaseURL is the hub's base_url: discovery sends clients there.
	BaseURL string
	// Online is false when the hub has not called the platform lately;
	// the consent page says so.
	Online bool
}

// HubDirectory is where the platform finds the locations its hubs hold.
type HubDirectory interface {
	// HubLocations lists every location a hub holds, by id.
	HubLocations(ctx context.Context) ([]HubLocation, error)
	// HubLocation returns the hub location with id; false when no hub
	// holds it.
	HubLocation(ctx context.Context, id int64) (HubLocation, bool, error)
}

// hubLocations lists the hub locations the user belongs to for the
// consent page; none when the platform has no hubs.
func (s *Server) hubLocations(ctx context.Context, u *bridge.User, checked map[int64]granted) []locationView {
	if s.opts.Hubs == nil {
		return nil
	}
	all, err := s.opts.Hubs.HubLocations(ctx)
	if err != nil {
		s.logger.Error("listing the hubs' locations for the consent page", "err", err)
		return nil
	}
	var out []locationView
	for _, l := range all {
		if !u.MemberOf(l.ID) {
			continue
		}
		v := remoteLocationView(l, checked[l.ID])
		out = append(out, v)
	}
	return out
}

// remoteLocationView is a hub's location as the consent page shows it,
// the switches in checked ticked.
func remoteLocationView(l HubLocation, checked granted) locationView {
	v := locationView{ID: l.ID, Name: l.Name, Hub: l.HubName, Offline: !l.Online}
	for _, sw := range l.Switches {
		v.Switches = append(v.Switches, checked.view(sw.ID, sw.Name, commandLimits(sw.Commands)))
	}
	return v
}

// commandLimits is limits for a switch known by its commands.
func commandLimits(cmds []bridge.Command) string {
	can := map[bridge.Command]bool{}
	for _, c := range cmds {
		can[c] = true
	}
	return limitsOf(func(c bridge.Command) bool { return can[c] })
}
