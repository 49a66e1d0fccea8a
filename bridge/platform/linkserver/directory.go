package linkserver

import (
	"context"
	"sync"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/bridge/platform/oauth"
)

// Directory is the platform's view of its hubs for consent, discovery and
// the install rules: every hub's locations with their switches, where the
// hub is, and whether it called lately. It reads the registry again when
// its copy is older than a second, so a hub added or removed by the CLI
// (another process) shows within that.
type Directory struct {
	store PlatformStore
	own   oauth.Locations
	now   func() time.Time

	mu     sync.Mutex
	loaded time.Time
	locs   map[int64]oauth.HubLocation
	order  []int64
}

const directoryTTL = time.Second

// NewDirectory returns a Directory over the registry in st; own are the
// platform's own locations (its config), which come first.
func NewDirectory(st PlatformStore, own oauth.Locations) *Directory {
	return &Directory{store: st, own: own, now: time.Now}
}

func (d *Directory) load(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if d.locs != nil && now.Sub(d.loaded) < directoryTTL {
		return nil
	}
	hubs, err := d.store.Hubs(ctx)
	if err != nil {
		return err
	}
	locs := map[int64]oauth.HubLocation{}
	var order []int64
	for _, h := range hubs {
		online := !h.LastSeen.IsZero() && now.Sub(h.LastSeen) < OnlineWithin
		for _, l := range h.Locations {
			locs[l.ID] = oauth.HubLocation{RemoteLocation: l, HubName: h.Name, BaseURL: h.BaseURL, Online: online}
			order = append(order, l.ID)
		}
	}
	d.locs, d.order, d.loaded = locs, order, now
	return nil
}

// HubLocations implements oauth.HubDirectory.
func (d *Directory) HubLocations(ctx context.Context) ([]oauth.HubLocation, error) {
	if err := d.load(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]oauth.HubLocation, 0, len(d.order))
	for _, id := range d.order {
		out = append(out, d.locs[id])
	}
	return out, nil
}

// HubLocation implements oauth.HubDirectory.
func (d *Directory) HubLocation(ctx context.Context, id int64) (oauth.HubLocation, bool, error) {
	if err := d.load(ctx); err != nil {
		return oauth.HubLocation{}, false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.locs[id]
	return l, ok, nil
}

// Location implements oauth.Locations for the install rules: the
// platform's own locations, then those its hubs hold.
func (d *Directory) Location(id int64) (*bridge.Location, bool) {
	if d.own != nil {
		if l, ok := d.own.Location(id); ok {
			return l, true
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, ok, err := d.HubLocation(ctx, id)
	if err != nil || !ok {
		return nil, false
	}
	loc := &bridge.Location{ID: l.ID, Name: l.Name}
	for _, s := range l.Switches {
		loc.Switches = append(loc.Switches, s.ID)
	}
	return loc, true
}
