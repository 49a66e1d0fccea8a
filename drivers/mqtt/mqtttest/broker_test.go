package mqtttest

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/infra/porttest"
)

// TestStartMosquittoMovesOffATakenPort takes the port picked for the
// broker before Mosquitto binds it, as another process may between the
// pick and the start, with a listener that accepts connections (so a probe
// that only connects would take it for the broker). The broker must start
// on another port, say so, and be Mosquitto there.
func TestStartMosquittoMovesOffATakenPort(t *testing.T) {
	squatter := porttest.Squat(t, "127.0.0.1:0")
	taken := squatter.Port
	picks := 0
	rec := &porttest.LogRecorder{TB: t}
	b := startMosquitto(rec, func() int {
		picks++
		if picks == 1 {
			return taken
		}
		return FreePort(t)
	})
	if b.Addr == squatter.String() || picks != 2 {
		t.Fatalf("broker on %s after %d picks; the first pick, %s, was taken", b.Addr, picks, squatter)
	}
	if want := fmt.Sprintf("mosquitto could not listen on %s: another process took the port", squatter); !strings.Contains(rec.Text(), want) {
		t.Errorf("the test log does not say %q:\n%s", want, rec.Text())
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
