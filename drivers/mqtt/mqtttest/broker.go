// Package mqtttest runs a real Mosquitto for tests and simulates the smart
// plugs the mqtt driver speaks to (Tasmota, Shelly Gen1 and RPC,
// Zigbee2MQTT, ESPHome and generic), each as its own MQTT client that sends
// what the firmware sends.
package mqtttest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/logtest"
	"github.com/switchbridge/switchbridge/bridge/infra/porttest"
)

// MosquittoPath is where Debian's mosquitto package installs the broker.
const MosquittoPath = "/usr/sbin/mosquitto"

// Broker is a Mosquitto run for one test, on a free loopback port.
type Broker struct {
	// URL is tcp://127.0.0.1:<port>.
	URL string
	// Addr is 127.0.0.1:<port>.
	Addr string

	tb   testing.TB
	bin  string
	conf string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan error // receives when cmd has exited
	up     time.Time    // when the running broker was first seen accepting
}

// StartMosquitto starts Mosquitto with a generated config in tb.TempDir()
// and stops it when the test ends. Nagle's algorithm is off
// (set_tcp_nodelay), as every broker in front of switches should have it.
// Without the binary the test fails under CI=true and is skipped otherwise.
//
// The port is picked free, but another process may take it before
// Mosquitto binds it; Mosquitto then exits with "Address already in use",
// and it is started again on another port (up to porttest.Attempts
// starts, each logged).
func StartMosquitto(tb testing.TB) *Broker {
	tb.Helper()
	return startMosquitto(tb, func() int { return FreePort(tb) })
}

// startMosquitto is StartMosquitto on the ports pick gives, a new one for
// each start whose port was taken.
func startMosquitto(tb testing.TB, pick func() int) *Broker {
	tb.Helper()
	bin := MosquittoPath
	if _, err := os.Stat(bin); err != nil {
		p, lerr := exec.LookPath("mosquitto")
		if lerr != nil {
			msg := "mosquitto is not installed; install it with: sudo apt-get install mosquitto"
			if os.Getenv("CI") == "true" {
				tb.Fatal(msg)
			}
			tb.Skip(msg)
		}
		bin = p
	}
	dir := tb.TempDir()
	b := &Broker{
		tb:   tb,
		bin:  bin,
		conf: filepath.Join(dir, "mosquitto.conf"),
	}
	tb.Cleanup(b.Stop)
	for attempt := 1; ; attempt++ {
		b.listenOn(pick())
		b.mu.Lock()
		err := b.startLocked()
		b.mu.Unlock()
		if err == nil {
			return b
		}
		if !errors.Is(err, errPortTaken) || attempt == porttest.Attempts {
			tb.Fatalf("mosquitto did not start: %v", err)
		}
		tb.Logf("mosquitto could not listen on %s: another process took the port after it was picked; starting it again on another port (start %d of at most %d)",
			b.Addr, attempt+1, porttest.Attempts)
	}
}

// listenOn points the broker's address and config at port.
func (b *Broker) listenOn(port int) {
	b.tb.Helper()
	b.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	b.URL = "tcp://" + b.Addr
	// The log goes to stderr, which the test reads (a file in the test's
	// directory is out of reach of the user Mosquitto switches to when
	// started as root). log_type information brings the "running" line,
	// written once every listener is bound: what tells this broker's port
	// from one another process holds.
	conf := fmt.Sprintf(`# generated for one test
listener %d 127.0.0.1
allow_anonymous true
set_tcp_nodelay true
persistence false
log_dest stderr
log_type error
log_type warning
log_type notice
log_type information
max_queued_messages 10000
`, port)
	if err := os.WriteFile(b.conf, []byte(conf), 0o600); err != nil {
		b.tb.Fatal(err)
	}
}

// FreePort returns a loopback TCP port nothing listens on now, never 1883
// (a system Mosquitto may hold that one), and never one handed out before
// in this test process. Another process may take it before the caller
// binds it: a helper that starts a server process on it starts that again
// on another port when it finds the port taken (see porttest).
func FreePort(tb testing.TB) int {
	tb.Helper()
	port, err := porttest.Free(1883)
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

// Start runs the broker again after Stop, on the same port (its clients
// know it by its URL), and returns once it accepts connections. Retained
// messages do not survive a restart, as with a broker without persistence.
func (b *Broker) Start() {
	b.tb.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		b.tb.Fatal("mosquitto is already running")
	}
	var err error
	// The port may still be in TIME_WAIT from the previous run for a
	// moment; retry the start a few times. The port cannot move: a port
	// another process took since Stop ends the test.
	for attempt := 0; attempt < 20; attempt++ {
		if err = b.startLocked(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.tb.Fatalf("mosquitto did not start again on %s: %v", b.Addr, err)
}

// errPortTaken is a start that failed because another process holds the
// broker's port.
var errPortTaken = errors.New("the port is taken by another process")

// startLocked runs the broker once and returns when it accepts
// connections on its own listener; an error when it did not, the process
// gone. b.mu is held.
func (b *Broker) startLocked() error {
	cmd := exec.Command(b.bin, "-c", b.conf)
	out := &logtest.Buffer{}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting mosquitto: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	up, err := waitAccepting(b.Addr, exited)
	if err == nil {
		// What accepted may be another process on a port taken after
		// it was picked; this broker then exits.
		err = waitRunning(b.Addr, out, exited)
	}
	if err == nil {
		b.cmd, b.exited, b.up = cmd, exited, up
		return nil
	}
	_ = cmd.Process.Kill()
	if !errors.Is(err, errExited) {
		<-exited
	}
	if porttest.InUse(out.String()) {
		return fmt.Errorf("%w: %s: %v; log: %s", errPortTaken, b.Addr, err, out)
	}
	return fmt.Errorf("%v; log: %s", err, out)
}

// running is the line Mosquitto logs once it listens on every listener.
var running = regexp.MustCompile(`mosquitto version \S+ running`)

// waitRunning waits until the broker's log says it runs, or the process
// exits.
func waitRunning(addr string, log *logtest.Buffer, exited <-chan error) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if running.MatchString(log.String()) {
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("%w: %v", errExited, err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return fmt.Errorf("mosquitto accepted connections on %s but did not log that it runs within 10s", addr)
}

var errExited = errors.New("mosquitto exited")

// waitAccepting polls addr until a TCP connection succeeds, the process
// exits, or two seconds pass. It returns when the successful probe began:
// the broker was accepting then, and at most one 10 ms poll interval
// earlier.
func waitAccepting(addr string, exited <-chan error) (time.Time, error) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return time.Time{}, fmt.Errorf("%w: %v", errExited, err)
		default:
		}
		begun := time.Now()
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
			return begun, nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("mosquitto not accepting on %s after 2s", addr)
}

// Up is when the running broker was first seen accepting connections (the
// start of the probe that succeeded), for measuring how soon clients
// reconnect after a Stop and Start.
func (b *Broker) Up() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.up
}

// Stop kills the broker (SIGKILL: no goodbye to the clients, as when a
// broker's machine dies) and waits until it is gone. Stopping a stopped
// broker does nothing.
func (b *Broker) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Kill()
	select {
	case <-b.exited:
	case <-time.After(5 * time.Second):
		b.tb.Errorf("mosquitto did not exit within 5s of SIGKILL")
	}
	b.cmd = nil
}
