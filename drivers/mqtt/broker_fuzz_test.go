package mqtt

import (
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/drivers/mqtt/mqtttest"
)

// FuzzEmbeddedBroker sends arbitrary bytes to the embedded broker over
// TCP, raw or after a valid MQTT 3.1.1 or 5 login, to a broker with MQTT 5
// off (the default) and one with it on (where mochi's decoders have
// panicked). Whatever the bytes, the test process must live on and the
// broker must still log a fresh client in, from another address.
// fuzzAddr counts FuzzEmbeddedBroker's inputs, to give each a loopback
// address of its own.
var fuzzAddr atomic.Uint32

func FuzzEmbeddedBroker(f *testing.F) {
	var addrs [2]string
	for i, extra := range []string{"", "\nmqtt5: true"} {
		addrs[i] = fmt.Sprintf("127.0.0.1:%d", mqtttest.FreePort(f))
		openDriver(f, "broker: embedded\nlisten: "+addrs[i]+"\nmax_packet_size: 4096\nusers:\n  plug: {password: s3cret, switches: [tas]}"+extra,
			`id: tas, name: Tasmota, profile: tasmota, topic: tas1`)
	}
	const (
		raw = iota
		after311
		after5
	)
	f.Add(byte(raw), []byte{0x10, 0xFF, 0xFF, 0xFF, 0x7F})
	f.Add(byte(raw), mqttConnect(5, "x", "plug", "s3cret"))
	f.Add(byte(after311), mqttPacket(0x82, append([]byte{0, 1}, append(mqttString("cmnd/tas1/#"), 1)...)))
	f.Add(byte(after311), mqttPacket(0x31, append(mqttString("cmnd/tas1/POWER"), "ON"...)))
	f.Add(byte(after5), malformedSubscribe)
	f.Add(byte(after5)+3, malformedSubscribe)                           // to the broker with MQTT 5 on
	f.Add(byte(after5)+3, mqttPacket(0x82, []byte{0, 1, 0, 0, 1, 'a'})) // a filter without its options byte

	f.Fuzz(func(t *testing.T, mode byte, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		addr := addrs[int(mode/3)%2]
		var login []byte
		switch mode % 3 {
		case after311:
			login = mqttConnect(4, "fuzz", "plug", "s3cret")
		case after5:
			login = mqttConnect(5, "fuzz", "plug", "s3cret")
		}
		// From an address of its own: bytes that make a CONNECT with a
		// wrong password get that address's logins throttled, which the
		// fresh client's address must not share. Each input takes the
		// next of 200 addresses, so one input's throttling does not hold
		// up the next ones (a throttled login waits out the deadline,
		// which stalled the fuzzer until its time ran out).
		n := fuzzAddr.Add(1)
		c := mqtttest.DialFrom(t, fmt.Sprintf("127.0.%d.%d", 10+n/200%200, 2+n%200), addr)
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write(append(login, data...))
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, io.LimitReader(c, 1<<20))
		c.Close()

		// A fresh client still gets in.
		fresh, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatalf("broker no longer accepts: %v", err)
		}
		defer fresh.Close()
		if _, err := fresh.Write(mqttConnect(4, "fresh", "plug", "s3cret")); err != nil {
			t.Fatal(err)
		}
		if code, err := readConnack(fresh); err != nil || code != 0 {
			t.Fatalf("fresh login: code %#x, %v", code, err)
		}
	})
}
