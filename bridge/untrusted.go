package bridge

import (
	"fmt"
	"log/slog"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxLogValue bounds what one client-supplied value adds to a log line:
// room for any id, name or user agent the hub's clients really send.
const MaxLogValue = 200

// Untrusted is a value a client, plug, hub or browser sent, on its way
// into a log line: its LogValue (slog) and String (a message) are capped
// at MaxLogValue bytes, with how long it was, and its control and
// formatting characters (newlines, terminal escapes, bidirectional
// overrides) and bytes that are not UTF-8 are written as escapes. Without
// it, anyone who can send a request writes as much log as the request
// holds: a 12 KB installation id in a URL is 12 KB of journal, per
// request, on an SD card. Every log line that names such a value wraps it:
// "hub", bridge.Untrusted(id).
type Untrusted string

// LogValue implements slog.LogValuer.
func (u Untrusted) LogValue() slog.Value { return slog.StringValue(u.String()) }

// String returns the value capped and escaped; a short printable value
// comes back as it is, without copying.
func (u Untrusted) String() string {
	s := string(u)
	if len(s) <= MaxLogValue && plainASCII(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		if b.Len() >= MaxLogValue {
			fmt.Fprintf(&b, "…(%d bytes in all)", len(s))
			break
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && (r < 0x20 || r == 0x7f):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

func plainASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] >= 0x7f {
			return false
		}
	}
	return true
}
