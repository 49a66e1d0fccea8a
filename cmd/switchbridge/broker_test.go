package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// TestDaemonSurvivesHostileBrokerClients runs the real daemon with its
// embedded broker and sends it what a compromised plug could: the MQTT 5
// SUBSCRIBE that made the broker library panic while decoding, then bounded
// random garbage, raw and after a valid login. The process must live on and
// keep answering HTTP, since a crash would take the API, OAuth and every
// relay line with it.
func TestDaemonSurvivesHostileBrokerClients(t *testing.T) {
	dir := t.TempDir()
	addr, mqttAddr := freePort(t), freePort(t)
	cfg := filepath.Join(dir, "config.yaml")
	body := fmt.Sprintf(`server:
  listen: %s
  metrics_listen: "off"
data_dir: %s
mqtt:
  broker: embedded
  listen: %s
  mqtt5: true
  users:
    plug: {password: s3cret, switches: [tas]}
locations:
  - id: 1
    name: Home
    switches:
      - {id: tas, name: Tasmota plug, driver: mqtt, profile: tasmota, topic: tas1}
`, addr, filepath.Join(dir, "data"), mqttAddr)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, cfg, serveOptions{moved: func(key, _, to string) {
		if key == "mqtt.listen" {
			mqttAddr = to
		}
	}})
	addr = p.addr

	send := func(data []byte) {
		c, err := net.DialTimeout("tcp", mqttAddr, 2*time.Second)
		if err != nil {
			t.Fatalf("broker no longer accepts: %v\n%s", err, p.stderr)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		c.Write(data)
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
	}
	login5 := connectPacket(5, "hostile", "plug", "s3cret")
	// A SUBSCRIBE whose property length (4) is shorter than its user
	// property, which runs on into the topic filter.
	send(append(login5, packet(0x82, []byte{0, 1, 4, 0x26, 0, 1, 'a', 0, 1, 'b'})...))

	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 200 {
		junk := make([]byte, 1+rng.IntN(300))
		for j := range junk {
			junk[j] = byte(rng.UintN(256))
		}
		if i%4 != 0 { // mostly after a login, where the decoders run
			junk = append(append([]byte{}, login5...), junk...)
		}
		send(junk)
	}

	select {
	case <-p.done:
		t.Fatalf("daemon died: %v\n%s", p.err, p.stderr)
	default:
	}
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/")
	if err != nil {
		t.Fatalf("HTTP after hostile MQTT clients: %v\n%s", err, p.stderr)
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		t.Errorf("GET / = %d after hostile MQTT clients", resp.StatusCode)
	}
}

// The raw packet builders, under the names these tests use.
var (
	packet        = mqtttest.Packet
	connectPacket = mqtttest.Connect
)
