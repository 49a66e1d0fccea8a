package mqtttest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// logRecorder is a testing.TB that keeps what is logged to it.
type logRecorder struct {
	testing.TB
	mu   sync.Mutex
	logs []string
}

func (r *logRecorder) Logf(format string, args ...any) {
	r.mu.Lock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
	r.mu.Unlock()
	r.TB.Logf(format, args...)
}

func (r *logRecorder) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.logs, "\n")
}

// TestStartMosquittoMovesOffATakenPort takes the port picked for the
// broker before Mosquitto binds it, as another process may between the
// pick and the start, with a listener that accepts connections (so a probe
// that only connects would take it for the broker). The broker must start
// on another port, say so, and be Mosquitto there.
func TestStartMosquittoMovesOffATakenPort(t *testing.T) {
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squatter.Close()
	go func() {
		for {
			c, err := squatter.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	taken := squatter.Addr().(*net.TCPAddr).Port
	picks := 0
	rec := &logRecorder{TB: t}
	b := startMosquitto(rec, func() int {
		picks++
		if picks == 1 {
			return taken
		}
		return FreePort(t)
	})
	if b.Addr == squatter.Addr().String() || picks != 2 {
		t.Fatalf("broker on %s after %d picks; the first pick, %s, was taken", b.Addr, picks, squatter.Addr())
	}
	if want := fmt.Sprintf("mosquitto could not listen on %s: another process took the port", squatter.Addr()); !strings.Contains(rec.text(), want) {
		t.Errorf("the test log does not say %q:\n%s", want, rec.text())
	}
	// An MQTT client is answered there: CONNACK, session not present,
	// accepted.
	c, err := net.DialTimeout("tcp", b.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write(Connect(4, "moved", "", "")); err != nil {
		t.Fatal(err)
	}
	first, body, err := ReadPacket(bufio.NewReader(c))
	if err != nil || first != 0x20 || len(body) != 2 || body[1] != 0 {
		t.Errorf("CONNECT to %s: packet %#x %x, %v; want CONNACK accepted", b.Addr, first, body, err)
	}
}
