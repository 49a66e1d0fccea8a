package mqtt

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/drivers/mqtt/internal/nostore"
)

// Timeouts of the broker connection. None of them is a config key: they
// bound waits on the broker, not on plugs.
const (
	connectTimeout    = 10 * time.Second // one connection attempt
	startupWait       = 5 * time.Second  // Open waits this long for the broker, then goes on unconnected
	subscribeTimeout  = 10 * time.Second
	retryLogEvery     = 5 * time.Minute
	writeTimeout      = 5 * time.Second
	disconnectQuiesce = 250 // ms Close lets in-flight work finish
)

// connect makes the client (and the embedded broker) and connects it,
// waiting at most startupWait for the broker: one that is not there yet is
// retried in the background while the plugs show as unavailable.
func (d *driver) connect(ctx context.Context) error {
	d.first = make(chan struct{})
	d.stop = make(chan struct{})

	o := paho.NewClientOptions()
	o.SetClientID(d.set.ClientID)
	o.SetKeepAlive(d.set.KeepAlive.Std())
	o.SetConnectTimeout(connectTimeout)
	o.SetWriteTimeout(writeTimeout)
	o.SetCleanSession(true)
	o.SetAutoReconnect(true)
	o.SetConnectRetry(true)
	// No waits of paho's own: d.retry decides them (see backoff.go).
	o.SetMaxReconnectInterval(0)
	o.SetConnectRetryInterval(0)
	// Handlers run one after another on paho's router goroutine, in the
	// order the broker delivered the messages, which is what keeps a plug's
	// ON-then-OFF from being applied as OFF-then-ON. The paho trap of a
	// handler that stalls the client does not apply: dispatch only parses
	// and updates memory; it never waits or publishes, and the hub's
	// Notify, which it calls, must not block (drivers.Env).
	o.SetOrderMatters(true)
	o.SetDefaultPublishHandler(func(c paho.Client, m paho.Message) {
		d.obs.message(dirIn)
		d.dispatch(c, m)
	})
	o.SetOnConnectHandler(func(paho.Client) {
		d.obs.connected(d.url, true)
		d.onConnect()
	})
	// paho keeps every publish the broker has not acknowledged and sends it
	// again after a reconnect, clean session or not. A command is confirmed
	// by its plug before its deadline or it failed; sent again after a
	// broker restart it would switch the plug long after the client was
	// told it failed. So nothing is kept (nostore): such a command's
	// token never completes, and the command ends at its deadline.
	// Emptying a kept store before each reconnect was not enough: a
	// command published as the connection came back was found by paho's
	// resend pass, which marks it as a duplicate while paho's writer sends
	// it (a data race).
	o.SetStore(nostore.Store{})
	o.SetReconnectingHandler(func(paho.Client, *paho.ClientOptions) {
		d.obs.reconnect()
		d.onDown()
	})
	o.SetConnectionLostHandler(func(_ paho.Client, err error) {
		d.obs.connected(d.url, false)
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
		if _, ok := n.(paho.ConnectionNotificationConnecting); ok {
			// paho delivers this on its connect goroutine just before
			// an attempt (the first, each retry at start-up and each
			// reconnect), so waiting here delays that attempt and
			// nothing else.
			d.pause(d.retry.attempt(time.Now()))
			return
		}
		logMu.Lock()
		defer logMu.Unlock()
		switch n := n.(type) {
		case paho.ConnectionNotificationFailed:
			d.retry.failure(n.Reason)
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
		for _, w := range d.warnings() {
			d.log.Warn(w.Msg)
		}
		b, err := startEmbedded(embeddedOptions{set: d.set, hubClientID: d.set.ClientID, rules: d.brokerRules(),
			refused: d.obs.brokerRefusal, clientIDs: d.clientIDStore(), onboarding: d.onboardingStore()}, d.log)
		if err != nil {
			return err
		}
		d.broker = b
		d.obs.brokerRunning(b, true)
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
				return err
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
	d.obs.connected(d.url, false)

	d.c = newClient(o)
	tok := d.c.Connect()
	wait := time.NewTimer(startupWait)
	defer wait.Stop()
	select {
	case <-d.first:
	case <-tok.Done():
		if err := tok.Error(); err != nil {
			d.Close()
			return fmt.Errorf("connecting to MQTT broker %s: %w", d.url, err)
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
	return nil
}

// pause waits before a connection attempt, or until Close.
func (d *driver) pause(wait time.Duration) {
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-d.stop:
	}
}

// onConnect runs in its own goroutine after every (re)connect. The session
// is clean, so the subscriptions are made again here; once the broker has
// confirmed them, every plug that can be asked for its state is asked
// until it answers (resync).
func (d *driver) onConnect() {
	// The fleet now: a reload after this subscribes to what it adds, once
	// the connection is ready (below).
	f := d.plugs()
	filters := f.filters
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
	// A reload that replaced the fleet meanwhile found the connection not
	// ready and left its subscriptions to here.
	for g := d.plugs(); g != f; g = d.plugs() {
		f = g
		if tok := d.c.SubscribeMultiple(f.filters, nil); !tok.WaitTimeout(subscribeTimeout) || tok.Error() != nil {
			d.log.Error("cannot subscribe to the reloaded plugs' topics", "broker", d.url, "error", tok.Error())
		}
	}
	d.once.Do(func() { close(d.first) })
	d.log.Info("MQTT broker connected", "broker", d.url, "topics", len(f.filters))
	d.resubscribeDiscovered()
	for _, dev := range f.devs {
		dev.apply(report{}, true)
	}
	for _, dev := range f.devs {
		d.resync(dev)
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
	for _, dev := range d.plugs().devs {
		dev.down()
		ids = append(ids, dev.id)
	}
	if wasReady && !d.closed.Load() {
		sort.Strings(ids)
		d.log.Warn("MQTT broker unreachable: switches unavailable, answering from the cache", "broker", d.url, "switches", strings.Join(ids, ","))
	}
}

// publish sends m at qos and never retained: a retained command would be
// replayed to the plug at every reconnect (Tasmota's "ghost switching").
// This is the driver's only call to Publish.
//
// Nothing is handed to paho while the driver knows the broker is away:
// paho would keep it and send it after the reconnect, late (see the store
// in connect), and its resending of a kept publish races with its own
// writer (the race detector catches it in paho's resume).
func (d *driver) publish(m message) paho.Token {
	if !d.connected() {
		return failedToken{errBrokerAway}
	}
	d.obs.message(dirOut)
	return d.c.Publish(m.topic, qos, false, m.payload)
}

var errBrokerAway = errors.New("not connected to the MQTT broker")

// failedToken is the token of a publish the driver did not hand to paho.
type failedToken struct{ err error }

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (failedToken) Wait() bool                     { return true }
func (failedToken) WaitTimeout(time.Duration) bool { return true }
func (failedToken) Done() <-chan struct{}          { return closedChan }
func (t failedToken) Error() error                 { return t.err }

// connected reports whether commands can reach the broker now.
func (d *driver) connected() bool {
	return d.ready.Load() && !d.closed.Load() && d.c.IsConnectionOpen()
}
