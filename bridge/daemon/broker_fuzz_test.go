package daemon_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge/daemon/daemontest"
	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// FuzzDaemonBroker sends arbitrary bytes to the embedded broker of a
// running daemon (MQTT 5 on, where mochi's decoders have panicked), raw or
// after a valid MQTT 3.1.1 or 5 login. Whatever the bytes, the daemon must
// live on and answer HTTP: a panic no connection contains would end the
// fuzzing process.
func FuzzDaemonBroker(f *testing.F) {
	mqttAddr := fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(f))
	h := daemontest.Start(f, fmt.Sprintf(`mqtt:
  broker: embedded
  listen: %s
  mqtt5: true
  max_packet_size: 4096
  users:
    plug: {password: s3cret, switches: [tas]}
locations:
  - id: 1
    name: Home
    switches:
      - {id: tas, name: Tasmota plug, driver: mqtt, profile: tasmota, topic: tas1}
`, mqttAddr))
	client := &http.Client{Timeout: 5 * time.Second}
	const (
		raw = iota
		after311
		after5
	)
	f.Add(byte(raw), []byte{0x10, 0xFF, 0xFF, 0xFF, 0x7F})
	f.Add(byte(raw), mqtttest.Connect(5, "x", "plug", "s3cret"))
	f.Add(byte(after311), mqtttest.Packet(0x82, append([]byte{0, 1}, append(mqtttest.String("cmnd/tas1/#"), 1)...)))
	f.Add(byte(after311), mqtttest.Packet(0x31, append(mqtttest.String("cmnd/tas1/POWER"), "ON"...)))
	// A SUBSCRIBE whose property length (4) is shorter than its user
	// property: mochi v2.7.9 reads past the packet and panics.
	f.Add(byte(after5), mqtttest.Packet(0x82, []byte{0, 1, 4, 0x26, 0, 1, 'a', 0, 1, 'b'}))
	f.Add(byte(after5), mqtttest.Packet(0x82, []byte{0, 1, 0, 0, 1, 'a'})) // a filter without its options byte

	f.Fuzz(func(t *testing.T, mode byte, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		var login []byte
		switch mode % 3 {
		case after311:
			login = mqtttest.Connect(4, "fuzz", "plug", "s3cret")
		case after5:
			login = mqtttest.Connect(5, "fuzz", "plug", "s3cret")
		}
		c, err := net.DialTimeout("tcp", mqttAddr, 2*time.Second)
		if err != nil {
			t.Fatalf("the broker no longer accepts: %v", err)
		}
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write(append(login, data...))
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
		c.Close()

		resp, err := client.Get(h.URL + "/.well-known/oauth-authorization-server")
		if err != nil {
			t.Fatalf("the daemon no longer answers HTTP: %v", err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("the daemon answered HTTP %d", resp.StatusCode)
		}
	})
}
