package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"golang.org/x/sys/unix"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

func TestEmbeddedBrokerLogins(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	h := startHub(t, hubConfig("broker: embedded\nlisten: "+addr+"\nusers: {plug: s3cret}",
		`id: esp, name: ESP, profile: esphome, prefix: node, object_id: relay`))

	connect := func(user, pass string) error {
		o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("login-" + user + pass).SetUsername(user).SetPassword(pass)
		o.SetConnectTimeout(2 * time.Second)
		c := paho.NewClient(o)
		tok := c.Connect()
		if !tok.WaitTimeout(3 * time.Second) {
			return fmt.Errorf("no CONNACK")
		}
		if tok.Error() == nil {
			c.Disconnect(0)
		}
		return tok.Error()
	}
	if err := connect("plug", "s3cret"); err != nil {
		t.Errorf("configured login refused: %v", err)
	}
	for _, bad := range [][2]string{{"plug", "wrong"}, {"", ""}, {"nobody", "s3cret"}, {"switchbridge-hub", ""}} {
		if err := connect(bad[0], bad[1]); err == nil {
			t.Errorf("login %q/%q accepted", bad[0], bad[1])
		}
	}
	// The hub's own client got in with its generated login: it hears the
	// plug's login announce the plug.
	o := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("esp-node").SetUsername("plug").SetPassword("s3cret")
	c := paho.NewClient(o)
	if tok := c.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("plug login: %v", tok.Error())
	}
	defer c.Disconnect(0)
	eventually(t, 3*time.Second, "hub connected to its broker, hearing the plug", func() bool {
		c.Publish("node/status", 0, false, "online")
		time.Sleep(20 * time.Millisecond)
		return h.state(t, "esp").Available
	})
}

func TestEmbeddedBrokerBindError(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	d, err := New(testEnv(t, "{broker: embedded, listen: \""+l.Addr().String()+"\"}"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Open(context.Background()); err == nil {
		d.Close()
		t.Fatal("Open succeeded on a port in use")
	}
}

// The embedded broker's connections have Nagle's algorithm off, or every
// confirmation would wait ~40 ms on the client's delayed ACK.
func TestEmbeddedBrokerNoDelay(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := newGuardedListener(raw, 4, func(string) {}, nil)
	defer l.Close()
	go func() {
		if c, err := net.Dial("tcp", raw.Addr().String()); err == nil {
			time.Sleep(200 * time.Millisecond)
			c.Close()
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := c.(*slotConn).Conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var v int
	var serr error
	if err := sc.Control(func(fd uintptr) { v, serr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if v == 0 {
		t.Error("TCP_NODELAY is off on an accepted connection")
	}
}

// failingListener fails its first fails Accepts (all of them when fails
// is negative) with EMFILE, as a hub out of file descriptors sees.
type failingListener struct {
	net.Listener
	fails int
	calls atomic.Int64
}

func (l *failingListener) Accept() (net.Conn, error) {
	if n := l.calls.Add(1); l.fails < 0 || n <= int64(l.fails) {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// logLines collects log output written from any goroutine.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// serveListener runs the broker's listener over inner, handing each
// accepted connection to the returned channel, and closes it at the end of
// the test. served is closed when Serve returns.
func serveListener(t *testing.T, inner net.Listener) (l *hubListener, logs *logLines, conns <-chan net.Conn, served <-chan struct{}) {
	t.Helper()
	logs = &logLines{}
	l = newHubListener(inner, slog.New(slog.NewTextHandler(logs, nil)), func(net.Conn, any) {}, func() {})
	accepted := make(chan net.Conn, 4)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.Serve(func(_ string, c net.Conn) error {
			accepted <- c
			return nil
		})
	}()
	t.Cleanup(func() { l.Close(func(string) {}) })
	return l, logs, accepted, done
}

// A failed accept (EMFILE) does not end the broker's service: it is logged
// and retried.
func TestEmbeddedBrokerAcceptRetry(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l, logs, conns, served := serveListener(t, &failingListener{Listener: raw, fails: 1})
	c, err := net.DialTimeout("tcp", raw.Addr().String(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case sc := <-conns:
		sc.Close()
	case <-time.After(3 * time.Second):
		t.Fatal("no connection accepted after a failed accept")
	}
	if out := logs.String(); !strings.Contains(out, "too many open files") || !strings.Contains(out, "retrying") {
		t.Errorf("the failed accept was not logged: %q", out)
	}
	l.Close(func(string) {})
	select {
	case <-served:
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return once the listener was closed")
	}
}

// Accepts that keep failing are retried with a pause and logged once per
// interval, and closing the listener ends the retries at once.
func TestEmbeddedBrokerAcceptFailuresLogged(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fl := &failingListener{Listener: raw, fails: -1}
	l, logs, _, served := serveListener(t, fl)
	eventually(t, 3*time.Second, "accept retried", func() bool { return fl.calls.Load() >= 5 })
	if n := strings.Count(logs.String(), "accepting an MQTT connection failed"); n != 1 {
		t.Errorf("%d log lines for failed accepts within %s, want 1", n, refusalLogEvery)
	}
	// This listener never reports itself closed: Serve stops because the
	// hub closed it.
	l.Close(func(string) {})
	select {
	case <-served:
	case <-time.After(3 * time.Second):
		t.Fatal("Serve did not return once the listener was closed")
	}
}

// Closing the broker while clients leave returns, and closes every client
// still connected. mochi's own Close path (Clients.GetByListener) takes the
// clients' read lock twice; a client leaving in between (Clients.Delete
// waiting for the write lock) left both stuck for good, so a hub could
// hang on reload or shutdown. The window is narrow, so each round lines up
// many departures with the close; the test bounds every round. Clients
// also keep arriving meanwhile, which raced with mochi's wait for its
// clients at close.
func TestEmbeddedBrokerCloseWhileClientsLeave(t *testing.T) {
	const rounds, clients = 8, 48
	log := slog.New(slog.NewTextHandler(&logLines{}, nil))
	for round := range rounds {
		set := Settings{Listen: "127.0.0.1:0", MaxPacketSize: DefaultMaxPacketSize, MaxClients: DefaultMaxClients}
		rules := newBrokerRules(HubLogin, "switchbridge-test", nil, nil)
		b, err := startEmbedded(embeddedOptions{set: set, hubClientID: "switchbridge-test", rules: rules}, log)
		if err != nil {
			t.Fatal(err)
		}
		conns := make([]net.Conn, clients)
		for i := range conns {
			c, err := net.DialTimeout("tcp", b.dialAddr, 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write(mqttConnect(4, fmt.Sprintf("c%d-%d", round, i), "", "")); err != nil {
				t.Fatal(err)
			}
			if code, err := readConnack(c); err != nil || code != 0 {
				t.Fatalf("client %d: CONNACK %d, %v", i, code, err)
			}
			conns[i] = c
		}
		// Every other client leaves as the broker closes.
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := 0; i < clients; i += 2 {
			wg.Add(1)
			go func(c net.Conn) {
				defer wg.Done()
				<-start
				c.Close()
			}(conns[i])
		}
		// Departures at full rate: each takes the clients' write lock, as a
		// client leaving does, which is what the double read lock needs to
		// deadlock.
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for {
				select {
				case <-stop:
					return
				default:
					b.srv.Clients.Delete("gone")
				}
			}
		}()
		// New clients arrive as it closes, some still in their handshake
		// when it does: mochi's close waits on its count of clients, which
		// each adds itself to on its own goroutine.
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", b.dialAddr, time.Second)
				if err != nil {
					continue // closed: keep trying until the close returned
				}
				c.Write(mqttConnect(4, fmt.Sprintf("late%d-%d", round, i), "", ""))
				c.Close()
			}
		}()
		closed := make(chan struct{})
		go func() {
			<-start
			b.close()
			close(closed)
		}()
		close(start)
		select {
		case <-closed:
			close(stop)
		case <-time.After(10 * time.Second):
			close(stop)
			buf := make([]byte, 1<<20)
			t.Fatalf("round %d: broker close did not return in 10 s\n%s", round, buf[:runtime.Stack(buf, true)])
		}
		wg.Wait()
		for i := 1; i < clients; i += 2 {
			if !closedByPeer(conns[i]) {
				t.Fatalf("round %d: client %d still connected after the broker closed", round, i)
			}
		}
	}
}

// On the embedded broker the hub subscribes and commands at QoS 0, so no
// in-flight queue of the broker ever holds a message of the hub's (see
// qos); a subscriber asking for QoS 1 gets the hub's commands at 0.
func TestEmbeddedBrokerHubUsesQoS0(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(t))
	d := openDriver(t, "broker: embedded\nlisten: "+addr, `id: tas, name: Tas, profile: tasmota, topic: tas1`)
	hub, ok := d.broker.srv.Clients.Get(d.set.ClientID)
	if !ok {
		t.Fatal("the hub's client is not on its broker")
	}
	eventually(t, 3*time.Second, "the hub subscribed", func() bool { return hub.State.Subscriptions.Len() > 0 })
	for filter, sub := range hub.State.Subscriptions.GetAll() {
		if sub.Qos != 0 {
			t.Errorf("the hub subscribed to %s at QoS %d", filter, sub.Qos)
		}
	}

	c, err := pahoConnect(addr, "observer", "", "")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect(0)
	if q := commandQoS(t, d, c); q != 0 {
		t.Errorf("the hub's command arrived at QoS %d, want 0", q)
	}
	if n := hub.State.Inflight.Len(); n != 0 {
		t.Errorf("%d messages in flight for the hub's client", n)
	}
}
