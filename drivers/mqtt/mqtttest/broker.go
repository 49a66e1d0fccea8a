// Package mqtttest runs a real Mosquitto for tests and simulates the smart
// plugs the mqtt driver speaks to (Tasmota, Shelly Gen1 and RPC,
// Zigbee2MQTT, ESPHome and generic), each as its own MQTT client that sends
// what the firmware sends.
package mqtttest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
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
	log  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited <-chan error // receives when cmd has exited
	up     time.Time    // when the running broker was first seen accepting
}

// StartMosquitto starts Mosquitto with a generated config in tb.TempDir()
// and stops it when the test ends. Nagle's algorithm is off
// (set_tcp_nodelay), as every broker in front of switches should have it.
// Without the binary the test fails under CI=true and is skipped otherwise.
func StartMosquitto(tb testing.TB) *Broker {
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
	port := FreePort(tb)
	b := &Broker{
		tb:   tb,
		bin:  bin,
		Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		conf: filepath.Join(dir, "mosquitto.conf"),
		log:  filepath.Join(dir, "mosquitto.log"),
	}
	b.URL = "tcp://" + b.Addr
	conf := fmt.Sprintf(`# generated for one test
listener %d 127.0.0.1
allow_anonymous true
set_tcp_nodelay true
persistence false
log_dest file %s
log_type error
log_type warning
log_type notice
max_queued_messages 10000
`, port, b.log)
	if err := os.WriteFile(b.conf, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	b.Start()
	tb.Cleanup(b.Stop)
	return b
}

// FreePort returns a loopback TCP port nothing listens on now, never 1883
// (a system Mosquitto may hold that one).
func FreePort(tb testing.TB) int {
	tb.Helper()
	for range 10 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 1883 {
			return port
		}
	}
	tb.Fatal("no free port other than 1883")
	return 0
}

// Start runs the broker (again, after Stop) on the same port and returns
// once it accepts connections. Retained messages do not survive a restart,
// as with a broker without persistence.
func (b *Broker) Start() {
	b.tb.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd != nil {
		b.tb.Fatal("mosquitto is already running")
	}
	var lastErr error
	// The port may still be in TIME_WAIT from the previous run for a
	// moment; retry the start a few times.
	for attempt := 0; attempt < 20; attempt++ {
		cmd := exec.Command(b.bin, "-c", b.conf)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			b.tb.Fatalf("starting mosquitto: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		up, err := waitAccepting(b.Addr, exited)
		if err == nil {
			b.cmd, b.exited, b.up = cmd, exited, up
			return
		}
		_ = cmd.Process.Kill()
		if !errors.Is(err, errExited) {
			<-exited
		}
		lastErr = fmt.Errorf("%v; stderr: %s; log: %s", err, stderr.String(), b.readLog())
		time.Sleep(50 * time.Millisecond)
	}
	b.tb.Fatalf("mosquitto did not start: %v", lastErr)
}

func (b *Broker) readLog() string {
	data, _ := os.ReadFile(b.log)
	return string(data)
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
