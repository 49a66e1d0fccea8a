package mqtttest

import (
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/switchbridge/switchbridge/drivers/mqtt/internal/nostore"
)

// Plug is what every simulator can be made to do.
type Plug interface {
	// On is the relay's state (the first relay of a multi-relay device).
	On() bool
	// Set changes the relay locally, as its button does, and reports it.
	Set(on bool)
	// SetSilent makes the plug ignore commands: it neither switches nor
	// answers, like a plug whose radio drops everything it is sent.
	SetSilent(silent bool)
	// Crash drops the plug's connection without a goodbye, so the broker
	// publishes its last will (offline), and keeps it away.
	Crash()
	// Start connects (again, after Crash) and returns once the plug has
	// subscribed and announced itself.
	Start()
	// Commands is how many commands the plug has received.
	Commands() int
	// Connected reports whether the plug's connection to the broker is up.
	Connected() bool
	// SubscribeLate makes the plug, from its next connection on, announce
	// itself (online) at once but subscribe to its command topics only
	// after delay, and send nothing else on connecting (no state report),
	// as firmware does that sets up its subscriptions late and reports only
	// changes. A question sent before it subscribes is lost. 0 restores the
	// usual order: subscribe, announce, report.
	SubscribeLate(delay time.Duration)
}

// sim is the MQTT client and switches common to every simulator.
type sim struct {
	tb     testing.TB
	broker string
	id     string
	// set by the profile before start
	willTopic, willPayload string
	willQoS                byte
	subs                   map[string]byte
	handle                 func(topic string, payload []byte) // with mu not held
	announce               func()                             // on connecting: availability (online); mu not held
	greet                  func()                             // after announcing, the rest the firmware sends on connecting; may be nil
	persistent             bool                               // clean_session false: the broker keeps the session between connections

	// act serialises what the firmware does, as a device's single loop
	// does: a command or a button press runs to its last report before the
	// next starts, so reports of two actions never interleave.
	act sync.Mutex

	mu       sync.Mutex
	c        paho.Client
	conn     net.Conn
	crashed  bool
	silent   bool
	late     time.Duration
	commands int
	relays   []bool
}

func newSim(tb testing.TB, broker, id string, relays int) *sim {
	if relays < 1 {
		relays = 1
	}
	return &sim{tb: tb, broker: broker, id: id, subs: map[string]byte{}, relays: make([]bool, relays)}
}

// Start implements Plug.
func (s *sim) Start() {
	s.tb.Helper()
	s.mu.Lock()
	if s.c != nil {
		s.c.Disconnect(0)
	}
	s.crashed = false
	s.mu.Unlock()

	up := make(chan struct{}, 1)
	o := paho.NewClientOptions().AddBroker(s.broker).SetClientID(s.id)
	o.SetCleanSession(!s.persistent)
	o.SetKeepAlive(15 * time.Second)
	o.SetAutoReconnect(true)
	o.SetMaxReconnectInterval(500 * time.Millisecond)
	o.SetConnectRetry(true)
	o.SetConnectRetryInterval(200 * time.Millisecond)
	o.SetConnectTimeout(2 * time.Second)
	o.SetWill(s.willTopic, s.willPayload, s.willQoS, true)
	o.SetCustomOpenConnectionFn(func(u *url.URL, _ paho.ClientOptions) (net.Conn, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.crashed {
			return nil, errors.New("simulated plug is crashed")
		}
		c, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
		if err == nil {
			s.conn = c
		}
		return c, err
	})
	// A report made as the connection broke is lost, as on a device, not
	// kept and sent after the reconnect: paho's resending of a kept
	// publish also races with its own writer.
	o.SetStore(nostore.Store{})
	o.SetDefaultPublishHandler(func(_ paho.Client, m paho.Message) {
		s.act.Lock()
		defer s.act.Unlock()
		s.handle(m.Topic(), m.Payload())
	})
	o.SetOnConnectHandler(func(c paho.Client) {
		// Firmware subscribes after every connect; the session is clean.
		// This runs in a goroutine of its own, so it may wait.
		s.mu.Lock()
		late := s.late
		s.mu.Unlock()
		if late > 0 {
			s.announce()
			time.Sleep(late)
		}
		if tok := c.SubscribeMultiple(s.subs, nil); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			return
		}
		if late == 0 {
			s.announce()
			if s.greet != nil {
				s.greet()
			}
		}
		select {
		case up <- struct{}{}:
		default:
		}
	})
	c := paho.NewClient(o)
	s.mu.Lock()
	s.c = c
	s.mu.Unlock()
	c.Connect()
	select {
	case <-up:
	case <-time.After(5 * time.Second):
		s.tb.Fatalf("simulated plug %s did not connect to %s within 5s", s.id, s.broker)
	}
	s.tb.Cleanup(func() { c.Disconnect(0) })
}

// Crash implements Plug.
func (s *sim) Crash() {
	s.mu.Lock()
	s.crashed = true
	conn, c := s.conn, s.c
	s.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
	// Stop the reconnect loop; it cannot dial while crashed anyway.
	if c != nil {
		c.Disconnect(0)
	}
}

// SubscribeLate implements Plug.
func (s *sim) SubscribeLate(delay time.Duration) {
	s.mu.Lock()
	s.late = delay
	s.mu.Unlock()
}

// Connected reports whether the plug's connection to the broker is up.
func (s *sim) Connected() bool {
	s.mu.Lock()
	c := s.c
	s.mu.Unlock()
	return c != nil && c.IsConnectionOpen()
}

// SetSilent implements Plug.
func (s *sim) SetSilent(v bool) {
	s.mu.Lock()
	s.silent = v
	s.mu.Unlock()
}

// Commands implements Plug.
func (s *sim) Commands() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands
}

// On implements Plug.
func (s *sim) On() bool { return s.relay(0) }

func (s *sim) relay(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.relays[i]
}

// command counts a command and reports whether the plug acts on it.
func (s *sim) command() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands++
	return !s.silent
}

// setRelay sets relay i; it returns the previous state.
func (s *sim) setRelay(i int, on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	was := s.relays[i]
	s.relays[i] = on
	return was
}

// pub publishes without waiting: it runs on the client's message
// goroutine, like the firmware's loop. While the connection is down the
// message is dropped, as firmware drops it, rather than queued by paho and
// sent after reconnecting.
func (s *sim) pub(topic string, qos byte, retained bool, payload string) {
	s.mu.Lock()
	c := s.c
	s.mu.Unlock()
	if c != nil && c.IsConnectionOpen() {
		c.Publish(topic, qos, retained, payload)
	}
}

func onOff(on bool, onText, offText string) string {
	if on {
		return onText
	}
	return offText
}
