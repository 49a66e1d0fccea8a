// Package mqtt is the smart-plug driver: it reaches Tasmota, Shelly (Gen1
// and RPC), Zigbee2MQTT, ESPHome and generic MQTT switches through a broker,
// an external one or one it runs in-process, keeps their last reported state
// and confirms every command on the plug's own state topic.
package mqtt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/bridge"
	"github.com/switchbridge/switchbridge/drivers"
)

// Timeouts of the broker connection. None of them is a config key: they
// bound waits on the broker, not on plugs.
const (
	connectTimeout       = 10 * time.Second // one connection attempt
	startupWait          = 5 * time.Second  // Open waits this long for the broker, then goes on unconnected
	subscribeTimeout     = 10 * time.Second
	maxReconnectInterval = 30 * time.Second
	retryLogEvery        = 5 * time.Minute
	writeTimeout         = 5 * time.Second
	disconnectQuiesce    = 250 // ms Close lets in-flight work finish
)

// New is the driver's factory: it checks the mqtt: section.
func New(env drivers.Env) (drivers.Driver, error) {
	s, err := checkSettings(env.Settings)
	if err != nil {
		return nil, err
	}
	if s.ClientID == "" {
		host, _ := os.Hostname()
		s.ClientID = "switchbridge"
		if h := sanitizeLevel(host); h != "" {
			s.ClientID += "-" + h
		}
	}
	if env.Logger == nil {
		env.Logger = slog.New(slog.DiscardHandler)
	}
	if env.Notify == nil {
		env.Notify = func(string, bridge.State) {}
	}
	if env.LastValue == nil {
		env.LastValue = func(string) (bridge.Value, bool) { return "", false }
	}
	if env.MQTT == nil {
		env.MQTT = drivers.DiscardMQTT
	}
	return &driver{env: env, log: env.Logger, set: s, byID: map[string]*device{}}, nil
}

type driver struct {
	env  drivers.Env
	log  *slog.Logger
	set  Settings
	devs []*device
	byID map[string]*device

	// Set by Open.
	c      client
	broker *embeddedBroker
	url    string
	routes map[string][]route
	ready  atomic.Bool // connected and subscribed
	closed atomic.Bool
	first  chan struct{} // closed at the first ready
	once   sync.Once

	mu      sync.Mutex
	rpcSeq  uint64
	pending map[uint64]rpcCall

	// notifyMu orders notifications against Close: once silenced is set,
	// which Close does before it returns, no late message (paho's router
	// runs on for a moment after Disconnect) reaches the hub.
	notifyMu sync.RWMutex
	silenced bool
}

type route struct {
	dev   *device
	parse parser
}

// rpcCall is a Shelly RPC request waiting for its reply.
type rpcCall struct {
	dev    *device
	target bridge.Value // "" for Switch.GetStatus
}

// rpcSource is the src of the hub's Shelly RPC requests; replies come to
// <src>/rpc.
func (d *driver) rpcSource() string { return d.set.ClientID }

func (d *driver) Add(s drivers.Spec) error {
	p, err := buildPlug(s)
	if err != nil {
		return err
	}
	if _, dup := d.byID[s.ID]; dup {
		return fmt.Errorf("switch %q is added twice", s.ID)
	}
	dev := &device{d: d, id: s.ID, plug: p, cmd: make(chan struct{}, 1)}
	d.devs = append(d.devs, dev)
	d.byID[s.ID] = dev
	return nil
}

func (d *driver) Open(ctx context.Context) (map[string]bridge.Device, error) {
	if d.c != nil {
		return nil, errors.New("mqtt driver opened twice")
	}
	d.routes = map[string][]route{}
	filters := map[string]byte{}
	for _, dev := range d.devs {
		for t, p := range dev.plug.routes {
			d.routes[t] = append(d.routes[t], route{dev: dev, parse: p})
			filters[t] = 1
		}
		if dev.plug.rpc >= 0 {
			filters[d.rpcSource()+"/rpc"] = 1
		}
		if v, ok := d.env.LastValue(dev.id); ok {
			dev.value = v // shown until the plug reports; Updated stays zero
		}
	}
	d.pending = map[uint64]rpcCall{}
	d.first = make(chan struct{})

	o := paho.NewClientOptions()
	o.SetClientID(d.set.ClientID)
	o.SetKeepAlive(d.set.KeepAlive.Std())
	o.SetConnectTimeout(connectTimeout)
	o.SetWriteTimeout(writeTimeout)
	o.SetCleanSession(true)
	o.SetAutoReconnect(true)
	o.SetMaxReconnectInterval(maxReconnectInterval)
	o.SetConnectRetry(true)
	o.SetConnectRetryInterval(2 * time.Second)
	// Handlers run one after another on paho's router goroutine, in the
	// order the broker delivered the messages, which is what keeps a plug's
	// ON-then-OFF from being applied as OFF-then-ON. The paho trap of a
	// handler that stalls the client does not apply: dispatch only parses
	// and updates memory; it never waits or publishes, and the hub's
	// Notify, which it calls, must not block (drivers.Env).
	o.SetOrderMatters(true)
	o.SetDefaultPublishHandler(func(c paho.Client, m paho.Message) {
		d.env.MQTT.MQTTMessage("in")
		d.dispatch(c, m)
	})
	o.SetOnConnectHandler(func(paho.Client) {
		d.env.MQTT.MQTTConnected(d.url, true)
		d.onConnect(filters)
	})
	o.SetReconnectingHandler(func(paho.Client, *paho.ClientOptions) {
		d.env.MQTT.MQTTReconnect()
		d.onDown()
	})
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		d.env.MQTT.MQTTConnected(d.url, false)
		d.log.Warn("MQTT broker connection lost; reconnecting", "broker", d.url, "error", err)
	})
	// A broker that stays down must not flood the journal: the first
	// failure is logged, then one line every retryLogEvery with a count.
	var (
		logMu    sync.Mutex // notifications come from paho's connect loop and its other goroutines
		failures int
		lastLog  time.Time
	)
	o.SetConnectionNotificationHandler(func(_ paho.Client, n paho.ConnectionNotification) {
		logMu.Lock()
		defer logMu.Unlock()
		switch n := n.(type) {
		case paho.ConnectionNotificationFailed:
			failures++
			if failures == 1 || time.Since(lastLog) >= retryLogEvery {
				d.log.Warn("cannot connect to the MQTT broker; retrying", "broker", d.url, "error", n.Reason, "attempts", failures)
				lastLog = time.Now()
			}
		case paho.ConnectionNotificationConnected:
			failures = 0
		}
	})

	if d.set.Broker == Embedded {
		b, err := startEmbedded(d.set.Listen, d.set.Users, d.log)
		if err != nil {
			return nil, err
		}
		d.broker = b
		d.url = "tcp://" + b.dialAddr
		o.SetUsername(b.hubUser)
		o.SetPassword(b.hubPassword)
	} else {
		d.url = d.set.Broker
		o.SetUsername(d.set.Username)
		o.SetPassword(d.set.Password)
		if u, _ := url.Parse(d.url); u != nil && (u.Scheme == "ssl" || u.Scheme == "wss") {
			tc, err := loadTLS(d.set.TLS)
			if err != nil {
				return nil, err
			}
			o.SetTLSConfig(tc)
		}
	}
	o.AddBroker(d.url)
	if u, _ := url.Parse(d.url); u != nil && u.Scheme == "tcp" {
		o.SetCustomOpenConnectionFn(dialBuffered)
	}
	// Down until the first connect, so a broker that is unreachable from
	// the start shows as switchbridge_mqtt_connected 0, not as no series.
	d.env.MQTT.MQTTConnected(d.url, false)

	d.c = newClient(o)
	tok := d.c.Connect()
	wait := time.NewTimer(startupWait)
	defer wait.Stop()
	select {
	case <-d.first:
	case <-tok.Done():
		if err := tok.Error(); err != nil {
			d.Close()
			return nil, fmt.Errorf("connecting to MQTT broker %s: %w", d.url, err)
		}
		// Connected; wait for the subscriptions too.
		select {
		case <-d.first:
		case <-wait.C:
		case <-ctx.Done():
		}
	case <-wait.C:
	case <-ctx.Done():
	}
	if !d.ready.Load() {
		d.log.Warn("MQTT broker not reachable yet; the plugs are unavailable until it is", "broker", d.url)
	}
	out := make(map[string]bridge.Device, len(d.devs))
	for _, dev := range d.devs {
		out[dev.id] = dev
	}
	return out, nil
}

func (d *driver) Close() error {
	if !d.closed.CompareAndSwap(false, true) {
		return nil
	}
	d.onDown()
	d.notifyMu.Lock()
	d.silenced = true
	d.notifyMu.Unlock()
	if d.c != nil {
		d.c.Disconnect(disconnectQuiesce)
		d.env.MQTT.MQTTConnected(d.url, false)
	}
	if d.broker != nil {
		d.broker.close()
	}
	return nil
}

// notify passes a plug's state to the hub until the driver is closed.
func (d *driver) notify(id string, st bridge.State) {
	d.notifyMu.RLock()
	defer d.notifyMu.RUnlock()
	if !d.silenced {
		d.env.Notify(id, st)
	}
}

// onConnect runs in its own goroutine after every (re)connect. The session
// is clean, so the subscriptions are made again here, then every plug that
// can be asked for its state is asked.
func (d *driver) onConnect(filters map[string]byte) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		tok := d.c.SubscribeMultiple(filters, nil)
		if !tok.WaitTimeout(subscribeTimeout) {
			err = errors.New("no SUBACK within " + subscribeTimeout.String())
			continue
		}
		if err = tok.Error(); err == nil {
			break
		}
	}
	if err != nil {
		d.log.Error("cannot subscribe to the plugs' topics; they stay unavailable until the next reconnect", "broker", d.url, "error", err)
		return
	}
	if !d.c.IsConnectionOpen() || d.closed.Load() {
		return
	}
	d.ready.Store(true)
	d.once.Do(func() { close(d.first) })
	d.log.Info("MQTT broker connected", "broker", d.url, "topics", len(filters))
	for _, dev := range d.devs {
		dev.apply(report{}, true)
	}
	for _, dev := range d.devs {
		d.query(dev)
	}
}

// query asks dev for its state where the firmware allows it. It does not
// wait: the answer arrives as a state report.
func (d *driver) query(dev *device) {
	if m, ok := d.queryMessage(dev); ok && !d.closed.Load() {
		d.publish(m)
	}
}

// onDown marks every plug unavailable and fails the commands waiting for
// a confirmation. It runs before every reconnect attempt and at Close.
func (d *driver) onDown() {
	wasReady := d.ready.Swap(false)
	if !wasReady && !d.closed.Load() {
		return // already down: a further reconnect attempt
	}
	var ids []string
	for _, dev := range d.devs {
		dev.down()
		ids = append(ids, dev.id)
	}
	if wasReady && !d.closed.Load() {
		sort.Strings(ids)
		d.log.Warn("MQTT broker unreachable: switches unavailable, answering from the cache", "broker", d.url, "switches", strings.Join(ids, ","))
	}
}

// dispatch handles every message the broker delivers. It must not block.
func (d *driver) dispatch(_ paho.Client, m paho.Message) {
	topic, payload := m.Topic(), m.Payload()
	if plugs, ok := d.routes[topic]; ok {
		for _, r := range plugs {
			r.dev.apply(r.parse(payload), false)
		}
		return
	}
	if topic == d.rpcSource()+"/rpc" {
		d.rpcReply(payload)
	}
}

// rpcReply matches a Shelly RPC response with its request.
func (d *driver) rpcReply(payload []byte) {
	r, ok := parseRPCReply(payload)
	if !ok {
		return
	}
	d.mu.Lock()
	call, ok := d.pending[r.ID]
	delete(d.pending, r.ID)
	d.mu.Unlock()
	if !ok {
		return
	}
	switch {
	case r.Error != nil:
		call.dev.apply(report{failure: fmt.Sprintf("Shelly RPC error %d: %s", r.Error.Code, r.Error.Message)}, false)
	case call.target == "":
		call.dev.apply(report{value: parseShellyOutput(r.Result)}, false)
	default:
		// Switch.Set answers {"was_on":…} once the relay is set.
		call.dev.apply(report{value: call.target}, false)
	}
}

// rpcFrame builds a Shelly RPC request for dev and records it.
func (d *driver) rpcFrame(dev *device, target bridge.Value) (uint64, message) {
	d.mu.Lock()
	d.rpcSeq++
	id := d.rpcSeq
	d.pending[id] = rpcCall{dev: dev, target: target}
	d.mu.Unlock()
	frame := map[string]any{"id": id, "src": d.rpcSource()}
	if target == "" {
		frame["method"] = "Switch.GetStatus"
		frame["params"] = map[string]any{"id": dev.plug.rpc}
	} else {
		frame["method"] = "Switch.Set"
		frame["params"] = map[string]any{"id": dev.plug.rpc, "on": target == bridge.On}
	}
	b, _ := json.Marshal(frame)
	return id, message{topic: dev.plug.rpcPrefix + "/rpc", payload: b}
}

func (d *driver) forget(id uint64) {
	d.mu.Lock()
	delete(d.pending, id)
	d.mu.Unlock()
}

func (d *driver) queryMessage(dev *device) (message, bool) {
	switch {
	case dev.plug.rpc >= 0:
		// A query the plug never answered is dropped when it is asked again.
		d.mu.Lock()
		for id, call := range d.pending {
			if call.dev == dev && call.target == "" {
				delete(d.pending, id)
			}
		}
		d.mu.Unlock()
		_, m := d.rpcFrame(dev, "")
		return m, true
	case dev.plug.query != nil:
		return *dev.plug.query, true
	}
	return message{}, false
}

// publish sends m at QoS 1 and never retained: a retained command would be
// replayed to the plug at every reconnect (Tasmota's "ghost switching").
// This is the driver's only call to Publish.
func (d *driver) publish(m message) paho.Token {
	d.env.MQTT.MQTTMessage("out")
	return d.c.Publish(m.topic, 1, false, m.payload)
}

// connected reports whether commands can reach the broker now.
func (d *driver) connected() bool {
	return d.ready.Load() && !d.closed.Load() && d.c.IsConnectionOpen()
}

// sanitizeLevel keeps the characters a client id may hold.
func sanitizeLevel(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 128 && topicLevel.MatchString(string(r)) {
			b.WriteRune(r)
		}
	}
	out := b.String()
	if len(out) > 40 {
		out = out[:40]
	}
	return out
}
