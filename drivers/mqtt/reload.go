// A reload while the driver runs: the plugs and logins that did not change
// keep their connections to the broker, and the hub keeps what it knows of
// them; only what changed is added, dropped or refused.

package mqtt

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
)

// inPlace are the mqtt: keys a reload applies without restarting the
// driver: the embedded broker's logins and the commands' timeout (read by
// each command; a reload runs while none does). The switches, and the
// broker's topic rules derived from them and the logins, are applied in
// place too.
var inPlace = []string{"users", "confirm_timeout"}

// Reload implements drivers.Reloader. It takes next's switches and logins
// unless another setting changed (restartFor says which), which needs the
// driver, and an embedded broker with it, to start again.
func (d *driver) Reload(ctx context.Context, next drivers.Driver) (map[string]bridge.Device, bool) {
	n, ok := next.(*driver)
	if !ok || d.c == nil || d.closed.Load() {
		return nil, false
	}
	if keys := restartFor(d.set, n.set); len(keys) > 0 {
		msg := "reload: mqtt settings changed that need the MQTT driver to start again; every plug is unavailable until it reports again"
		if d.broker != nil {
			msg = "reload: mqtt settings changed that need the embedded broker to start again: its listener closes, every plug is disconnected and is unavailable until it reconnects and reports"
		}
		d.log.Warn(msg, "keys", strings.Join(keys, ","))
		return nil, false
	}

	prev := d.plugs()
	was := make(map[string]*device, len(prev.devs))
	for _, dev := range prev.devs {
		was[dev.id] = dev
	}
	var devs, fresh []*device
	for _, nd := range n.devs {
		if od, ok := was[nd.id]; ok && od.options == nd.options {
			devs = append(devs, od)
			delete(was, nd.id)
			continue
		}
		nd.d = d
		if v, ok := d.env.LastValue(nd.id); ok {
			nd.value = v // shown until the plug reports, as at Open
		}
		devs = append(devs, nd)
		fresh = append(fresh, nd)
	}

	// The broker first: the new rules let the new plugs in.
	var dropped []string
	if d.broker != nil {
		d.broker.hook.retained.resize(retainedTotal(n.set))
		dropped = d.broker.reload(newAuthConfig(d.broker.hubUser, d.broker.hubPassword, n.set.Users, n.brokerRules()))
	}
	d.set.Users, d.set.ConfirmTimeout = n.set.Users, n.set.ConfirmTimeout
	f := d.newFleet(devs)
	d.devs, d.byID = devs, make(map[string]*device, len(devs))
	for _, dev := range devs {
		d.byID[dev.id] = dev
	}
	// From here on messages reach the new fleet; then the broker is asked
	// for what it adds (its retained messages come to the new plugs).
	d.fleet.Store(f)
	if d.disc != nil {
		d.disc.setUsed(devs)
	}
	for _, dev := range was {
		d.retire(dev)
	}
	d.resubscribe(ctx, prev.filters, f.filters)
	for _, dev := range fresh {
		dev.d.notify(dev.id, dev.State()) // not heard from yet
		if d.connected() {
			d.resync(dev)
		}
	}
	d.log.Info("reloaded in place: the broker connection and the unchanged plugs kept",
		"plugs_kept", len(devs)-len(fresh), "plugs_added", len(fresh), "plugs_removed", len(was), "clients_disconnected", len(dropped))
	return f.deviceMap(), true
}

// deviceMap is the fleet's devices by switch id, for the hub.
func (f *fleet) deviceMap() map[string]bridge.Device {
	out := make(map[string]bridge.Device, len(f.devs))
	for _, dev := range f.devs {
		out[dev.id] = dev
	}
	return out
}

// restartFor names the keys that differ between two mqtt: sections other
// than those a reload applies in place.
func restartFor(a, b Settings) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var keys []string
	for i := range va.NumField() {
		f := va.Type().Field(i)
		key, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || key == "" || slices.Contains(inPlace, key) {
			continue
		}
		if !reflect.DeepEqual(va.Field(i).Interface(), vb.Field(i).Interface()) {
			keys = append(keys, key)
		}
	}
	return keys
}

// retire ends a plug a reload removed (or whose switch changed): no more
// questions to it, no request left waiting for its answer.
func (d *driver) retire(dev *device) {
	dev.mu.Lock()
	dev.stopAskingLocked()
	for _, w := range dev.waiters {
		w.done <- fmt.Errorf("the switch was removed from the config: %w", bridge.ErrUnavailable)
	}
	clear(dev.waiters)
	dev.waiters = dev.waiters[:0]
	dev.mu.Unlock()
	d.mu.Lock()
	for id, c := range d.pending {
		if c.dev == dev {
			delete(d.pending, id)
		}
	}
	d.mu.Unlock()
}

// resubscribe subscribes to the filters the new fleet adds and drops
// those it no longer needs. While the broker is away it does nothing:
// the next connect subscribes to the new fleet's filters.
func (d *driver) resubscribe(ctx context.Context, prev, next map[string]byte) {
	add := map[string]byte{}
	for t, q := range next {
		if _, ok := prev[t]; !ok {
			add[t] = q
		}
	}
	var gone []string
	for t := range prev {
		if _, ok := next[t]; !ok {
			gone = append(gone, t)
		}
	}
	wait := subscribeTimeout
	if dl, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(dl))
	}
	if len(add) > 0 && d.connected() {
		tok := d.c.SubscribeMultiple(add, nil)
		if !tok.WaitTimeout(wait) || tok.Error() != nil {
			// The plugs added stay unavailable until the next connect
			// subscribes to them.
			d.log.Error("reload: cannot subscribe to the new plugs' topics", "broker", d.url, "topics", len(add), "error", tok.Error())
		}
	}
	if u, ok := d.c.(interface {
		Unsubscribe(topics ...string) paho.Token
	}); ok && len(gone) > 0 && d.connected() {
		// Unrouted messages are dropped anyway; this only spares the
		// broker sending them.
		u.Unsubscribe(gone...).WaitTimeout(wait)
	}
}

// reload puts next's logins and rules in force and disconnects each client
// they no longer admit (see admits): that client's will goes out, as when
// it drops. Every other client keeps its connection, and the new rules
// apply to its next message. It returns the logins of the clients
// disconnected.
func (b *embeddedBroker) reload(next *authConfig) []string {
	prev := b.hook.cfg.Swap(next)
	var dropped []string
	for _, cl := range b.srv.Clients.GetAll() {
		user := string(cl.Properties.Username)
		if cl.Closed() || cl.Net.Inline || user == b.hubUser || admits(prev, next, user, cl.ID) {
			continue
		}
		b.log.Warn("reload: MQTT client disconnected: its login was removed or its password changed",
			"login", bridge.Untrusted(user), "client", bridge.Untrusted(cl.ID))
		_ = b.srv.DisconnectClient(cl, packets.ErrNotAuthorized)
		dropped = append(dropped, user)
	}
	return dropped
}

// admits reports whether a client that logged in as user under prev, with
// client id id, would log in under next: its login is still there with
// the same password (or, one that came in without a configured login,
// there are still no logins), and no other login claims its client id.
func admits(prev, next *authConfig, user, id string) bool {
	was, had := prev.logins[user]
	now, has := next.logins[user]
	switch {
	case had && (!has || now != was):
		return false
	case !had && (!next.anonymous || has):
		return false
	}
	if owner, ok := next.clientIDOwner(id); ok && owner != user {
		return false
	}
	return true
}
