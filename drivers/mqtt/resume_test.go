package mqtt

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/switchbridge/switchbridge/bridge"
)

// fakeBroker is just enough of an MQTT 3.1.1 broker to see what a client
// sends across a reconnect: it logs every client in, acknowledges
// subscriptions and pings, and never acknowledges a publish. The first
// connection that publishes a command (a payload) to topic is cut at once,
// as a broker that restarts mid-command would. After each SUBACK it sends
// the retained message, if any, as a broker holding the plug's "online"
// does: the driver holds a command for a plug it has not heard from.
type fakeBroker struct {
	ln       net.Listener
	topic    string
	retained [2]string // topic and payload

	mu    sync.Mutex
	conns int
	seen  []int // the connection number of each publish to topic
}

func startFakeBroker(t *testing.T, topic string, retained [2]string) *fakeBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBroker{ln: ln, topic: topic, retained: retained}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns++
			n := b.conns
			b.mu.Unlock()
			go b.serve(c, n)
		}
	}()
	return b
}

func (b *fakeBroker) serve(c net.Conn, n int) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		first, err := r.ReadByte()
		if err != nil {
			return
		}
		size, mult := 0, 1
		for i := 0; i < 4; i++ {
			d, err := r.ReadByte()
			if err != nil {
				return
			}
			size += int(d&0x7f) * mult
			mult *= 128
			if d&0x80 == 0 {
				break
			}
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		switch first >> 4 {
		case 1: // CONNECT
			c.Write([]byte{0x20, 2, 0, 0})
		case 8: // SUBSCRIBE: grant QoS 1 to every filter
			ack := []byte{body[0], body[1]}
			for i := 2; i+2 <= len(body); {
				l := int(body[i])<<8 | int(body[i+1])
				i += 2 + l + 1
				ack = append(ack, 1)
			}
			c.Write(append([]byte{0x90, byte(len(ack))}, ack...))
			if t, p := b.retained[0], b.retained[1]; t != "" {
				// PUBLISH, QoS 0, retained
				pub := append([]byte{0x31, byte(2 + len(t) + len(p)), 0, byte(len(t))}, t...)
				c.Write(append(pub, p...))
			}
		case 12: // PINGREQ
			c.Write([]byte{0xd0, 0})
		case 3: // PUBLISH
			l := int(body[0])<<8 | int(body[1])
			payload := body[2+l:]
			if first&0x06 != 0 {
				payload = payload[2:] // the packet id of QoS 1 and 2
			}
			// Only the command: the driver's state query goes to the same
			// topic with an empty payload.
			if string(body[2:2+l]) != b.topic || len(payload) == 0 {
				continue
			}
			b.mu.Lock()
			b.seen = append(b.seen, n)
			b.mu.Unlock()
			if n == 1 {
				return // cut before any PUBACK
			}
		}
	}
}

func (b *fakeBroker) publishes() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.seen...)
}

// TestCommandNotResentAfterReconnect: a command whose connection broke
// before the broker acknowledged it fails at its deadline, and is not sent
// again when the driver reconnects: paho keeps unacknowledged publishes and
// resends them after a reconnect, which would switch a plug long after the
// client was told the command failed.
func TestCommandNotResentAfterReconnect(t *testing.T) {
	b := startFakeBroker(t, "cmnd/tas/POWER", [2]string{"tele/tas/LWT", "Online"})
	d := openDriver(t, fmt.Sprintf("broker: tcp://%s\nconfirm_timeout: 1s", b.ln.Addr()),
		`id: tas, name: Tasmota, profile: tasmota, topic: tas`)
	dev := d.byID["tas"]
	// Sent only once the hub has heard the plug (its retained LWT): a
	// command to a plug never heard from fails without being published.
	eventually(t, 10*time.Second, "the plug heard from", func() bool { return dev.State().Available })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := dev.Do(ctx, bridge.CommandOn); err == nil {
		t.Fatal("a command the plug never confirmed succeeded")
	}
	eventually(t, 30*time.Second, "the driver reconnected", func() bool {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.conns >= 2 && d.connected()
	})
	time.Sleep(1500 * time.Millisecond) // time for a resend to arrive
	if got := b.publishes(); len(got) != 1 || got[0] != 1 {
		t.Errorf("the command was published on connections %v, want once, on the first", got)
	}
}
