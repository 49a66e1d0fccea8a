package admin

import (
	"context"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/linkserver"
)

// HubState is a registered hub as an owner's list shows it: its record,
// whether its link is up, and how far its replica is behind.
type HubState struct {
	*bridge.RegisteredHub
	// Link is "up" (it called within linkserver.OnlineWithin), "down"
	// (it called before) or "never".
	Link string
	// Lag is the platform's newest change sequence less the hub's
	// acknowledged cursor: the changes its replica has yet to apply.
	Lag int64
	// ConflictRecent reports whether the platform refused a second process
	// with this hub's credentials (Conflict, at ConflictAt) within
	// ConflictShown.
	ConflictRecent bool
}

// ConflictShown is how long a list shows that the platform refused a
// second process with a hub's credentials.
const ConflictShown = 24 * time.Hour

// HubStates lists the registered hubs with their link state as of now.
func (s *Service) HubStates(ctx context.Context, now time.Time) ([]HubState, error) {
	hubs, err := s.Store.Hubs(ctx)
	if err != nil {
		return nil, err
	}
	seq, err := s.Store.ChangeSeq(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]HubState, 0, len(hubs))
	for _, h := range hubs {
		st := HubState{RegisteredHub: h, Link: "never", Lag: max(seq-h.Cursor, 0)}
		if !h.LastSeen.IsZero() {
			st.Link = "down"
			if now.Sub(h.LastSeen) < linkserver.OnlineWithin {
				st.Link = "up"
			}
		}
		st.ConflictRecent = h.Conflict != "" && now.Sub(h.ConflictAt) < ConflictShown
		out = append(out, st)
	}
	return out, nil
}
