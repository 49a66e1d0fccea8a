package mqtttest

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
