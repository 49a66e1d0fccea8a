package mqtttest

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// Raw MQTT packets, for tests that send what no well-behaved client would.

// String is an MQTT UTF-8 string: its length in two bytes, then the bytes.
func String(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }

// Packet frames body with its first byte (type and flags) and its
// remaining length.
func Packet(first byte, body []byte) []byte {
	out := []byte{first}
	for n := len(body); ; {
		b := byte(n % 128)
		if n /= 128; n > 0 {
			b |= 0x80
		}
		out = append(out, b)
		if n == 0 {
			break
		}
	}
	return append(out, body...)
}

// Connect is a clean-session CONNECT (keepalive 30 s) at protocol level 4
// (3.1.1) or 5, with a login when user is not empty.
func Connect(level byte, clientID, user, pass string) []byte {
	flags := byte(0x02)
	if user != "" {
		flags |= 0xC0
	}
	body := append(String("MQTT"), level, flags, 0, 30)
	if level == 5 {
		body = append(body, 0) // no properties
	}
	body = append(body, String(clientID)...)
	if user != "" {
		body = append(body, String(user)...)
		body = append(body, String(pass)...)
	}
	return Packet(0x10, body)
}

// Subscribe is a SUBSCRIBE with packet id 7 of filters, each at QoS 0, at
// protocol level 4 (3.1.1) or 5.
func Subscribe(level byte, filters ...string) []byte {
	body := []byte{0, 7}
	if level == 5 {
		body = append(body, 0) // no properties
	}
	for _, f := range filters {
		body = append(append(body, String(f)...), 0)
	}
	return Packet(0x82, body)
}

// ReadPacket reads one MQTT packet and returns its first byte (type and
// flags) and its body.
func ReadPacket(r io.ByteReader) (byte, []byte, error) {
	first, err := r.ReadByte()
	if err != nil {
		return 0, nil, err
	}
	n, err := readVarint(r)
	if err != nil {
		return 0, nil, err
	}
	body := make([]byte, n)
	for i := range body {
		if body[i], err = r.ReadByte(); err != nil {
			return 0, nil, err
		}
	}
	return first, body, nil
}

// ReadSuback reads packets until a SUBACK and returns its codes, one per
// filter subscribed to, at protocol level 4 or 5.
func ReadSuback(r io.ByteReader, level byte) ([]byte, error) {
	for {
		first, body, err := ReadPacket(r)
		if err != nil {
			return nil, err
		}
		if first>>4 != 9 {
			continue // a retained message, say
		}
		if len(body) < 2 {
			return nil, errors.New("a SUBACK without its packet id")
		}
		body = body[2:]
		if level == 5 {
			br := bytes.NewReader(body)
			n, err := readVarint(br)
			if err != nil || n > br.Len() {
				return nil, errors.New("a SUBACK with bad properties")
			}
			body = body[len(body)-br.Len()+n:]
		}
		return body, nil
	}
}

// readVarint reads an MQTT variable byte integer.
func readVarint(r io.ByteReader) (int, error) {
	n, mul := 0, 1
	for range 4 {
		b, err := r.ReadByte()
		if err != nil {
			return 0, err
		}
		n += int(b&0x7f) * mul
		if b&0x80 == 0 {
			return n, nil
		}
		mul *= 128
	}
	return 0, errors.New("a remaining length of more than 4 bytes")
}

// DialFrom connects to addr from the loopback address ip (127.0.0.2, …), so
// the broker sees another client address, writes the packets, and closes
// the connection when the test ends.
func DialFrom(tb testing.TB, ip, addr string, pkts ...[]byte) net.Conn {
	tb.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 3 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	for _, p := range pkts {
		if _, err := c.Write(p); err != nil {
			tb.Fatal(err)
		}
	}
	return c
}
