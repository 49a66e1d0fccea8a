package mqtt

// The driver's side of discovery: the topics it subscribes to, the
// messages it hands over, and the list it exposes.

import (
	"strings"
)

// discoverySource is the source of the hub's own questions to Gen2+
// Shelly devices, and so the first level of their answers' topic: one of
// its own, as each switch's replySource is.
func discoverySource(clientID string) string { return clientID + "-discovery" }

// openDiscovery starts discovery; newFleet subscribes to its topics.
func (d *driver) openDiscovery() {
	var st DiscoveredStore
	if s, ok := d.env.Store.(DiscoveredStore); ok {
		st = s
	}
	x := newDiscovery(d.log, st, discoverySource(d.set.ClientID))
	x.setUsed(d.devs)
	x.origin = func(topic string, payload []byte) (Origin, bool) {
		// d.broker is set before the hub's client connects, and so
		// before any message arrives.
		if d.broker == nil {
			return Origin{}, false
		}
		return d.broker.hook.origins.of(topic, payload)
	}
	x.ask = func(m message) {
		// From paho's router goroutine: publishing there must not wait.
		go d.publish(m)
	}
	x.run()
	d.disc = x
}

// discover hands a message to discovery, and subscribes to the
// availability topics of devices it lists for the first time. It never
// waits.
func (d *driver) discover(topic string, payload []byte) {
	if d.disc == nil {
		return
	}
	subs, _ := d.disc.handle(topic, payload)
	if len(subs) > 0 && d.connected() {
		filters := make(map[string]byte, len(subs))
		for _, t := range subs {
			// A switch's own topic is subscribed already: subscribing
			// again would have the broker send its retained message
			// anew, which the switch would take for a fresh report.
			if _, routed := d.plugs().routes[t]; !routed {
				filters[t] = qos
			}
		}
		if len(filters) > 0 {
			d.c.SubscribeMultiple(filters, nil)
		}
	}
}

// resubscribeDiscovered subscribes again, after a reconnect, to the
// availability topics of the devices listed.
func (d *driver) resubscribeDiscovered() {
	if d.disc == nil {
		return
	}
	filters := map[string]byte{}
	for _, t := range d.disc.availabilityTopics() {
		if _, routed := d.plugs().routes[t]; !routed {
			filters[t] = qos
		}
	}
	if len(filters) > 0 {
		d.c.SubscribeMultiple(filters, nil).WaitTimeout(subscribeTimeout)
	}
}

// Discovered lists the devices the driver heard announce themselves, by
// id: each with the switch entry that would use it and the switch of the
// config that already does, if any. It is bounded (maxDiscovered).
func (d *driver) Discovered() []Device {
	if d.disc == nil {
		return nil
	}
	return d.disc.Devices()
}

// Discoverer is what the mqtt driver offers the daemon's admin side.
type Discoverer interface {
	Discovered() []Device
}

var _ Discoverer = (*driver)(nil)

// discoveryTopic reports whether topic may concern discovery even when a
// switch reads it: a Gen2+ device's <prefix>/online.
func discoveryTopic(topic string) bool { return strings.HasSuffix(topic, "/online") }
