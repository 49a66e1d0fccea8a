package mqtt

import (
	paho "github.com/eclipse/paho.mqtt.golang"
)

// route is one plug reading one topic.
type route struct {
	dev   *device
	parse parser
}

// fleet is the plugs the driver serves and how a message reaches them.
// Open makes the first; a reload (reload.go) replaces it whole, so paho's
// router and the driver's goroutines each see one consistent fleet.
type fleet struct {
	devs []*device
	// routes maps each topic to the plugs reading it; replies maps each
	// reply topic of the plugs' repliers to its switch.
	routes  map[string][]route
	replies map[string]*device
	// filters are the subscriptions the fleet needs.
	filters map[string]byte
}

// newFleet builds the routing table of every plug's topics, and of the
// reply topics of the plugs whose firmware answers requests, and the
// filters to subscribe to.
func (d *driver) newFleet(devs []*device) *fleet {
	f := &fleet{devs: devs, routes: map[string][]route{}, replies: map[string]*device{}, filters: map[string]byte{}}
	for _, dev := range devs {
		for t, p := range dev.plug.routes {
			f.routes[t] = append(f.routes[t], route{dev: dev, parse: p})
			f.filters[t] = qos
		}
		if r := dev.plug.requests; r != nil {
			t := r.replyTopic(replySource(d.set.ClientID, dev.id))
			f.replies[t] = dev
			f.filters[t] = qos
		}
	}
	if d.disc != nil {
		// What devices announce, whatever the switches are.
		for _, t := range d.disc.filters() {
			f.filters[t] = qos
		}
	}
	return f
}

// plugs is the fleet the driver serves now.
func (d *driver) plugs() *fleet { return d.fleet.Load() }

// qos is the QoS of the hub's subscriptions and commands, on every broker:
// 0. A command is confirmed by its plug's own report, or times out and is
// reported as failed; it is never sent again after a reconnect (it would
// switch a plug long after its request was answered). So QoS 1 would buy
// only a PUBACK per command and per plug. The plugs publish their reports
// at QoS 0 (Tasmota's PubSubClient, ESPHome, Shelly and Zigbee2MQTT by
// default), which a subscription at 1 cannot raise, and the hub's session
// is clean, so nothing is queued for it across a reconnect either way:
// the retained state and last wills come again when it subscribes. On the
// embedded broker QoS 0 also keeps mochi's in-flight queues of the hub and
// its plugs empty: mochi v2.7.9 takes a client's in-flight read lock twice
// after each packet it reads (Inflight.NextImmediate) while that queue is
// not empty, which can deadlock two connections, the hub's included.
const qos = 0

// dispatch handles every message the broker delivers. It must not block.
func (d *driver) dispatch(_ paho.Client, m paho.Message) {
	topic, payload := m.Topic(), m.Payload()
	f := d.plugs()
	if plugs, ok := f.routes[topic]; ok {
		for _, r := range plugs {
			rep := r.parse(payload)
			rep.retained = m.Retained()
			r.dev.apply(rep, false)
		}
		if discoveryTopic(topic) {
			d.discover(topic, payload)
		}
		return
	}
	if dev, ok := f.replies[topic]; ok {
		d.answer(dev, payload)
		return
	}
	d.discover(topic, payload)
}

// query asks dev for its state where the firmware allows it. It does not
// wait: the answer arrives as a state report.
func (d *driver) query(dev *device) {
	if m, ok := d.queryMessage(dev); ok && !d.closed.Load() {
		d.publish(m)
	}
}

// queryMessage is the message that asks dev for its state, if the
// firmware can be asked.
func (d *driver) queryMessage(dev *device) (message, bool) {
	switch {
	case dev.plug.requests != nil:
		// A query the plug never answered is dropped when it is asked again.
		d.mu.Lock()
		for id, c := range d.pending {
			if c.dev == dev && c.target == "" {
				delete(d.pending, id)
			}
		}
		d.mu.Unlock()
		_, m := d.request(dev, "")
		return m, true
	case dev.plug.query != nil:
		return *dev.plug.query, true
	}
	return message{}, false
}
